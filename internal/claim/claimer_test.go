package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// instances returns every instance record of the table.
func (e *env) instances() map[string]protocol.Instance {
	e.db.Mu.Lock()
	defer e.db.Mu.Unlock()
	out := map[string]protocol.Instance{}
	for _, it := range e.db.Items {
		if protocol.StringAttr(it, "PK") == protocol.TypeInstance {
			inst, err := protocol.InstanceFromItem(it)
			if err != nil {
				e.t.Fatal(err)
			}
			out[inst.ID] = inst
		}
	}
	return out
}

// assertNothingHeld checks what a failed claim must leave behind: no claim
// record, and every instance the run touched either idle and back in the
// queue (exactly one message, carrying its new idle deadline) or terminated
// in EC2 and in its record.
func (e *env) assertNothingHeld(t *testing.T) {
	t.Helper()
	if _, ok := e.claimRecord(); ok {
		t.Error("the claim record is still there")
	}
	queued := map[string][]protocol.Message{}
	for _, m := range e.sqs.queued(t, largeURL) {
		queued[m.ID] = append(queued[m.ID], m)
	}
	terminated := e.ec2.TerminatedIDs()
	for id, r := range e.instances() {
		switch r.State {
		case protocol.StateIdle:
			if r.RunID != "" {
				t.Errorf("%s is idle with run id %q", id, r.RunID)
			}
			if len(queued[id]) != 1 {
				t.Errorf("%s is idle with %d message(s) in the queue, want 1", id, len(queued[id]))
			} else if queued[id][0].Threshold != r.Threshold {
				t.Errorf("%s: message threshold %s, record threshold %s", id, queued[id][0].Threshold, r.Threshold)
			}
		case protocol.StateTerminated:
			if !slices.Contains(terminated, id) {
				t.Errorf("%s is terminated in the table but was never terminated in EC2", id)
			}
			if len(queued[id]) != 0 {
				t.Errorf("terminated %s is in the queue", id)
			}
		default:
			if r.RunID == testRun {
				t.Errorf("%s is still %s for the run", id, r.State)
			}
		}
	}
}

func (e *env) create(n int, change ...func(*Request)) (*Result, error) {
	req := e.request(n)
	for _, c := range change {
		c(&req)
	}
	return e.c.Create(context.Background(), req)
}

func ids(insts []Instance) []string {
	out := instanceIDs(insts)
	sort.Strings(out)
	return out
}

func TestCreateReusesWarmRunners(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old1, old2 := e.seedIdle("i-1", healthy), e.seedIdle("i-2", healthy)
	e.seedIdle("i-3", healthy)
	start := time.Now()
	res, err := e.create(2)
	if err != nil {
		t.Fatal(err)
	}
	running := during(start, maxRunTime)
	if res.Reused != 2 || res.Created != 0 || len(res.Instances) != 2 {
		t.Fatalf("result %+v, want 2 reused", res)
	}
	got := ids(res.Instances)
	if !slices.Equal(got, []string{"i-1", "i-2"}) {
		t.Errorf("instances %v, want the first two in the queue", got)
	}
	for _, inst := range res.Instances {
		if inst.Source != SourcePool || inst.InstanceType != "c6i.large" || inst.UsageClass != protocol.UsageOnDemand {
			t.Errorf("instance %+v", inst)
		}
		r := e.db.instance(t, inst.ID)
		if r.State != protocol.StateRunning || r.RunID != testRun {
			t.Errorf("%s is %s for %q, want running for %s", inst.ID, r.State, r.RunID, testRun)
		}
		running.Check(t, inst.ID+" threshold", r.Threshold)
	}
	// Each went idle -> claimed -> running, nothing else.
	var path []string
	for _, in := range e.db.updates() {
		if in.Key["SK"].(*types.AttributeValueMemberS).Value == "ID#i-1" {
			path = append(path, in.ExpressionAttributeValues[":fromState"].(*types.AttributeValueMemberS).Value+">"+in.ExpressionAttributeValues[":toState"].(*types.AttributeValueMemberS).Value)
		}
	}
	if !slices.Equal(path, []string{"idle>claimed", "claimed>running"}) {
		t.Errorf("i-1 went %v", path)
	}
	rec, ok := e.claimRecord()
	if !ok || rec.State != recordComplete {
		t.Fatalf("claim record %+v (exists %v), want complete", rec, ok)
	}
	if got := ids(rec.Instances); !slices.Equal(got, []string{"i-1", "i-2"}) {
		t.Errorf("record instances %v", got)
	}
	owned := slices.Clone(rec.OwnedIDs)
	sort.Strings(owned)
	if !slices.Equal(owned, []string{"i-1", "i-2"}) {
		t.Errorf("record owns %v", owned)
	}
	if rec.Request.InstanceCount != 2 || rec.Request.ResourceClass != "large" || rec.Request.Timings.RegistrationWait != testTimings().RegistrationWait {
		t.Errorf("record request %+v", rec.Request)
	}
	if n := len(e.ec2.FleetInputs()); n != 0 {
		t.Errorf("%d CreateFleet calls, want none", n)
	}
	if ids := e.sqs.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-3"}) {
		t.Errorf("queue holds %v, want only the runner not needed", ids)
	}
	for _, s := range e.sqs.SentEntries() {
		t.Errorf("sent %s back, want nothing sent", s.Body)
	}
	if res.Pickup.Accepted != 2 || res.Pickup.Received != 2 {
		t.Errorf("pickup stats %+v", res.Pickup)
	}
	_, _ = old1, old2
}

// A claim reads its agents' signals one poll after it claimed their
// runners, not at once: an agent answers at its next read of its record.
func TestCreateReadsItsAgentsOnePollAfterClaiming(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	agents, heartbeats := e.db.AfterInstance, e.db.BeforeBatchGet
	var (
		mu                   sync.Mutex
		claimedAt, firstRead time.Time
	)
	e.db.AfterInstance = func(ctx context.Context, old, cur protocol.Instance, existed bool) {
		mu.Lock()
		if cur.ID == "i-1" && cur.State == protocol.StateClaimed && claimedAt.IsZero() {
			claimedAt = time.Now()
		}
		mu.Unlock()
		agents(ctx, old, cur, existed)
	}
	e.db.BeforeBatchGet = func(ctx context.Context) {
		mu.Lock()
		if !claimedAt.IsZero() && firstRead.IsZero() {
			firstRead = time.Now()
		}
		mu.Unlock()
		heartbeats(ctx)
	}
	req := e.request(1)
	req.Timings.PollInterval = 300 * time.Millisecond
	if res, err := e.c.Create(context.Background(), req); err != nil || res.Reused != 1 {
		t.Fatalf("Create: %+v, %v; want i-1 reused", res, err)
	}
	if gap := firstRead.Sub(claimedAt); gap < req.Timings.PollInterval {
		t.Errorf("the first read of the agent came %s after the claim, want one poll (%s)", gap, req.Timings.PollInterval)
	}
}

// A claim hands back what it received and does not need (a mismatch here)
// before it waits for its agents, not when it closes: concurrent claims
// of a burst find it while this one waits.
func TestCreateHandsBackMismatchesBeforeWaitingForItsAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sqs.Add(largeURL, idleMessage("i-r", "r6i.large", future()).Body()) // allowed are c* and m*
	e.seedIdle("i-1", healthy)
	agents := e.db.BeforeBatchGet
	var (
		mu      sync.Mutex
		visible bool
	)
	e.db.BeforeBatchGet = func(ctx context.Context) {
		mu.Lock()
		visible = visible || slices.Contains(e.sqs.VisibleIDs(largeURL), "i-r")
		mu.Unlock()
		agents(ctx)
	}
	res, err := e.create(1)
	if err != nil || res.Reused != 1 {
		t.Fatalf("Create: %+v, %v; want i-1 reused", res, err)
	}
	if !visible {
		t.Error("the mismatch stayed hidden while the claim waited for its agent")
	}
}

// A claim lists the pool runners its checks passed together in id order,
// not in a map's: its instances, and the release that hands the warm slots
// out in their order, are the same for the same pool (make simulate
// replays depend on it).
func TestCreateListsRunnersReadyTogetherInIDOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, id := range []string{"i-4", "i-2", "i-3", "i-1"} {
		e.seedIdle(id, healthy)
	}
	res, err := e.create(4)
	if err != nil {
		t.Fatal(err)
	}
	if got := instanceIDs(res.Instances); !slices.Equal(got, []string{"i-1", "i-2", "i-3", "i-4"}) {
		t.Errorf("instances %v, want them in id order", got)
	}
}

// A warm runner must be healthy from the start: one whose heartbeat does
// not change within heartbeat_max_age (on the provider's clock) is let go
// then, not after the registration wait.
func TestCreateRejectsASilentWarmRunnerEarly(t *testing.T) {
	for _, b := range []behavior{staleHeartbeat, noHeartbeat} {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.seedIdle("i-1", b)
			e.seedIdle("i-2", healthy)
			// A wait no claim comes near unless it waits it out.
			const wait = 10 * time.Minute
			start := time.Now()
			res, err := e.create(1, func(r *Request) { r.Timings.RegistrationWait, r.Timings.HeartbeatMaxAge = wait, time.Second })
			if err != nil {
				t.Fatal(err)
			}
			if elapsed := time.Since(start); elapsed >= wait/2 {
				t.Errorf("took %s: waited out the registration wait (%s) for a runner that was unhealthy from the start", elapsed, wait)
			}
			if got := ids(res.Instances); !slices.Equal(got, []string{"i-2"}) {
				t.Errorf("instances %v", got)
			}
		})
	}
}

// A candidate whose record is not idle and unowned with a live deadline is
// someone else's (or stale): it is dropped, not sent back, and the next one
// is tried.
func TestCreateDropsCandidateItCannotClaim(t *testing.T) {
	tests := []struct {
		name   string
		record *protocol.Instance // nil: no record at all
	}{
		{"claimed by another run", &protocol.Instance{State: protocol.StateClaimed, RunID: "other-run", Threshold: protocol.FormatTime(time.Now().Add(time.Minute))}},
		{"running for another run", &protocol.Instance{State: protocol.StateRunning, RunID: "other-run", Threshold: protocol.FormatTime(time.Now().Add(time.Hour))}},
		{"idle but its deadline passed", &protocol.Instance{State: protocol.StateIdle, Threshold: protocol.FormatTime(time.Now().Add(-time.Second))}},
		{"terminated", &protocol.Instance{State: protocol.StateTerminated, Threshold: protocol.FormatTime(time.Now().Add(-time.Hour))}},
		{"no record", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.sqs.Add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
			if tt.record != nil {
				r := *tt.record
				r.ID = "i-1"
				e.seedRecord(r, healthy)
			}
			before := e.db.Get(protocol.TypeInstance, "i-1")
			e.seedIdle("i-2", healthy)
			res, err := e.create(1)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(res.Instances); !slices.Equal(got, []string{"i-2"}) {
				t.Errorf("instances %v, want i-2", got)
			}
			after := e.db.Get(protocol.TypeInstance, "i-1")
			if render(before) != render(after) {
				t.Errorf("i-1's record changed: %v -> %v", before, after)
			}
			for _, s := range e.sqs.SentEntries() {
				t.Errorf("sent %s back", s.Body)
			}
			if ids := e.sqs.queuedIDs(t, largeURL); len(ids) != 0 {
				t.Errorf("queue holds %v", ids)
			}
			if len(e.ec2.TerminatedIDs()) != 0 {
				t.Errorf("terminated %v", e.ec2.TerminatedIDs())
			}
		})
	}
}

// isClaimOf reports whether in is, or is a transaction with, the
// idle -> claimed write of id.
func isClaimOf(in any, id string) bool { return writesState(in, id, protocol.StateClaimed) }

// writesState reports whether in (an UpdateItem or a transaction) moves
// the record of id to state.
func writesState(in any, id, state string) bool { return updateTo(in, id, state) != nil }

// updateTo returns the write in in (an UpdateItem or a transaction) that
// moves the record of id to state, or nil.
func updateTo(in any, id, state string) *types.Update {
	var updates []*types.Update
	switch in := in.(type) {
	case *dynamodb.UpdateItemInput:
		updates = append(updates, &types.Update{Key: in.Key, ExpressionAttributeValues: in.ExpressionAttributeValues})
	case *dynamodb.TransactWriteItemsInput:
		for _, ti := range in.TransactItems {
			if ti.Update != nil {
				updates = append(updates, ti.Update)
			}
		}
	}
	for _, u := range updates {
		if protocol.StringAttr(u.Key, "SK") == "ID#"+id && protocol.StringAttr(u.ExpressionAttributeValues, ":toState") == state {
			return u
		}
	}
	return nil
}

// A transient error on the claim write leaves the runner idle (its record
// says so): its message stays with the Pickup Manager, visible again when it
// closes, and the claim goes on with the next candidate.
func TestCreateTransientClaimErrorReturnsRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	e.seedIdle("i-2", healthy)
	failed := false
	e.db.FailIf = func(op string, in any) error {
		switch {
		case op == "TransactWriteItems" && isClaimOf(in, "i-1"):
			return errTransient // the transaction, then the write alone
		case op == "UpdateItem" && !failed && isClaimOf(in, "i-1"):
			failed = true
			return errTransient
		}
		return nil
	}
	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Fatal("the error was never injected")
	}
	if got := ids(res.Instances); !slices.Equal(got, []string{"i-2"}) {
		t.Errorf("instances %v, want i-2", got)
	}
	if sent := e.sqs.SentEntries(); len(sent) != 0 {
		t.Errorf("sent %+v, want nothing: the message was never deleted", sent)
	}
	if ids := e.sqs.VisibleIDs(largeURL); !slices.Equal(ids, []string{"i-1"}) {
		t.Errorf("visible %v, want i-1's message", ids)
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle || r.RunID != "" {
		t.Errorf("i-1 is %s for %q, want idle", r.State, r.RunID)
	}
	if res.Pickup.Returned != 1 {
		t.Errorf("pickup stats %+v, want 1 returned", res.Pickup)
	}
}

// A claim write whose answer was lost, with the runner claimed: the record
// says it is the claim's, and it is used.
func TestCreateLostClaimAnswerKeepsRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	lost := false
	e.db.LoseAnswer = func(op string, in any) bool {
		if op == "TransactWriteItems" && !lost && isClaimOf(in, "i-1") {
			lost = true
			return true
		}
		return false
	}
	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(res.Instances); !slices.Equal(got, []string{"i-1"}) {
		t.Errorf("instances %v, want i-1", got)
	}
}

// A claimed runner that fails its checks is expired, terminated and
// recorded as terminated; the worker takes the next candidate.
func TestCreateReplacesRunnerFailingChecks(t *testing.T) {
	tests := []struct {
		name    string
		b       behavior
		signal  string // the latest signal before the claim, for another run
		errText string
	}{
		{"stale heartbeat", staleHeartbeat, "", "unhealthy: no new heartbeat"},
		{"no heartbeat", noHeartbeat, "", "unhealthy: no heartbeat"},
		{"registration fails", registrationFails, "", "UD_REG_FAILED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			logs := e.captureLogs()
			e.seedIdle("i-1", tt.b)
			if tt.signal != "" {
				e.db.Put(signalItem("i-1", tt.signal, "old-run"))
			}
			e.seedIdle("i-2", healthy)
			start := time.Now()
			res, err := e.create(1)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(res.Instances); !slices.Equal(got, []string{"i-2"}) {
				t.Errorf("instances %v, want i-2", got)
			}
			if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-1"}) {
				t.Errorf("terminated %v, want i-1", got)
			}
			r := e.db.instance(t, "i-1")
			if r.State != protocol.StateTerminated || r.RunID != testRun {
				t.Errorf("i-1 is %s for %q, want terminated", r.State, r.RunID)
			}
			var path []string
			for _, in := range e.db.updates() {
				if in.Key["SK"].(*types.AttributeValueMemberS).Value == "ID#i-1" {
					path = append(path, in.ExpressionAttributeValues[":toState"].(*types.AttributeValueMemberS).Value+" "+in.ExpressionAttributeValues[":threshold"].(*types.AttributeValueMemberS).Value)
				}
			}
			// claimed, then expired (same state, threshold 5 min in the past), then terminated.
			if len(path) != 3 || !strings.HasPrefix(path[0], "claimed") || !strings.HasPrefix(path[1], "claimed") || !strings.HasPrefix(path[2], "terminated") {
				t.Fatalf("i-1 went %v", path)
			}
			during(start, -expiredBy).Check(t, "expired threshold", strings.Fields(path[1])[1])
			if ids := e.sqs.queuedIDs(t, largeURL); len(ids) != 0 {
				t.Errorf("queue holds %v", ids)
			}
			if !strings.Contains(logs(), tt.errText) {
				t.Errorf("logs do not give the reason %q:\n%s", tt.errText, logs())
			}
		})
	}
}

// A claimed runner that is alive but has not registered when the wait ends
// failed on timing alone (a slow GitHub, a short registration_wait): it is
// given back to the pool, not terminated, and replaced. Given back, it must
// confirm its release like any other, or it is terminated.
func TestCreateGivesBackLateRunner(t *testing.T) {
	tests := []struct {
		name     string
		b        behavior
		signal   string // the latest signal before the claim, for another run
		errText  string
		givenUp  bool // terminated after all: it did not confirm its release
		wantNote string
	}{
		{"registers late", registersLate, "", "no UD_REG_OK for run " + testRun, false, "i-1: released to the pool"},
		// A signal counts only with the claim's run id.
		{"registered for an older run", registersLate, protocol.SignalRegistered, "no UD_REG_OK for run " + testRun + " within 300ms (last signal: UD_REG_OK for run \"old-run\")", false, "i-1: released to the pool"},
		{"never registers nor confirms a release", neverRegisters, "", "no UD_REG_OK for run " + testRun, true, "i-1: did not confirm its release"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			logs := e.captureLogs()
			e.seedIdle("i-1", tt.b)
			if tt.signal != "" {
				e.db.Put(signalItem("i-1", tt.signal, "old-run"))
			}
			e.seedIdle("i-2", healthy)
			res, err := e.create(1)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(res.Instances); !slices.Equal(got, []string{"i-2"}) {
				t.Errorf("instances %v, want i-2", got)
			}
			r := e.db.instance(t, "i-1")
			if tt.givenUp {
				if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-1"}) || r.State != protocol.StateTerminated {
					t.Errorf("terminated %v, i-1 is %s: want i-1 terminated", got, r.State)
				}
			} else {
				if got := e.ec2.TerminatedIDs(); len(got) != 0 {
					t.Errorf("terminated %v, want none", got)
				}
				if r.State != protocol.StateIdle || r.RunID != "" {
					t.Errorf("i-1 is %s for %q, want idle", r.State, r.RunID)
				}
				if q := e.sqs.queuedIDs(t, largeURL); !slices.Equal(q, []string{"i-1"}) {
					t.Errorf("queue holds %v, want i-1 back in the pool", q)
				}
			}
			for _, want := range []string{tt.errText, tt.wantNote} {
				if !strings.Contains(logs(), want) {
					t.Errorf("logs do not say %q:\n%s", want, logs())
				}
			}
			if rec, ok := e.claimRecord(); !ok || !slices.Equal(rec.OwnedIDs, []string{"i-2"}) {
				t.Errorf("claim record %+v (exists %v), want it to own i-2 only", rec, ok)
			}
		})
	}
}

func TestCreateLaunchesFleetWhenPoolEmpty(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ec2.GroupSize = 2 // both ids in one CreateFleet entry
	start := time.Now()
	res, err := e.create(2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused != 0 || res.Created != 2 {
		t.Errorf("result %+v, want 2 created", res)
	}
	if got := ids(res.Instances); !slices.Equal(got, []string{"i-f1", "i-f2"}) {
		t.Errorf("instances %v", got)
	}
	fleets := e.ec2.FleetInputs()
	if len(fleets) != 1 || aws.ToInt32(fleets[0].TargetCapacitySpecification.TotalTargetCapacity) != 2 {
		t.Fatalf("CreateFleet calls %+v, want one for 2", fleets)
	}
	rec, ok := e.claimRecord()
	if !ok || rec.State != recordComplete {
		t.Fatal("no complete claim record")
	}
	if got, want := aws.ToString(fleets[0].ClientToken), clientToken(e.request(2), rec.Nonce, protocol.UsageOnDemand, 0, 2); got != want {
		t.Errorf("ClientToken %s, want %s (from the attempt's nonce)", got, want)
	}
	running := during(start, maxRunTime)
	for _, inst := range res.Instances {
		if inst.Source != SourceFleet || inst.InstanceType != "c6i.large" || inst.UsageClass != protocol.UsageOnDemand {
			t.Errorf("instance %+v", inst)
		}
		r := e.db.instance(t, inst.ID)
		if r.State != protocol.StateRunning || r.RunID != testRun || r.ResourceClass != "large" || r.InstanceType != "c6i.large" {
			t.Errorf("record %+v", r)
		}
		running.Check(t, inst.ID+" threshold", r.Threshold)
	}
	// Created first (with the created lifetime), then running.
	var created int
	for _, c := range e.db.Calls {
		if p, ok := c.In.(*dynamodb.PutItemInput); ok && protocol.StringAttr(p.Item, "PK") == protocol.TypeInstance {
			created++
			if aws.ToString(p.ConditionExpression) != "attribute_not_exists(PK)" {
				t.Errorf("created record written without attribute_not_exists")
			}
			if s := protocol.StringAttr(p.Item, protocol.AttrState); s != protocol.StateCreated {
				t.Errorf("first record state %s", s)
			}
			during(start, CreatedLifetime).Check(t, "created threshold", protocol.StringAttr(p.Item, protocol.AttrThreshold))
		}
	}
	if created != 2 {
		t.Errorf("%d created records written, want 2", created)
	}
}

func TestCreateMixesReuseAndFleet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	res, err := e.create(3)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused != 1 || res.Created != 2 {
		t.Errorf("result %+v, want 1 reused, 2 created", res)
	}
	if got := ids(res.Instances); !slices.Equal(got, []string{"i-1", "i-f1", "i-f2"}) {
		t.Errorf("instances %v", got)
	}
	if f := e.ec2.FleetInputs(); len(f) != 1 || aws.ToInt32(f[0].TargetCapacitySpecification.TotalTargetCapacity) != 2 {
		t.Errorf("CreateFleet %+v, want one for the 2 missing", f)
	}
	for _, id := range []string{"i-1", "i-f1", "i-f2"} {
		if r := e.db.instance(t, id); r.State != protocol.StateRunning || r.RunID != testRun {
			t.Errorf("%s is %s for %q", id, r.State, r.RunID)
		}
	}
}

// A fleet that launches fewer instances than asked fails the claim: what it
// launched is terminated, the reused runners go back to the pool with their
// new idle deadline, and the error says what happened to each.
func TestCreateFleetShortfallRollsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.seedIdle("i-1", healthy)
	e.ec2.ShortBy = 1
	start := time.Now()
	_, err := e.create(3)
	if err == nil {
		t.Fatal("claim succeeded")
	}
	idle := during(start, idleTime)
	msg := err.Error()
	for _, want := range []string{
		"claim of 3 large runner(s) for run run-1 in pool testpool failed",
		"CreateFleet launched 1 of 2 on-demand instance(s)", "InsufficientInstanceCapacity",
		"reused 1, created 1, failed 1",
		"i-f1: launched; terminated", "i-1: released to the pool",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-f1"}) {
		t.Errorf("terminated %v, want i-f1", got)
	}
	r := e.db.instance(t, "i-1")
	if r.State != protocol.StateIdle || r.RunID != "" {
		t.Errorf("i-1 is %s for %q, want idle", r.State, r.RunID)
	}
	idle.Check(t, "i-1 idle threshold", r.Threshold)
	q := e.sqs.queued(t, largeURL)
	if len(q) != 1 || q[0].ID != "i-1" || q[0].Threshold != r.Threshold || q[0].Threshold == old.Threshold {
		t.Errorf("queue %+v, want i-1 with its new idle deadline %s (not %s)", q, r.Threshold, old.Threshold)
	}
	want := old
	want.Threshold = r.Threshold
	if q[0] != want {
		t.Errorf("re-sent message %+v, want %+v", q[0], want)
	}
	for _, s := range e.sqs.SentEntries() {
		if s.Delay != 0 {
			t.Errorf("given back with delay %d", s.Delay)
		}
	}
	e.assertNothingHeld(t)
}

// One fleet instance that never registers fails the whole claim; nothing is
// orphaned.
func TestCreateFleetInstanceNeverRegisters(t *testing.T) {
	for _, b := range []behavior{neverRegisters, registrationFails, noHeartbeat} {
		t.Run(fmt.Sprint(b), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.seedIdle("i-1", healthy)
			e.agents.Set("i-f2", b)
			_, err := e.create(3)
			if err == nil {
				t.Fatal("claim succeeded")
			}
			msg := err.Error()
			for _, want := range []string{"new instance i-f2", "reused 1, created 2, failed 0", "i-f1: launched for the run; terminated", "i-f2: launched for the run; terminated", "i-1: released to the pool"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not say %q:\n%s", want, msg)
				}
			}
			if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-f1", "i-f2"}) {
				t.Errorf("terminated %v, want both launched", got)
			}
			for _, id := range []string{"i-f1", "i-f2"} {
				if r := e.db.instance(t, id); r.State != protocol.StateTerminated {
					t.Errorf("%s is %s", id, r.State)
				}
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle {
				t.Errorf("i-1 is %s", r.State)
			}
			e.assertNothingHeld(t)
		})
	}
}

func TestCreateWithoutFleetFallbackGivesBack(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*env, *Request)
		errText string
	}{
		{"fleet_fallback false", func(_ *env, r *Request) { r.FleetFallback = false }, "the pool had 1 suitable runner(s) of the 2 wanted and fleet_fallback is false"},
		{"pool without fleet settings", func(e *env, _ *Request) { e.cfg.Fleet = nil; e.writeConfig() }, "pool testpool has no fleet settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.seedIdle("i-1", healthy)
			_, err := e.create(2, func(r *Request) { tt.change(e, r) })
			if err == nil || !strings.Contains(err.Error(), tt.errText) {
				t.Fatalf("error %v, want %q", err, tt.errText)
			}
			if !strings.Contains(err.Error(), "i-1: released to the pool") || !strings.Contains(err.Error(), "reused 1, created 0, failed 0") {
				t.Errorf("error does not account for i-1:\n%v", err)
			}
			if n := len(e.ec2.FleetInputs()); n != 0 {
				t.Errorf("%d CreateFleet calls", n)
			}
			if len(e.ec2.TerminatedIDs()) != 0 {
				t.Errorf("terminated %v", e.ec2.TerminatedIDs())
			}
			e.assertNothingHeld(t)
		})
	}
}

func TestCreateUnknownResourceClass(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.create(1, func(r *Request) { r.ResourceClass = "huge" })
	if err == nil || !strings.Contains(err.Error(), `"huge"`) || !strings.Contains(err.Error(), "[large xlarge]") {
		t.Fatalf("error %v, want it to name the class and the pool's classes", err)
	}
	if _, ok := e.claimRecord(); ok {
		t.Error("a claim record was written")
	}
	if n := len(e.sqs.ReceiveInputs()); n != 0 {
		t.Errorf("%d receives", n)
	}
}

func TestCreateMissingPoolOrQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.create(1, func(r *Request) { r.Pool = "nopool" }); err == nil || !strings.Contains(err.Error(), "pool not found") {
		t.Errorf("missing pool: %v", err)
	}
	delete(e.cfg.QueueURLs, "large")
	e.writeConfig()
	if _, err := e.create(1); err == nil || !strings.Contains(err.Error(), `no queue for resource class "large"`) {
		t.Errorf("missing queue: %v", err)
	}
	if _, ok := e.claimRecord(); ok {
		t.Error("a claim record was written")
	}
}

// A pending claim record left by a crashed attempt of the same run is
// cleaned up first: what it launched is terminated, what it took from the
// pool goes back (and here is taken again).
func TestCreateCleansUpCrashedAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	future := protocol.FormatTime(time.Now().Add(time.Minute))
	e.seedRecord(protocol.Instance{ID: "i-8", State: protocol.StateCreated, RunID: testRun, Threshold: future}, healthy)
	e.seedRecord(protocol.Instance{ID: "i-9", State: protocol.StateClaimed, RunID: testRun, Threshold: future}, healthy)
	e.seedRecord(protocol.Instance{ID: "i-7", State: protocol.StateRunning, RunID: "other-run", Threshold: future}, healthy)
	crashed := Record{Request: e.request(1), State: recordPending, Nonce: "oldnonce", OwnedIDs: []string{"i-7", "i-8", "i-9"}}
	e.db.Put(crashed.Item(protocol.FormatTime(time.Now().Add(-leaseTimeout - time.Second)))) // no longer refreshed

	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-8"}) {
		t.Errorf("terminated %v, want the launched i-8", got)
	}
	if r := e.db.instance(t, "i-8"); r.State != protocol.StateTerminated {
		t.Errorf("i-8 is %s", r.State)
	}
	if r := e.db.instance(t, "i-7"); r.State != protocol.StateRunning || r.RunID != "other-run" {
		t.Errorf("another run's i-7 was touched: %+v", r)
	}
	if got := ids(res.Instances); !slices.Equal(got, []string{"i-9"}) || res.Reused != 1 {
		t.Errorf("result %+v, want i-9 reused after going back to the pool", res)
	}
	rec, ok := e.claimRecord()
	if !ok || rec.State != recordComplete || rec.Nonce == "oldnonce" || rec.Nonce == "" {
		t.Errorf("record %+v, want complete with a new nonce", rec)
	}
	if slices.Contains(rec.OwnedIDs, "i-8") || slices.Contains(rec.OwnedIDs, "i-7") {
		t.Errorf("record still owns %v", rec.OwnedIDs)
	}
}

// A complete claim of the same run asking for something else is refused.
func TestCreateRefusesDifferentCompleteClaimOfSameRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	if _, err := e.create(1); err != nil {
		t.Fatal(err)
	}
	before := e.db.Get(protocol.TypeClaim, testRun)
	e.seedIdle("i-2", healthy)
	_, err := e.create(2)
	if err == nil || !strings.Contains(err.Error(), "already holds a different claim") || !strings.Contains(err.Error(), "terraform import") {
		t.Fatalf("error %v, want the run's claim reported", err)
	}
	if after := e.db.Get(protocol.TypeClaim, testRun); render(after) != render(before) {
		t.Error("the existing claim record changed")
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateRunning || r.RunID != testRun {
		t.Errorf("i-1 is %s for %q", r.State, r.RunID)
	}
	if r := e.db.instance(t, "i-2"); r.State != protocol.StateIdle {
		t.Errorf("i-2 is %s", r.State)
	}
}

// An apply killed after its claim was complete, but before Terraform saved
// it, is re-run: the same claim is adopted, nothing more is taken.
func TestCreateAdoptsCompleteClaimOfSameRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	first, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	e.seedIdle("i-2", healthy)
	again, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Instances) != 1 || again.Instances[0] != first.Instances[0] {
		t.Errorf("second Create = %+v, want the first's %+v", again.Instances, first.Instances)
	}
	if r := e.db.instance(t, "i-2"); r.State != protocol.StateIdle {
		t.Errorf("i-2 is %s: taken by an adopted claim", r.State)
	}
}

// Two claimants of one run id (two CI jobs of a run, say) never share a
// claim: the second fails at once, whether the first's claim is complete
// (the same request, which a re-run of the first would adopt) or still
// under way, and takes nothing. The same claimant adopts its claim.
func TestCreateRefusesAnotherClaimantsClaim(t *testing.T) {
	t.Parallel()
	byJob := func(job string) func(*Request) { return func(r *Request) { r.Claimant = job } }
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	first, err := e.create(1, byJob("build"))
	if err != nil {
		t.Fatal(err)
	}
	e.seedIdle("i-2", healthy)
	for _, job := range []string{"test", ""} {
		_, err := e.create(1, byJob(job))
		if !errors.Is(err, ErrOtherClaimant) || !strings.Contains(err.Error(), `another claimant, "build"`) {
			t.Errorf("Create by %q = %v, want ErrOtherClaimant naming build", job, err)
		}
	}
	if r := e.db.instance(t, "i-2"); r.State != protocol.StateIdle {
		t.Errorf("i-2 is %s: taken by a refused claim", r.State)
	}
	again, err := e.create(1, byJob("build"))
	if err != nil || len(again.Instances) != 1 || again.Instances[0] != first.Instances[0] {
		t.Errorf("Create by build again = %+v, %v; want its claim adopted", again, err)
	}

	// Under way: refused at once, not waited for.
	p := newEnv(t)
	now := time.Now()
	p.c.Now = func() time.Time { return now }
	live := Record{Request: p.request(1), State: recordPending, Nonce: "livenonce"}
	live.Request.Claimant = "build"
	p.db.Put(live.Item(protocol.FormatTime(now)))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req := p.request(1)
	req.Claimant = "test"
	if _, err := p.c.Create(ctx, req); !errors.Is(err, ErrOtherClaimant) {
		t.Errorf("Create by test while build claims = %v, want ErrOtherClaimant", err)
	}
}

// A failure after claiming (here: reading the agents) gives back what was
// claimed.
func TestCreateRollsBackOnStoreError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	e.db.Fail("BatchGetItem", 1, errTransient)
	_, err := e.create(1)
	if err == nil || !strings.Contains(err.Error(), errTransient.Error()) || !strings.Contains(err.Error(), "i-1: released to the pool") {
		t.Fatalf("error %v", err)
	}
	e.assertNothingHeld(t)
}

// Growing the claim record fails before anything is claimed: the runners
// stay idle with their messages.
func TestCreateClaimsNothingItCannotRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	e.db.FailIf = func(op string, in any) error {
		if u, ok := in.(*dynamodb.UpdateItemInput); ok && aws.ToString(u.UpdateExpression) == "ADD #ids :ids" {
			return errTransient
		}
		return nil
	}
	_, err := e.create(1)
	if err == nil || !strings.Contains(err.Error(), errTransient.Error()) {
		t.Fatalf("error %v", err)
	}
	for _, in := range e.db.updates() {
		if isClaimOf(in, "i-1") {
			t.Errorf("i-1 claimed although the claim record could not list it")
		}
	}
	e.assertNothingHeld(t)
}

// Two claims racing for the same runners: the conditional claim is the only
// lock, so no runner ends up with two runs, a failed claim keeps nothing,
// and every runner not running is idle with exactly one message.
func TestCreateConcurrentClaimsShareNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		e.seedIdle(id, healthy)
	}
	runs := []string{"run-a", "run-b"}
	results := make([]*Result, len(runs))
	errs := make([]error, len(runs))
	done := make(chan int)
	for i, run := range runs {
		go func() {
			req := e.request(2)
			req.RunID, req.FleetFallback = run, false
			results[i], errs[i] = e.c.Create(context.Background(), req)
			done <- i
		}()
	}
	for range runs {
		<-done
	}
	owner := map[string]string{}
	succeeded := 0
	for i, run := range runs {
		if errs[i] != nil {
			if !strings.Contains(errs[i].Error(), "fleet_fallback is false") {
				t.Errorf("%s failed unexpectedly: %v", run, errs[i])
			}
			if e.db.Get(protocol.TypeClaim, run) != nil {
				t.Errorf("%s failed but kept its claim record", run)
			}
			continue
		}
		succeeded++
		if len(results[i].Instances) != 2 {
			t.Errorf("%s got %d runners", run, len(results[i].Instances))
		}
		for _, inst := range results[i].Instances {
			if o, dup := owner[inst.ID]; dup {
				t.Errorf("%s given to both %s and %s", inst.ID, o, run)
			}
			owner[inst.ID] = run
		}
	}
	if succeeded > 1 {
		t.Errorf("%d claims of 2 succeeded with 3 runners", succeeded)
	}
	queued := map[string]int{}
	for _, m := range e.sqs.queued(t, largeURL) {
		queued[m.ID]++
	}
	for id, r := range e.instances() {
		switch {
		case owner[id] != "":
			if r.State != protocol.StateRunning || r.RunID != owner[id] || queued[id] != 0 {
				t.Errorf("%s: %s for %q, %d message(s); want running for %s", id, r.State, r.RunID, queued[id], owner[id])
			}
		case r.State != protocol.StateIdle || r.RunID != "" || queued[id] != 1:
			t.Errorf("%s: %s for %q with %d message(s); want idle with one", id, r.State, r.RunID, queued[id])
		}
	}
}

// An error of the Pickup Manager fails the claim; runners already claimed
// go back. (i-2 fails its checks; the receive for its replacement fails.)
func TestCreatePickupErrorGivesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	e.seedIdle("i-2", staleHeartbeat)
	e.sqs.Fail("ReceiveMessage", 2, errTransient)
	_, err := e.create(2)
	if err == nil || !strings.Contains(err.Error(), errTransient.Error()) {
		t.Fatalf("error %v, want the receive error", err)
	}
	if !strings.Contains(err.Error(), "i-1: released to the pool") {
		t.Errorf("error does not account for i-1:\n%v", err)
	}
	if n := len(e.ec2.FleetInputs()); n != 0 {
		t.Errorf("%d CreateFleet calls after a pickup error", n)
	}
	e.assertNothingHeld(t)
}

// A claim cancelled while its new instances boot (Terraform interrupted)
// still cleans up after itself.
func TestCreateCancelledDuringFleetValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	e.agents.Set("i-f1", neverRegisters)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.ec2.OnFleet = func(*ec2.CreateFleetInput) { time.AfterFunc(50*time.Millisecond, cancel) }
	req := e.request(2)
	// A wait the claim comes near only if it waits it out. (Not longer: the
	// claim takes no warm runner once claimedLifetime - selectMargin -
	// FleetValidationWait has passed.)
	const wait = 3 * time.Minute
	req.Timings.FleetValidationWait = wait
	start := time.Now()
	_, err := e.c.Create(ctx, req)
	if err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("error %v, want cancellation", err)
	}
	if elapsed := time.Since(start); elapsed >= wait/2 {
		t.Errorf("took %s: the cancellation did not stop the fleet validation wait (%s)", elapsed, wait)
	}
	if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-f1"}) {
		t.Errorf("terminated %v", got)
	}
	e.assertNothingHeld(t)
}

// A pending record still refreshed by its attempt belongs to a live apply of
// the same run (or one killed less than a lease ago): the second apply
// waits, leaving it alone, until its context ends...
func TestCreateWaitsWhileAnotherAttemptRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The claimer's clock stands still: the other attempt's lease cannot
	// lapse, however slowly the test runs.
	now := time.Now()
	e.c.Now = func() time.Time { return now }
	future := protocol.FormatTime(now.Add(time.Minute))
	e.seedRecord(protocol.Instance{ID: "i-9", State: protocol.StateClaimed, RunID: testRun, Threshold: future}, healthy)
	live := Record{Request: e.request(1), State: recordPending, Nonce: "livenonce", OwnedIDs: []string{"i-9"}}
	e.db.Put(live.Item(protocol.FormatTime(now)))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := e.c.Create(ctx, e.request(1))
	if err == nil || !strings.Contains(err.Error(), "another apply is claiming runners for run "+testRun) {
		t.Fatalf("err = %v, want a refusal naming the run", err)
	}
	if r := e.db.instance(t, "i-9"); r.State != protocol.StateClaimed || r.RunID != testRun {
		t.Errorf("the live attempt's i-9 was touched: %+v", r)
	}
}

// ...or until the other attempt completes the same claim, which it adopts.
func TestCreateAdoptsClaimCompletedWhileWaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The claimer's clock stands still: the other attempt's lease cannot
	// lapse before it completes, however late its goroutine runs.
	now := time.Now()
	e.c.Now = func() time.Time { return now }
	future := protocol.FormatTime(now.Add(time.Minute))
	e.seedRecord(protocol.Instance{ID: "i-9", State: protocol.StateRunning, RunID: testRun, Threshold: future}, healthy)
	live := Record{Request: e.request(1), State: recordPending, Nonce: "livenonce", OwnedIDs: []string{"i-9"}}
	e.db.Put(live.Item(protocol.FormatTime(now)))
	go func() {
		time.Sleep(time.Second)
		done := live
		done.State, done.Instances = recordComplete, []Instance{{ID: "i-9", InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, Source: SourcePool}}
		e.db.Put(done.Item(protocol.FormatTime(now)))
	}()
	res, err := e.create(1)
	if err != nil || len(res.Instances) != 1 || res.Instances[0].ID != "i-9" {
		t.Fatalf("Create = %+v, %v; want the completed claim of i-9", res, err)
	}
}

// A complete claim whose runners are no longer held (a destroy that died
// mid-release) is not adopted: its release is finished and the run claims anew.
func TestCreateDoesNotAdoptClaimWhoseRunnersAreGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	if _, err := e.create(1); err != nil {
		t.Fatal(err)
	}
	idleUntil := protocol.FormatTime(time.Now().Add(idleTime))
	e.db.setInstance(t, "i-1", func(r *protocol.Instance) { r.State, r.RunID, r.Threshold = protocol.StateIdle, "", idleUntil })
	e.agents.Poll("i-1") // it sees its record idle and confirms the release
	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Instances) != 1 {
		t.Fatalf("result %+v", res)
	}
	if r := e.db.instance(t, res.Instances[0].ID); r.State != protocol.StateRunning || r.RunID != testRun {
		t.Errorf("%s is %s for %q, want running for the run", r.ID, r.State, r.RunID)
	}
}

// A created record already there with this run's id is our own write whose
// response was lost (the retry then fails its condition): recording the
// launch succeeds.
func TestCreateRecordsLaunchIdempotently(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lost := false
	e.db.FailIf = func(op string, in any) error {
		p, ok := in.(*dynamodb.PutItemInput)
		if !ok || lost || s(p.Item["PK"]) != protocol.TypeInstance {
			return nil
		}
		lost = true // the write happens, its answer is lost, the SDK retries
		k := awsfake.ItemKey(p.Item)
		e.db.Items[k] = awsfake.CopyItem(p.Item)
		e.db.Written(nil, e.db.Items[k])
		return &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed"), Item: awsfake.CopyItem(p.Item)}
	}
	res, err := e.create(1)
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	if !lost || res.Created != 1 || res.Instances[0].ID != "i-f1" {
		t.Errorf("result %+v (lost answer staged: %v), want i-f1 launched", res, lost)
	}
}

// A run id GitHub would match case-insensitively against another, or that
// is no label at all, is refused before anything is touched.
func TestCreateRefusesInvalidRunID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	for _, id := range []string{"Run-1", "", "run 1"} {
		req := e.request(1)
		req.RunID = id
		if _, err := e.c.Create(context.Background(), req); err == nil || !strings.Contains(err.Error(), "run id") {
			t.Errorf("Create with run id %q = %v, want a refusal naming the run id", id, err)
		}
	}
	e.assertNothingHeld(t)
}

// A claim replaces a failing warm runner from the pool, but once more have
// failed their checks than it asked for, it stops taking from the pool and
// launches the rest, leaving the other runners in the pool.
func TestCreateDiscardsAtMostWhatItAskedFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 5 {
		e.seedIdle(fmt.Sprintf("i-%d", i), neverRegisters)
	}
	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused != 0 || res.Created != 1 {
		t.Errorf("reused %d, created %d: want the one runner from the fleet", res.Reused, res.Created)
	}
	if got := e.ec2.TerminatedIDs(); len(got) != 2 {
		t.Errorf("terminated %v: want two warm runners discarded, not the pool", got)
	}
	if got := e.sqs.queuedIDs(t, largeURL); len(got) != 3 {
		t.Errorf("the queue holds %v: want the 3 untried runners", got)
	}
}
