package claim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// putRecord writes an instance record as it stands, updated at updated.
func (e *env) putRecord(id, state, runID string, threshold, updated time.Time) {
	inst := protocol.Instance{ID: id, State: state, RunID: runID, Threshold: protocol.FormatTime(threshold),
		ResourceClass: "large", InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, UpdatedAt: protocol.FormatTime(updated)}
	e.db.Put(inst.Item())
}

func (e *env) reap() ReapResult {
	e.t.Helper()
	res, err := e.c.Reap(context.Background(), testPool)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func sorted(ids []string) []string { return slices.Sorted(slices.Values(ids)) }

func TestReapTerminatesExpiredRecordsOfEveryState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	past, future := now.Add(-time.Minute), now.Add(time.Hour)
	e.putRecord("i-created", protocol.StateCreated, "run-1", past, now)
	e.putRecord("i-running", protocol.StateRunning, "run-2", past, now)
	e.putRecord("i-idle", protocol.StateIdle, "", past, now)
	e.putRecord("i-claimed", protocol.StateClaimed, "run-3", past, now)
	e.putRecord("i-live", protocol.StateIdle, "", future, now)
	e.putRecord("i-gone", protocol.StateTerminated, "", past, now)
	for _, id := range []string{"i-created", "i-running", "i-idle", "i-claimed", "i-live"} {
		e.ec2.Launch(id, now.Add(-time.Hour))
	}
	res := e.reap()
	want := []string{"i-claimed", "i-created", "i-idle", "i-running"}
	if got := sorted(res.Expired); !slices.Equal(got, want) {
		t.Errorf("expired %v, want %v", got, want)
	}
	if got := e.ec2.TerminatedIDs(); !slices.Equal(got, want) {
		t.Errorf("terminated in EC2 %v, want %v", got, want)
	}
	if n := e.db.Count("TerminateInstances"); n != 0 {
		t.Fatalf("the table saw %d TerminateInstances calls", n)
	}
	e.ec2.Mu.Lock()
	calls := e.ec2.TerminateN
	e.ec2.Mu.Unlock()
	if calls != 1 {
		t.Errorf("%d TerminateInstances calls, want one batch", calls)
	}
	for _, id := range want {
		it := e.db.Get(protocol.TypeInstance, id)
		r := e.db.instance(t, id)
		if r.State != protocol.StateTerminated {
			t.Errorf("%s is %s, want terminated", id, r.State)
		}
		if _, ok := it[protocol.AttrExpiresAt].(*types.AttributeValueMemberN); !ok {
			t.Errorf("%s has no TTL: %v", id, it[protocol.AttrExpiresAt])
		}
	}
	if r := e.db.instance(t, "i-live"); r.State != protocol.StateIdle {
		t.Errorf("the live runner was touched: %+v", r)
	}
	if !e.reap().Empty() {
		t.Error("a second reap found work again")
	}
}

// A record revived between the reaper's read and its write (the condition
// fails: a claim took the runner) is someone else's: it is neither marked
// nor terminated, not even by the orphan pass that follows, although its
// instance (a warm runner) was launched long before the orphan grace.
func TestReapLeavesRecordsThatChangedMeanwhile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	e.putRecord("i-1", protocol.StateIdle, "", now.Add(-time.Minute), now)
	e.putRecord("i-2", protocol.StateIdle, "", now.Add(-time.Minute), now)
	e.ec2.Launch("i-1", now.Add(-time.Hour))
	e.ec2.Launch("i-2", now.Add(-time.Hour))
	e.db.FailIf = func(op string, in any) error {
		if u, ok := in.(*dynamodb.UpdateItemInput); ok && protocol.IdentifierOf(u.Key) == "i-2" {
			return awsfake.ConditionFailed()
		}
		return nil
	}
	res := e.reap()
	if !slices.Equal(res.Expired, []string{"i-1"}) || !slices.Equal(e.ec2.TerminatedIDs(), []string{"i-1"}) {
		t.Errorf("expired %v, terminated %v; want only i-1", res.Expired, e.ec2.TerminatedIDs())
	}
}

func TestReapTerminatesOrphansAfterGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	e.ec2.Launch("i-orphan", now.Add(-orphanGrace-time.Minute))
	e.ec2.Launch("i-booting", now.Add(-time.Minute))
	e.ec2.Launch("i-tracked", now.Add(-time.Hour))
	e.putRecord("i-tracked", protocol.StateIdle, "", now.Add(time.Hour), now)
	e.ec2.Launch("i-reaped-earlier", now.Add(-time.Hour)) // its termination failed last time
	e.putRecord("i-reaped-earlier", protocol.StateTerminated, "", now.Add(-time.Minute), now)
	res := e.reap()
	want := []string{"i-orphan", "i-reaped-earlier"}
	if got := sorted(res.Orphans); !slices.Equal(got, want) {
		t.Errorf("orphans %v, want %v", got, want)
	}
	if got := e.ec2.TerminatedIDs(); !slices.Equal(got, want) {
		t.Errorf("terminated %v, want %v", got, want)
	}
}

// A live record whose instance EC2 no longer runs (a reclaimed spot
// instance) is expired and terminated, once it is older than the grace.
func TestReapRecordsVanishedInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	e.putRecord("i-vanished", protocol.StateIdle, "", now.Add(time.Hour), now.Add(-orphanGrace-time.Minute))
	e.putRecord("i-new", protocol.StateCreated, "run-1", now.Add(time.Hour), now.Add(-time.Minute))
	res := e.reap()
	if !slices.Equal(res.Vanished, []string{"i-vanished"}) {
		t.Errorf("vanished %v, want [i-vanished]", res.Vanished)
	}
	if r := e.db.instance(t, "i-vanished"); r.State != protocol.StateTerminated {
		t.Errorf("i-vanished is %s, want terminated", r.State)
	}
	if r := e.db.instance(t, "i-new"); r.State != protocol.StateCreated {
		t.Errorf("i-new (within the grace) is %s, want created", r.State)
	}
}

func TestReapSkipsCorruptRecordsAndPaginates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.db.QueryPage = 2
	now := time.Now()
	for _, id := range []string{"i-1", "i-2", "i-3", "i-4", "i-5"} {
		e.putRecord(id, protocol.StateIdle, "", now.Add(-time.Minute), now)
		e.ec2.Launch(id, now)
	}
	bad := protocol.BaseItem(protocol.TypeInstance, "i-bad", protocol.FormatTime(now))
	bad[protocol.AttrState] = &types.AttributeValueMemberN{Value: "7"}
	e.db.Put(bad)
	res := e.reap()
	if len(res.Expired) != 5 {
		t.Errorf("expired %v, want all five across pages", res.Expired)
	}
	if len(res.CorruptItems) != 1 || !strings.Contains(res.CorruptItems[0], "ID#i-bad") {
		t.Errorf("corrupt items %v, want i-bad named", res.CorruptItems)
	}
}

func TestReapDeletesStalePendingClaimRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	old := now.Add(-staleClaimAge - time.Minute)
	e.ec2.Launch("i-alive", now.Add(-time.Hour))
	e.putRecord("i-alive", protocol.StateClaimed, "run-alive", now.Add(time.Minute), now)
	for runID, c := range map[string]struct {
		state string
		ids   []string
	}{
		"run-stale":    {recordPending, []string{"i-gone"}},
		"run-alive":    {recordPending, []string{"i-alive"}},
		"run-complete": {recordComplete, []string{"i-gone"}},
	} {
		r := Record{Request: Request{Pool: testPool, RunID: runID, InstanceCount: 1, ResourceClass: "large"}, State: c.state, Nonce: "n", OwnedIDs: c.ids}
		item := r.item(protocol.FormatTime(old))
		e.db.Put(item)
	}
	res := e.reap()
	if !slices.Equal(res.StaleClaims, []string{"run-stale"}) {
		t.Errorf("stale claims %v, want [run-stale]", res.StaleClaims)
	}
	for runID, want := range map[string]bool{"run-stale": false, "run-alive": true, "run-complete": true} {
		if got := e.db.Get(protocol.TypeClaim, runID) != nil; got != want {
			t.Errorf("claim record %s exists = %v, want %v", runID, got, want)
		}
	}
}

func TestReapIfDueRunsOncePerInterval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	e.c.Now = func() time.Time { return now }
	ctx := context.Background()
	for i, tc := range []struct {
		advance  time.Duration
		interval time.Duration
		want     bool
	}{
		{0, time.Minute, true},
		{30 * time.Second, time.Minute, false},
		{31 * time.Second, time.Minute, true},
		{time.Hour, -1, false},
	} {
		now = now.Add(tc.advance)
		if _, ran, err := e.c.ReapIfDue(ctx, testPool, tc.interval); err != nil || ran != tc.want {
			t.Errorf("call %d: ran %v (%v), want %v", i, ran, err, tc.want)
		}
	}
	// The lease is TYPE#LEASE / ID#reaper, beside the pool config: claims
	// may not write TYPE#METADATA.
	lease := e.db.Get(protocol.TypeLease, protocol.ReaperLeaseID)
	if got := protocol.StringAttr(lease, protocol.AttrUpdatedAt); got != protocol.FormatTime(now.Add(-time.Hour)) {
		t.Errorf("lease item %v, want updatedAt of the last reap", lease)
	}
	if it := e.db.Get(protocol.TypeMetadata, protocol.ReaperLeaseID); it != nil {
		t.Errorf("a lease under TYPE#METADATA: %v", it)
	}
}
