package agentsim_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// stopOpts are testOpts with a grace of seconds, not the protocol's minute.
var stopOpts = func() agentsim.Options {
	o := testOpts
	o.SelfTerminationGrace = 2 * time.Second
	o.BootDelay = 1500 * time.Millisecond
	return o
}()

// ec2Spy wraps a Sim's EC2 client: it counts each instance's StopInstances
// calls and the states the agents' DescribeInstances (by instance id)
// showed it in, and answers every StopInstances with stopErr when set
// (before any agent starts).
type ec2Spy struct {
	agentsim.EC2API
	stopErr error

	mu    sync.Mutex
	stops map[string]int
	seen  map[string]map[ec2types.InstanceStateName]int
}

func (s *ec2Spy) StopInstances(ctx context.Context, in *ec2.StopInstancesInput, opts ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error) {
	s.mu.Lock()
	for _, id := range in.InstanceIds {
		s.stops[id]++
	}
	s.mu.Unlock()
	if s.stopErr != nil {
		return nil, s.stopErr
	}
	return s.EC2API.StopInstances(ctx, in, opts...)
}

func (s *ec2Spy) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	out, err := s.EC2API.DescribeInstances(ctx, in, opts...)
	if err != nil || len(in.InstanceIds) == 0 { // WatchFleet's, by tag
		return out, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			id := aws.ToString(inst.InstanceId)
			if s.seen[id] == nil {
				s.seen[id] = map[ec2types.InstanceStateName]int{}
			}
			if inst.State != nil {
				s.seen[id][inst.State.Name]++
			}
		}
	}
	return out, err
}

func (s *ec2Spy) stopsOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stops[id]
}

// seenAs is how many answers showed the instance in state since forget.
func (s *ec2Spy) seenAs(id string, state ec2types.InstanceStateName) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[id][state]
}

func (s *ec2Spy) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, id)
}

// awaitSeen waits until the agent's DescribeInstances showed the instance in
// state n times since forget.
func (h *harness) awaitSeen(t *testing.T, id string, state ec2types.InstanceStateName, n int) {
	t.Helper()
	await.True(t, fmt.Sprintf("the agent to see %s %s %d times", id, state, n), func() error {
		if got := h.ec2.seenAs(id, state); got < n {
			return fmt.Errorf("seen %s %d times; events %v", state, got, h.events.of(id))
		}
		return nil
	})
}

// thresholdNow is now as a record's threshold holds it: whole seconds.
func thresholdNow() time.Time { return time.Now().UTC().Truncate(time.Second) }

// setIdle makes the record idle and unowned with threshold, in the stopped
// tier until stopUntil (none when zero), as a release does.
func (h *harness) setIdle(t *testing.T, id string, threshold, stopUntil time.Time) {
	t.Helper()
	update := "SET #s = :s, #r = :r, #t = :t"
	names := map[string]string{"#s": protocol.AttrState, "#r": protocol.AttrRunID, "#t": protocol.AttrThreshold, "#u": protocol.AttrStopUntil}
	values := map[string]ddbtypes.AttributeValue{
		":s": &ddbtypes.AttributeValueMemberS{Value: protocol.StateIdle},
		":r": &ddbtypes.AttributeValueMemberS{Value: ""},
		":t": &ddbtypes.AttributeValueMemberS{Value: protocol.FormatTime(threshold)},
	}
	if stopUntil.IsZero() {
		update += " REMOVE #u"
	} else {
		update += ", #u = :u"
		values[":u"] = &ddbtypes.AttributeValueMemberS{Value: protocol.FormatTime(stopUntil)}
	}
	_, err := ddbClient.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName: h.table(), Key: protocol.Key(protocol.TypeInstance, id),
		UpdateExpression: aws.String(update), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// claimStopped claims the record for runID as a claim takes a runner of the
// stopped tier: claimed for 5 minutes, its stopUntil removed.
func (h *harness) claimStopped(ctx context.Context, id, runID string) error {
	_, err := ddbClient.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: h.table(), Key: protocol.Key(protocol.TypeInstance, id),
		UpdateExpression: aws.String("SET #s = :s, #r = :r, #t = :t REMOVE #u"),
		ExpressionAttributeNames: map[string]string{
			"#s": protocol.AttrState, "#r": protocol.AttrRunID, "#t": protocol.AttrThreshold, "#u": protocol.AttrStopUntil,
		},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":s": &ddbtypes.AttributeValueMemberS{Value: protocol.StateClaimed},
			":r": &ddbtypes.AttributeValueMemberS{Value: runID},
			":t": &ddbtypes.AttributeValueMemberS{Value: protocol.FormatTime(time.Now().Add(5 * time.Minute))},
		},
	})
	return err
}

// startStopped claims a stopped runner for runID and starts its instance,
// as a claim does, and returns when StartInstances was called.
func (h *harness) startStopped(t *testing.T, id, runID string) time.Time {
	t.Helper()
	if err := h.claimStopped(t.Context(), id, runID); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if _, err := ec2Client.StartInstances(t.Context(), &ec2.StartInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	return started
}

// awaitInstanceState waits until EC2 shows the instance in want.
func (h *harness) awaitInstanceState(t *testing.T, id string, want ec2types.InstanceStateName) {
	t.Helper()
	await.True(t, "instance "+id+" to be "+string(want), func() error {
		if got := instanceState(t, id); got != want {
			return fmt.Errorf("instance is %s; agent events %v", got, h.events.of(id))
		}
		return nil
	})
}

// awaitStoppedSelf waits until the agent stopped its instance, checks that
// it did not before the record's threshold + the grace and that EC2 shows the
// instance stopped, and returns the event.
func (h *harness) awaitStoppedSelf(t *testing.T, id string, threshold time.Time) loggedEvent {
	t.Helper()
	stopped := h.awaitEvent(t, id, agentsim.EventStoppedSelf, "the agent to stop its instance")
	if earliest := threshold.Add(stopOpts.SelfTerminationGrace); stopped.Time.Before(earliest) {
		t.Errorf("stopped at %s, before threshold %s + the grace %s", stopped.Time.Format(time.RFC3339Nano), threshold.Format(time.RFC3339), stopOpts.SelfTerminationGrace)
	}
	if got := instanceState(t, id); got != ec2types.InstanceStateNameStopped {
		t.Fatalf("instance is %s after its agent stopped it", got)
	}
	return stopped
}

// assertSilentSince checks that the agent made no call about its instance to
// the table (no heartbeat, no signal, no record read) since it had made calls
// of them.
func (h *harness) assertSilentSince(t *testing.T, id string, calls int, while string) {
	t.Helper()
	if got := h.rec.callsAbout(id); got != calls {
		t.Errorf("the agent made %d table calls about its instance %s", got-calls, while)
	}
}

// A runner of the stopped tier stops its instance once its threshold is more
// than the grace past, and its agent then makes no table call; started again
// by a claim, it boots, signals UD_OK for its InitialRunId tag again and
// registers for the claim's run. Released once its stopped time is over, it
// terminates itself instead of stopping.
func TestStopAndResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, stopOpts)
	h.sim.WatchFleet(t.Context(), nil)
	id := h.launch(t, 1, "run-f")[0]
	h.putRecord(t, protocol.Instance{ID: id, State: protocol.StateCreated, RunID: "run-f", Threshold: protocol.FormatTime(time.Now().Add(10 * time.Minute))})
	h.waitSignal(t, id, "UD_REG_OK run-f")

	// Released into the stopped tier; then its idle time passes.
	h.setIdle(t, id, time.Now().Add(10*time.Minute), time.Now().Add(time.Hour))
	h.waitSignal(t, id, "UD_REMOVE_REG_REMOVE_RUN_OK run-f")
	threshold := thresholdNow()
	h.setIdle(t, id, threshold, threshold.Add(time.Hour))
	stopped := h.awaitStoppedSelf(t, id, threshold)
	time.Sleep(2 * time.Second) // two heartbeat intervals, four self-checks
	h.assertSilentSince(t, id, stopped.calls, "since it stopped")

	started := h.startStopped(t, id, "run-2")
	resumed := h.awaitEvent(t, id, agentsim.EventResumed, "the agent to boot again")
	if resumed.Time.Before(started.Add(stopOpts.BootDelay)) {
		t.Errorf("booted at %s, less than the boot delay %s after StartInstances at %s", resumed.Time.Format(time.RFC3339Nano), stopOpts.BootDelay, started.Format(time.RFC3339Nano))
	}
	h.waitSignal(t, id, "UD_REG_OK run-2")
	h.awaitFreshHeartbeat(t, id, started)

	h.setIdle(t, id, time.Now().Add(10*time.Minute), time.Time{})
	h.waitSignal(t, id, "UD_REMOVE_REG_REMOVE_RUN_OK run-2")
	h.setIdle(t, id, time.Now().Add(-time.Minute), time.Now().Add(-time.Second))
	h.awaitInstanceState(t, id, ec2types.InstanceStateNameTerminated)
	h.awaitEvent(t, id, agentsim.EventSelfTerminated, "the agent to have terminated its instance")
	if n := h.ec2.stopsOf(id); n != 1 {
		t.Errorf("%d StopInstances calls, want the one before the claim", n)
	}

	settle(t, "signals written", func() []string { return h.rec.of(id) }, []string{
		"UD_OK run-f", "UD_REG_OK run-f", "UD_REMOVE_REG_OK run-f", "UD_REMOVE_REG_REMOVE_RUN_OK run-f",
		"UD_OK run-f", "UD_REG_OK run-2", "UD_REMOVE_REG_OK run-2", "UD_REMOVE_REG_REMOVE_RUN_OK run-2",
	})
	settle(t, "Registrations", func() []string { return h.sim.Registrations(id) }, []string{"run-f", "run-2"})
	settle(t, "Releases", func() []string { return h.sim.Releases(id) }, []string{"run-f", "run-2"})
}

// The agent reads its record again right before it stops: a claim that took
// the runner since the self-check read it keeps it running, and served.
func TestNoStopWhenClaimedBeforeTheStop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, stopOpts)
	var decisions atomic.Int32
	agentsim.SetBeforeStopRecheck(h.sim, func(id string) {
		if decisions.Add(1) == 1 {
			if err := h.claimStopped(context.Background(), id, "run-1"); err != nil {
				t.Errorf("claiming the record between the two reads: %v", err)
			}
		}
	})
	id := h.seed(t, agentsim.Healthy)
	threshold := thresholdNow().Add(-time.Minute)
	h.setIdle(t, id, threshold, threshold.Add(time.Hour))
	await.True(t, "the agent to register for the run that claimed it (only the decision to stop writes it)", func() error {
		if n := h.ec2.stopsOf(id); n > 0 {
			t.Fatalf("the agent stopped its instance after a claim took it; events %v", h.events.of(id))
		}
		if got := h.signal(t, id); got != "UD_REG_OK run-1" {
			return fmt.Errorf("latest signal %q; events %v", got, h.events.of(id))
		}
		return nil
	})
	if n := decisions.Load(); n != 1 {
		t.Errorf("the agent decided to stop %d times, want once", n)
	}
	if got := instanceState(t, id); got != ec2types.InstanceStateNameRunning {
		t.Errorf("instance is %s", got)
	}
}

// A runner EC2 does not let stop (a Spot instance: UnsupportedOperation;
// moto stops Spot instances, so the refusal is the spy's) terminates itself.
func TestTerminatesWhenStopRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, stopOpts)
	h.ec2.stopErr = &smithy.GenericAPIError{Code: "UnsupportedOperation", Message: "You can't stop the Spot Instance"}
	ids, err := h.sim.SeedIdle(t.Context(), 1, agentsim.SeedSpec{ResourceClass: class, UsageClass: protocol.UsageSpot})
	if err != nil {
		t.Fatal(err)
	}
	id := ids[0]
	threshold := thresholdNow().Add(-time.Minute)
	h.setIdle(t, id, threshold, threshold.Add(time.Hour))
	h.awaitInstanceState(t, id, ec2types.InstanceStateNameTerminated)
	term := h.awaitEvent(t, id, agentsim.EventSelfTerminated, "the agent to have terminated its instance")
	if !strings.Contains(term.Detail, "UnsupportedOperation") {
		t.Errorf("self-terminated: %q, want the refused stop as the reason", term.Detail)
	}
	if n := h.ec2.stopsOf(id); n != 1 {
		t.Errorf("%d StopInstances calls, want 1", n)
	}
	if h.events.has(id, agentsim.EventStoppedSelf) {
		t.Error("a stopped event after a refused stop")
	}
}

// A NoResume runner stops as any other, and once started again does
// nothing until its instance is terminated.
func TestNoResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, stopOpts)
	id := h.seed(t, agentsim.NoResume)
	threshold := thresholdNow().Add(-time.Minute)
	h.setIdle(t, id, threshold, threshold.Add(time.Hour))
	stopped := h.awaitStoppedSelf(t, id, threshold)
	h.ec2.forget(id)
	h.startStopped(t, id, "run-1")
	// A resuming agent heartbeats between its first look at its running
	// instance and its next (the boot delay lies between them).
	h.awaitSeen(t, id, ec2types.InstanceStateNameRunning, 2)
	h.assertSilentSince(t, id, stopped.calls, "since it stopped")
	if h.events.has(id, agentsim.EventResumed) {
		t.Error("a NoResume agent resumed")
	}
	if _, err := ec2Client.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	end := h.awaitEvent(t, id, agentsim.EventStopped, "the agent to end with its instance")
	if !strings.HasPrefix(end.Detail, "its instance") {
		t.Errorf("the agent ended: %q, want its instance gone", end.Detail)
	}
}

// An agent started for an instance that is stopped (simagents adopting a
// pool's runners) waits, silent, for it to start, and then boots.
func TestAgentOfAStoppedInstanceWaits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, stopOpts)
	id := h.launch(t, 1, "run-f")[0]
	threshold := thresholdNow().Add(-time.Minute)
	h.putRecord(t, protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: protocol.FormatTime(threshold), StopUntil: protocol.FormatTime(threshold.Add(time.Hour))})
	if _, err := ec2Client.StopInstances(t.Context(), &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if !h.sim.Start(t.Context(), id, agentsim.Healthy) {
		t.Fatal("no agent started")
	}
	h.awaitSeen(t, id, ec2types.InstanceStateNameStopped, 2)
	h.assertSilentSince(t, id, 0, "while its instance is stopped")

	h.startStopped(t, id, "run-1")
	h.waitSignal(t, id, "UD_REG_OK run-1")
	settle(t, "signals written", func() []string { return h.rec.of(id) }, []string{"UD_OK run-f", "UD_REG_OK run-1"})
	if !h.events.has(id, agentsim.EventResumed) {
		t.Errorf("no resumed event; events %v", h.events.of(id))
	}
}

// A runner launched to fill the stopped tier (InitialRunId a fill id, its
// record idle with the launch time as threshold) signals UD_OK for the fill
// id, registers nothing, and stops itself once the grace passed.
func TestStoppedFill(t *testing.T) {
	t.Parallel()
	h := newHarness(t, stopOpts)
	h.sim.WatchFleet(t.Context(), nil)
	fill := fillID()
	launched := thresholdNow()
	id := h.launch(t, 1, fill)[0]
	h.putRecord(t, protocol.Instance{
		ID: id, State: protocol.StateIdle, Threshold: protocol.FormatTime(launched),
		StopUntil: protocol.FormatTime(launched.Add(time.Hour)), LaunchedAt: protocol.FormatTime(launched),
	})
	h.awaitStoppedSelf(t, id, launched)
	settle(t, "signals written", func() []string { return h.rec.of(id) }, []string{"UD_OK " + fill})
	if kinds := h.events.of(id); !slices.Equal(kinds, []agentsim.EventKind{agentsim.EventStarted, agentsim.EventUserDataOK, agentsim.EventStoppedSelf}) {
		t.Errorf("events %v, want started, UD_OK, then the stop", kinds)
	}
	if got := h.sim.Registrations(id); len(got) != 0 {
		t.Errorf("Registrations %q", got)
	}
}
