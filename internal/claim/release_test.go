package claim

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// claimed creates a claim of the given warm runners (all healthy on claim),
// its request changed by change, and then sets each agent's behaviour for
// the release.
func (e *env) claimed(t *testing.T, behaviors map[string]behavior, change ...func(*Request)) {
	t.Helper()
	names := make([]string, 0, len(behaviors))
	for id := range behaviors {
		names = append(names, id)
	}
	slices.Sort(names)
	for _, id := range names {
		e.seedIdle(id, healthy)
	}
	if _, err := e.create(len(names), change...); err != nil {
		t.Fatal(err)
	}
	for id, b := range behaviors {
		e.agents.Set(id, b)
	}
}

func (e *env) release() ([]string, error) {
	return e.c.Release(context.Background(), testPool, testRun)
}

func TestReleaseGivesRunnerBackAfterConfirmation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The agent confirms from a goroutine, scheduled whenever the machine
	// lets it: a release wait it cannot miss (the release returns as soon
	// as the confirmation is there).
	e.claimed(t, map[string]behavior{"i-1": healthy}, func(r *Request) { r.Timings.ReleaseWait = 10 * time.Minute })
	e.agents.SetReleaseDelay(100 * time.Millisecond)
	runningThreshold := e.db.instance(t, "i-1").Threshold
	start := time.Now()
	outcomes, err := e.release()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(outcomes, []string{"i-1: released to the pool"}) {
		t.Errorf("outcomes %q", outcomes)
	}
	r := e.db.instance(t, "i-1")
	if r.State != protocol.StateIdle || r.RunID != "" {
		t.Errorf("i-1 is %s for %q, want idle and unowned", r.State, r.RunID)
	}
	during(start, idleTime).Check(t, "idle threshold", r.Threshold)
	q := e.sqs.queued(t, largeURL)
	want := idleMessage("i-1", "c6i.large", time.Time{})
	want.Threshold = r.Threshold
	if len(q) != 1 || q[0] != want {
		t.Fatalf("queue %+v, want %+v", q, want)
	}
	if q[0].Threshold == runningThreshold {
		t.Error("the message carries the old running threshold")
	}
	sent := e.sqs.SentEntries()
	if len(sent) != 1 || sent[0].Delay != 0 {
		t.Fatalf("sent %+v, want one message without delay", sent)
	}
	confirmed, ok := e.agents.Signalled("i-1")
	if !ok || sent[0].At.Before(confirmed) {
		t.Errorf("message sent at %v, before the agent confirmed at %v", sent[0].At, confirmed)
	}
	if _, ok := e.claimRecord(); ok {
		t.Error("the claim record is still there")
	}
	if len(e.ec2.TerminatedIDs()) != 0 {
		t.Errorf("terminated %v", e.ec2.TerminatedIDs())
	}
	// The transition was running -> idle, conditioned on the run and a live deadline.
	var found bool
	for _, in := range e.db.updates() {
		v := in.ExpressionAttributeValues
		if s(v[":fromState"]) == protocol.StateRunning && s(v[":toState"]) == protocol.StateIdle {
			found = true
			if s(v[":fromRunId"]) != testRun || s(v[":toRunId"]) != "" || !strings.HasSuffix(*in.ConditionExpression, "#threshold > :now") {
				t.Errorf("release write %v / %s", render(v), *in.ConditionExpression)
			}
		}
	}
	if !found {
		t.Error("no running -> idle write")
	}

	// Releasing again does nothing.
	calls := len(e.sqs.SentEntries())
	outcomes, err = e.release()
	if err != nil || outcomes != nil {
		t.Errorf("second release = %q, %v; want nothing", outcomes, err)
	}
	if len(e.sqs.SentEntries()) != calls || len(e.ec2.TerminatedIDs()) != 0 {
		t.Error("second release did something")
	}
}

func s(v types.AttributeValue) string {
	if sv, ok := v.(*types.AttributeValueMemberS); ok {
		return sv.Value
	}
	return ""
}

// A runner whose agent does not confirm its release (or confirms another
// run's) is expired and terminated, and never goes back to the queue.
func TestReleaseTerminatesRunnerThatDoesNotConfirm(t *testing.T) {
	for _, b := range []behavior{neverConfirmsRelease, releasesWrongRun} {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.claimed(t, map[string]behavior{"i-1": b, "i-2": healthy})
			outcomes, err := e.release()
			if err != nil {
				t.Fatal(err)
			}
			if len(outcomes) != 2 || !strings.HasPrefix(outcomes[0], "i-1: did not confirm its release (no UD_REMOVE_REG_REMOVE_RUN_OK for run run-1") ||
				!strings.HasSuffix(outcomes[0], "terminated") || outcomes[1] != "i-2: released to the pool" {
				t.Errorf("outcomes %q", outcomes)
			}
			if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-1"}) {
				t.Errorf("terminated %v", got)
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateTerminated {
				t.Errorf("i-1 is %s", r.State)
			}
			if ids := e.sqs.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-2"}) {
				t.Errorf("queue holds %v, want only i-2", ids)
			}
			if _, ok := e.claimRecord(); ok {
				t.Error("the claim record is still there")
			}
		})
	}
}

func TestReleaseTerminatesRunnerWhoseRuntimeRanOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claimed(t, map[string]behavior{"i-1": healthy})
	e.db.setInstance(t, "i-1", func(r *protocol.Instance) { r.Threshold = protocol.FormatTime(time.Now().Add(-time.Second)) })
	outcomes, err := e.release()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(outcomes, []string{"i-1: its deadline had passed; terminated"}) {
		t.Errorf("outcomes %q", outcomes)
	}
	if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-1"}) {
		t.Errorf("terminated %v", got)
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateTerminated || r.RunID != testRun {
		t.Errorf("i-1 is %s for %q", r.State, r.RunID)
	}
	if ids := e.sqs.queuedIDs(t, largeURL); len(ids) != 0 {
		t.Errorf("queue holds %v", ids)
	}
}

// Instances now owned by someone else are left alone, whether the record
// says so up front or changes just before the release write.
func TestReleaseLeavesOtherRunsInstancesAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claimed(t, map[string]behavior{"i-1": healthy, "i-2": healthy, "i-3": healthy})
	e.db.setInstance(t, "i-1", func(r *protocol.Instance) { r.RunID = "other-run" })
	e.db.setInstance(t, "i-2", func(r *protocol.Instance) { r.State, r.RunID = protocol.StateIdle, "" })
	e.db.Put(signalItem("i-2", protocol.SignalRegistered, "other-run")) // another run had it since
	// i-3 is taken by another run between the read and the write.
	e.db.FailIf = func(op string, in any) error {
		if u := updateTo(in, "i-3", protocol.StateIdle); u != nil {
			k := awsfake.ItemKey(u.Key)
			inst, _ := protocol.InstanceFromItem(e.db.Items[k])
			inst.State, inst.RunID = protocol.StateClaimed, "other-run"
			e.db.Items[k] = inst.Item() // failIf runs under the table's lock
		}
		return nil
	}
	before := map[string]string{}
	for _, id := range []string{"i-1", "i-2"} {
		before[id] = render(e.db.Get(protocol.TypeInstance, id))
	}
	outcomes, err := e.release()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"i-1: no longer held by the run", "i-2: no longer held by the run", "i-3: no longer held by the run"}
	slices.Sort(outcomes)
	if !slices.Equal(outcomes, want) {
		t.Errorf("outcomes %q, want %q", outcomes, want)
	}
	for id, b := range before {
		if after := render(e.db.Get(protocol.TypeInstance, id)); after != b {
			t.Errorf("%s changed: %s -> %s", id, b, after)
		}
	}
	if r := e.db.instance(t, "i-3"); r.State != protocol.StateClaimed || r.RunID != "other-run" {
		t.Errorf("i-3 is %s for %q", r.State, r.RunID)
	}
	if len(e.ec2.TerminatedIDs()) != 0 || len(e.sqs.SentEntries()) != 0 {
		t.Errorf("terminated %v, sent %v", e.ec2.TerminatedIDs(), e.sqs.SentEntries())
	}
	if _, ok := e.claimRecord(); ok {
		t.Error("the claim record is still there")
	}
}

// A release that fails part-way keeps the claim record, so a retried
// destroy releases the rest.
func TestReleaseRetryAfterError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claimed(t, map[string]behavior{"i-1": healthy, "i-2": healthy})
	var failing atomic.Bool
	failing.Store(true)
	e.db.FailIf = func(op string, in any) error {
		if failing.Load() && writesState(in, "i-2", protocol.StateIdle) {
			return errTransient // in the transaction, and alone
		}
		return nil
	}
	outcomes, err := e.release()
	if err == nil || !strings.Contains(err.Error(), "instance i-2") || !strings.Contains(err.Error(), errTransient.Error()) {
		t.Fatalf("error %v, want i-2's failure", err)
	}
	if !slices.Equal(outcomes, []string{"i-1: released to the pool"}) {
		t.Errorf("outcomes %q", outcomes)
	}
	if _, ok := e.claimRecord(); !ok {
		t.Fatal("the claim record is gone after a failed release")
	}
	failing.Store(false)
	outcomes, err = e.release()
	if err != nil {
		t.Fatal(err)
	}
	// i-1 left the record when it was settled: the retry does not touch it.
	if !slices.Equal(outcomes, []string{"i-2: released to the pool"}) {
		t.Errorf("retry outcomes %q", outcomes)
	}
	if ids := e.sqs.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-1", "i-2"}) {
		t.Errorf("queue holds %v, want each once", ids)
	}
	if _, ok := e.claimRecord(); ok {
		t.Error("the claim record is still there")
	}
}

func TestReleaseOfMissingClaimOrPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, p := range []string{testPool, "nopool"} {
		outcomes, err := e.c.Release(context.Background(), p, "never-claimed")
		if err != nil || outcomes != nil {
			t.Errorf("Release in %s = %q, %v; want nothing", p, outcomes, err)
		}
	}
	if len(e.sqs.SentEntries()) != 0 || len(e.ec2.TerminatedIDs()) != 0 || e.db.Count("UpdateItem") != 0 {
		t.Error("releasing nothing did something")
	}
	// Other errors are reported.
	e.db.Fail("GetItem", e.db.Count("GetItem")+1, errTransient)
	if _, err := e.c.Release(context.Background(), testPool, "x"); err == nil {
		t.Error("a read error was swallowed")
	}
}

// A destroy that died after giving a runner back but before sending its
// message: the next release sends it (the agent's last signal says no run
// took the runner since) and finishes the others.
func TestReleaseFinishesReleaseOfCrashedDestroy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claimed(t, map[string]behavior{"i-1": healthy, "i-2": healthy})
	idleUntil := protocol.FormatTime(time.Now().Add(idleTime))
	e.db.setInstance(t, "i-1", func(r *protocol.Instance) { r.State, r.RunID, r.Threshold = protocol.StateIdle, "", idleUntil })
	e.db.Put(signalItem("i-1", protocol.SignalReleased, testRun))
	outcomes, err := e.release()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(outcomes, []string{"i-1: released to the pool", "i-2: released to the pool"}) {
		t.Errorf("outcomes %q", outcomes)
	}
	q := e.sqs.queued(t, largeURL)
	if len(q) != 2 {
		t.Fatalf("queue %+v, want both runners", q)
	}
	for _, m := range q {
		if m.ID == "i-1" && m.Threshold != idleUntil {
			t.Errorf("i-1's message carries %s, want its idle deadline %s", m.Threshold, idleUntil)
		}
	}
}

// A release whose caller gives it less time than release_wait (a destroy's
// delete timeout) stops waiting for the agents in time to terminate the
// runners that have not confirmed, and succeeds: nothing is left idle
// without a message.
func TestReleaseSettlesBeforeItsCallersDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claimed(t, map[string]behavior{"i-1": neverConfirmsRelease}, func(r *Request) { r.Timings.ReleaseWait = 10 * time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), settleMargin+time.Second)
	defer cancel()
	outcomes, err := e.c.Release(ctx, testPool, testRun)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	if len(outcomes) != 1 || !strings.HasPrefix(outcomes[0], "i-1: did not confirm its release") || !strings.HasSuffix(outcomes[0], "terminated") {
		t.Errorf("outcomes %q, want i-1 terminated for not confirming", outcomes)
	}
	if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-1"}) {
		t.Errorf("terminated %v", got)
	}
	if _, ok := e.claimRecord(); ok {
		t.Error("the claim record is still there")
	}
}

// The waits of a release run on the Claimer's clock when it has one: a
// simulation's virtual clock moves on through an hour's release wait, for
// a runner that never confirms, without an hour passing.
func TestReleaseWaitsOnTheClaimersClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claimed(t, map[string]behavior{"i-1": neverConfirmsRelease}, func(r *Request) {
		r.Timings.ReleaseWait, r.Timings.PollInterval = time.Hour, time.Minute
	})
	var (
		mu     sync.Mutex
		now    = time.Now()
		sleeps int
	)
	e.c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e.c.Sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		now, sleeps = now.Add(d), sleeps+1
		return ctx.Err()
	}
	start := e.c.Now()
	done := make(chan struct{})
	var outcomes []string
	go func() {
		defer close(done)
		var err error
		if outcomes, err = e.release(); err != nil {
			t.Error(err)
		}
	}()
	await.Done(t, "the release, on the virtual clock", done)
	if len(outcomes) != 1 || !strings.HasPrefix(outcomes[0], "i-1: did not confirm its release") {
		t.Errorf("outcomes %q, want i-1 terminated for not confirming", outcomes)
	}
	if waited := e.c.Now().Sub(start); waited < time.Hour || sleeps < 60 {
		t.Errorf("the virtual clock moved %s in %d sleeps, want the hour's wait in one-minute polls", waited, sleeps)
	}
}
