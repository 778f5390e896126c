package agentsim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// TagSeeded marks instances launched by SeedIdle, which WatchFleet leaves
// alone (SeedIdle starts their agents with the behaviour asked for).
const TagSeeded = "ec2runners:agentsim"

// phase is where an agent is in "The agent's loop".
type phase int

const (
	phaseWaiting       phase = iota // step 3: waiting for a runId
	phaseRegistering                // SlowRegister: registering runID at registerAt
	phaseRegistered                 // step 5: registered for runID
	phaseIgnoring                   // given runID but not registered (NeverRegisters, RegistrationFails)
	phaseAwaitingToken              // given runID, its registration token not handed yet
	phaseDeregistering              // left runID, its removal token not handed yet
)

// agent is one simulated runner agent. Its fields belong to its goroutine.
type agent struct {
	sim *Sim
	id  string
	b   Behavior
	rng *rand.Rand

	arn    string // its instance's
	target string // the GitHub target it registers with; "": no tokens needed

	primed       bool // SeedIdle wrote the first heartbeat already
	described    bool
	initialRunID string // the InitialRunId tag (if a run id), once described
	lastErr      string // last error logged, to log each distinct error once
	gone         string // why the agent must stop, set by fail

	// What a boot starts afresh: the agent of a stopped instance keeps
	// nothing of it, as a real agent's memory does not survive a stop.
	prepared   bool // UD_OK signalled for its InitialRunId tag, if any
	phase      phase
	runID      string // run being registered, registered, or ignored
	registerAt time.Time
	tokenSince time.Time // when it began to wait for the token of runID
}

func (a *agent) opts() Options { return a.sim.opts }

func (a *agent) table() *string { return aws.String(protocol.TableName(a.sim.pool)) }

// jitter spreads d by ±10% so agents started together do not poll in step.
func (a *agent) jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.9 + 0.2*a.rng.Float64()))
}

func (a *agent) emit(kind EventKind, runID, detail string) {
	a.sim.emit(Event{Time: time.Now(), InstanceID: a.id, Kind: kind, RunID: runID, Detail: detail})
}

// fail records and logs an error; the caller retries at its next tick. A
// missing table is no error: the pool was deleted, and the agent stops.
func (a *agent) fail(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return // cancelled: not an error of the agent
	}
	var noTable *ddbtypes.ResourceNotFoundException
	if errors.As(err, &noTable) {
		a.gone = "the pool's table " + protocol.TableName(a.sim.pool) + " does not exist"
		return
	}
	err = fmt.Errorf("agent %s: %s: %w", a.id, what, err)
	a.sim.recordErr(err)
	if msg := ErrorKey(err); msg != a.lastErr {
		a.lastErr = msg
		a.sim.logf("%v (retrying)", err)
	}
}

func (a *agent) ok() { a.lastErr = "" }

// loop runs the agent until ctx is done or its instance is gone.
func (a *agent) loop(ctx context.Context) {
	a.emit(EventStarted, "", a.b.String())
	a.emit(EventStopped, a.runID, a.live(ctx))
}

// live runs the agent through its instance's stops and starts, and returns
// why the agent ends.
func (a *agent) live(ctx context.Context) (end string) {
	running := true // an agent SeedIdle started, for the instance it launched
	if !a.described {
		// As the real agent reads its instance metadata first. An instance
		// found stopped (an agent started for a runner of the stopped tier)
		// waits to be started like one that stopped itself.
		state, end := a.watchInstance(ctx, anyState)
		if end != "" {
			return end
		}
		running = started(state)
	}
	for {
		if running {
			if end := a.serve(ctx); end != "" {
				return end
			}
		}
		// The emulator shows a stopped instance stopped at once. Should a
		// stale "running" wake the agent early, as EC2's eventual consistency
		// could, its next self-check stops the instance again.
		if _, end := a.watchInstance(ctx, started); end != "" {
			return end
		}
		if a.b == NoResume {
			_, end := a.watchInstance(ctx, neverState)
			return end
		}
		select {
		case <-ctx.Done():
			return "cancelled"
		case <-time.After(a.opts().BootDelay):
		}
		a.emit(EventResumed, "", "its instance runs again; booted in "+protocol.FormatDuration(a.opts().BootDelay))
		running = true
	}
}

// serve is the agent of a running instance, from its boot: it heartbeats,
// checks itself and steps through the loop until it stopped its instance
// ("" returned) or the agent ends (why returned).
func (a *agent) serve(ctx context.Context) (end string) {
	a.prepared, a.phase, a.runID, a.registerAt, a.tokenSince = false, phaseWaiting, "", time.Time{}, time.Time{}
	var beat <-chan time.Time
	if a.b != NoHeartbeat {
		if !a.primed {
			a.heartbeat(ctx)
		}
		t := time.NewTicker(a.opts().HeartbeatInterval)
		defer t.Stop()
		beat = t.C
	}
	a.primed = false // a boot after a stop writes its first heartbeat itself
	check := time.NewTimer(0)
	defer check.Stop()
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return "cancelled"
		case <-beat:
			a.heartbeat(ctx)
			if a.gone != "" {
				return a.gone
			}
		case <-check.C:
			stoppedItself, end := a.selfCheck(ctx)
			if end = cmp.Or(end, a.gone); end != "" || stoppedItself {
				return end
			}
			check.Reset(a.jitter(a.opts().SelfCheckInterval))
		case <-poll.C:
			next, end := a.step(ctx)
			if end = cmp.Or(end, a.gone); end != "" {
				return end
			}
			poll.Reset(next)
		}
	}
}

// clock is the agent's own clock, ClockSkew off the machine's.
func (a *agent) clock() time.Time { return time.Now().Add(a.opts().ClockSkew) }

// heartbeat is step 1.
func (a *agent) heartbeat(ctx context.Context) {
	_, err := a.sim.c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: a.table(),
		Item:      protocol.HeartbeatItem(a.arn, protocol.FormatTime(a.clock())),
	})
	if err != nil {
		a.fail(ctx, "writing heartbeat", err)
		return
	}
	a.ok()
}

// signal writes a worker signal.
func (a *agent) signal(ctx context.Context, state, runID string) error {
	_, err := a.sim.c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: a.table(),
		Item: protocol.Signal{
			InstanceARN: a.arn, State: state, RunID: runID, UpdatedAt: protocol.FormatTime(a.clock()),
		}.Item(),
	})
	if err != nil {
		a.fail(ctx, "writing signal "+state+" for run "+runID, err)
		return err
	}
	a.ok()
	return nil
}

// record reads the agent's instance record (consistently); found is false
// while the record does not exist (a fleet instance before the claim writes it).
func (a *agent) record(ctx context.Context) (rec protocol.Instance, found bool, err error) {
	out, err := a.sim.c.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      a.table(),
		Key:            protocol.Key(protocol.TypeInstance, a.id),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return protocol.Instance{}, false, err
	}
	if len(out.Item) == 0 {
		return protocol.Instance{}, false, nil
	}
	rec, err = protocol.InstanceFromItem(out.Item)
	if err != nil {
		return protocol.Instance{}, false, err
	}
	return rec, true, nil
}

// step advances steps 3 to 6 by one record read, after the boot's UD_OK.
// It returns when to step next, or why the agent stops.
func (a *agent) step(ctx context.Context) (next time.Duration, stop string) {
	o := a.opts()
	wait, poll := a.jitter(o.WaitInterval), a.jitter(o.PollInterval)
	if !a.prepared {
		// At every boot, as the real agent: what launched the instance (a
		// claim's fleet, a fill of the pool's targets) waits for it.
		if a.initialRunID != "" {
			if a.signal(ctx, protocol.SignalUserDataOK, a.initialRunID) != nil {
				return wait, ""
			}
			a.emit(EventUserDataOK, a.initialRunID, "")
		}
		a.prepared = true
	}
	rec, found, err := a.record(ctx)
	if err != nil {
		a.fail(ctx, "reading its instance record", err)
		return wait, ""
	}
	a.ok()
	if found && rec.State == protocol.StateTerminated {
		return 0, "its instance record is terminated"
	}
	runID := rec.RunID // "" while there is no record
	if protocol.ValidateRunID(runID) != nil {
		// As the real agent: no runner registers with a label the protocol
		// refuses (one in capitals would match another run's label).
		runID = ""
	}

	switch a.phase {
	case phaseWaiting: // step 3
		if runID == "" {
			return wait, ""
		}
		a.runID = runID
		switch a.b {
		case SlowRegister:
			a.phase = phaseRegistering
			a.registerAt = time.Now().Add(o.RegisterDelay)
			return o.RegisterDelay, ""
		case NeverRegisters:
			a.phase = phaseIgnoring
			return poll, ""
		case RegistrationFails:
			if a.signal(ctx, protocol.SignalRegistrationFailed, runID) != nil {
				return wait, ""
			}
			a.emit(EventRegistrationFailed, runID, "")
			a.phase = phaseIgnoring
			return poll, ""
		default:
			return a.register(ctx)
		}
	case phaseRegistering:
		// Like a real agent, it finishes registering even if the run is
		// gone meanwhile, and then deregisters as in step 6.
		if d := time.Until(a.registerAt); d > 0 {
			return d, ""
		}
		return a.register(ctx)
	case phaseAwaitingToken:
		if runID != a.runID { // given another run, or none, meanwhile
			a.phase, a.runID, a.tokenSince = phaseWaiting, "", time.Time{}
			return 0, ""
		}
		return a.register(ctx)
	case phaseRegistered: // step 5
		if runID == a.runID {
			return poll, ""
		}
		return a.release(ctx)
	case phaseDeregistering:
		return a.release(ctx)
	default: // phaseIgnoring
		if runID == a.runID {
			return poll, ""
		}
		a.phase, a.runID = phaseWaiting, ""
		return 0, ""
	}
}

// register is step 4 for a.runID, with its registration token.
func (a *agent) register(ctx context.Context) (time.Duration, string) {
	wait, poll := a.jitter(a.opts().WaitInterval), a.jitter(a.opts().PollInterval)
	switch handed, err := a.hasToken(ctx, protocol.SortKeyRegistrationToken, a.runID); {
	case err != nil:
		a.fail(ctx, "reading its registration token", err)
		return wait, ""
	case !handed && a.waitedForToken() < a.opts().TokenWait:
		a.phase = phaseAwaitingToken
		return wait, ""
	case !handed:
		if a.signal(ctx, protocol.SignalRegistrationFailed, a.runID) != nil {
			return wait, ""
		}
		a.emit(EventRegistrationFailed, a.runID, "no registration token for the run")
		a.phase, a.tokenSince = phaseIgnoring, time.Time{}
		return poll, ""
	}
	if a.signal(ctx, protocol.SignalRegistered, a.runID) != nil {
		return wait, ""
	}
	a.phase, a.tokenSince = phaseRegistered, time.Time{}
	a.emit(EventRegistered, a.runID, "")
	return poll, ""
}

// waitedForToken is how long the agent has waited for the token of its run.
func (a *agent) waitedForToken() time.Duration {
	if a.tokenSince.IsZero() {
		a.tokenSince = time.Now()
	}
	return time.Since(a.tokenSince)
}

// hasToken tells whether its agent partition holds the token sk for runID
// and its target, valid for another minute, as the real agent requires: a
// token for another run or target, planted or stale, is none. Without a
// GitHub target no token is needed.
func (a *agent) hasToken(ctx context.Context, sk, runID string) (bool, error) {
	if a.target == "" {
		return true, nil
	}
	out, err := a.sim.c.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: a.table(), Key: protocol.AgentKey(a.arn, sk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, err
	}
	tok, err := protocol.RunnerTokenFromItem(out.Item)
	return err == nil && tok.RunID == runID && tok.Target == a.target && time.Until(tok.ExpiresAt) > time.Minute, nil
}

// release is step 6 for a.runID, after the record's runId changed: it
// deregisters with its removal token.
func (a *agent) release(ctx context.Context) (time.Duration, string) {
	old, wait := a.runID, a.jitter(a.opts().WaitInterval)
	if a.b == NeverConfirmsRelease {
		a.emit(EventReleaseSilent, old, "")
		a.phase, a.runID = phaseWaiting, ""
		return 0, ""
	}
	switch handed, err := a.hasToken(ctx, protocol.SortKeyRemovalToken, old); {
	case err != nil:
		a.fail(ctx, "reading its removal token", err)
		return wait, ""
	case !handed && a.waitedForToken() < a.opts().TokenWait:
		a.phase = phaseDeregistering
		return wait, ""
	case !handed:
		if a.signal(ctx, protocol.SignalDeregistrationFailed, old) != nil {
			return wait, ""
		}
		a.emit(EventReleaseFailed, old, "no removal token for the run")
	default:
		// On a failed write both are written again next time: the latest
		// signal wins, so repeating UD_REMOVE_REG_OK is harmless.
		if a.signal(ctx, protocol.SignalDeregistered, old) != nil ||
			a.signal(ctx, protocol.SignalReleased, old) != nil {
			return wait, ""
		}
		a.emit(EventReleased, old, "")
	}
	a.phase, a.runID, a.tokenSince = phaseWaiting, "", time.Time{}
	return 0, "" // back to step 3 at once: the record may already hold a new runId
}

// selfCheck is step 2. Once its record's threshold is more than the grace
// past, the agent stops its instance if the record keeps it in the stopped
// tier, and terminates it otherwise; and it ends when its record is
// terminated or its instance gone. stoppedItself tells that it stopped its
// instance.
func (a *agent) selfCheck(ctx context.Context) (stoppedItself bool, end string) {
	rec, found, err := a.record(ctx)
	switch {
	case err != nil:
		a.fail(ctx, "reading its instance record", err)
	case !found:
	case rec.State == protocol.StateTerminated:
		return false, "its instance record is terminated"
	default:
		due, err := a.pastGrace(rec)
		switch {
		case err != nil:
			a.fail(ctx, "reading its threshold", err)
		case !due:
		case rec.Stopped(a.clock()):
			// Not before the boot's UD_OK: a runner stops ready to serve
			// once started, and a stopped fill's launcher waits for it.
			if a.prepared {
				return a.stopItself(ctx)
			}
		default:
			return false, a.terminate(ctx, rec, "threshold "+rec.Threshold+" (state "+rec.State+") passed more than "+protocol.FormatDuration(a.opts().SelfTerminationGrace)+" ago")
		}
	}
	_, end = a.instanceState(ctx)
	return false, end
}

// pastGrace tells whether the record's threshold is more than the grace past
// on the agent's clock.
func (a *agent) pastGrace(rec protocol.Instance) (bool, error) {
	th, err := protocol.ParseTime(rec.Threshold)
	if err != nil {
		return false, err
	}
	return a.clock().After(th.Add(a.opts().SelfTerminationGrace)), nil
}

// stopItself stops the instance if its record, read again, still keeps it in
// the stopped tier: a claim may have claimed it since the self-check read it.
// Should EC2 refuse (a Spot instance cannot be stopped), it terminates the
// instance instead.
func (a *agent) stopItself(ctx context.Context) (stoppedItself bool, end string) {
	if a.sim.beforeStopRecheck != nil {
		a.sim.beforeStopRecheck(a.id)
	}
	rec, found, err := a.record(ctx)
	if err != nil {
		a.fail(ctx, "reading its instance record again before stopping", err)
		return false, ""
	}
	if due, err := a.pastGrace(rec); !found || err != nil || !due || !rec.Stopped(a.clock()) {
		return false, "" // changed meanwhile: the next self-check decides afresh
	}
	if _, err := a.sim.c.EC2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{a.id}}); err != nil {
		if ctx.Err() != nil {
			return false, ""
		}
		// Not an error of the agent: the protocol's answer to it.
		a.sim.logf("agent %s: stopping its instance failed, terminating it instead: %v", a.id, err)
		return false, a.terminate(ctx, rec, "stopping its instance failed: "+ErrorKey(err))
	}
	a.emit(EventStoppedSelf, "", "threshold "+rec.Threshold+" passed more than "+protocol.FormatDuration(a.opts().SelfTerminationGrace)+" ago; stopped until "+rec.StopUntil)
	return true, ""
}

// terminate terminates the instance, and returns why the agent ends, or ""
// when the call failed (the next self-check tries again).
func (a *agent) terminate(ctx context.Context, rec protocol.Instance, why string) (end string) {
	if _, err := a.sim.c.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{a.id}}); err != nil {
		a.fail(ctx, "terminating itself", err)
		return ""
	}
	a.emit(EventSelfTerminated, rec.RunID, why)
	return "terminated itself: " + why
}

// watchInstance looks at the instance's EC2 state at once and then every
// self-check interval until until accepts it, and returns that state; or
// why the agent ends, when the instance is gone or ctx done.
func (a *agent) watchInstance(ctx context.Context, until func(ec2types.InstanceStateName) bool) (ec2types.InstanceStateName, string) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", "cancelled"
		case <-t.C:
		}
		state, end := a.instanceState(ctx)
		if end != "" {
			return "", end
		}
		if state != "" && until(state) {
			return state, ""
		}
		t.Reset(a.jitter(a.opts().SelfCheckInterval))
	}
}

// anyState makes watchInstance return at its first answer, neverState only
// once the instance is gone.
func anyState(ec2types.InstanceStateName) bool   { return true }
func neverState(ec2types.InstanceStateName) bool { return false }

// started tells whether an instance in state is booting or booted.
func started(state ec2types.InstanceStateName) bool {
	return state == ec2types.InstanceStateNamePending || state == ec2types.InstanceStateNameRunning
}

// instanceState describes the instance: its state ("" when the call
// failed, to be tried again), or why the agent ends when it is gone.
func (a *agent) instanceState(ctx context.Context) (state ec2types.InstanceStateName, end string) {
	state, err := a.describe(ctx)
	switch {
	case isNotFound(err):
		return "", "its instance does not exist"
	case err != nil:
		a.fail(ctx, "describing its instance", err)
		return "", ""
	case state == ec2types.InstanceStateNameTerminated, state == ec2types.InstanceStateNameShuttingDown:
		return "", "its instance is " + string(state)
	}
	return state, ""
}

// errNoInstance is describe's error when EC2 returns no instance for the id.
var errNoInstance = errors.New("no such instance")

// describe returns the instance's EC2 state and caches its InitialRunId tag.
func (a *agent) describe(ctx context.Context) (ec2types.InstanceStateName, error) {
	out, err := a.sim.c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{a.id}})
	if err != nil {
		return "", err
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			if aws.ToString(inst.InstanceId) != a.id {
				continue
			}
			a.described = true
			a.initialRunID = tagValue(inst.Tags, protocol.TagInitialRunID)
			if protocol.ValidateRunID(a.initialRunID) != nil {
				a.initialRunID = "" // as the real agent, which ignores a tag that is no run id
			}
			if inst.State == nil {
				return "", nil
			}
			return inst.State.Name, nil
		}
	}
	return "", errNoInstance
}

func isNotFound(err error) bool {
	if errors.Is(err, errNoInstance) {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "InvalidInstanceID.NotFound"
}

func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
