package maintenance

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

func TestReapTerminatesExpiredRecordsOfEveryState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	past, future := now.Add(-time.Minute), now.Add(time.Hour)
	e.PutRecord("i-created", protocol.StateCreated, "run-1", past, now)
	e.PutRecord("i-running", protocol.StateRunning, "run-2", past, now)
	e.PutRecord("i-idle", protocol.StateIdle, "", past, now)
	e.PutRecord("i-claimed", protocol.StateClaimed, "run-3", past, now)
	e.PutRecord("i-live", protocol.StateIdle, "", future, now)
	e.PutRecord("i-gone", protocol.StateTerminated, "", past, now)
	for _, id := range []string{"i-created", "i-running", "i-idle", "i-claimed", "i-live"} {
		e.EC2.Launch(id, now.Add(-time.Hour))
	}
	res := e.reap()
	want := []string{"i-claimed", "i-created", "i-idle", "i-running"}
	if got := sorted(res.Expired); !slices.Equal(got, want) {
		t.Errorf("expired %v, want %v", got, want)
	}
	if got := e.EC2.TerminatedIDs(); !slices.Equal(got, want) {
		t.Errorf("terminated in EC2 %v, want %v", got, want)
	}
	if n := e.DB.Count("TerminateInstances"); n != 0 {
		t.Fatalf("the table saw %d TerminateInstances calls", n)
	}
	e.EC2.Mu.Lock()
	calls := e.EC2.TerminateN
	e.EC2.Mu.Unlock()
	if calls != 1 {
		t.Errorf("%d TerminateInstances calls, want one batch", calls)
	}
	for _, id := range want {
		it := e.DB.Get(protocol.TypeInstance, id)
		r := e.DB.Instance(t, id)
		if r.State != protocol.StateTerminated {
			t.Errorf("%s is %s, want terminated", id, r.State)
		}
		if _, ok := it[protocol.AttrExpiresAt].(*types.AttributeValueMemberN); !ok {
			t.Errorf("%s has no TTL: %v", id, it[protocol.AttrExpiresAt])
		}
	}
	if r := e.DB.Instance(t, "i-live"); r.State != protocol.StateIdle {
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
	e.PutRecord("i-1", protocol.StateIdle, "", now.Add(-time.Minute), now)
	e.PutRecord("i-2", protocol.StateIdle, "", now.Add(-time.Minute), now)
	e.EC2.Launch("i-1", now.Add(-time.Hour))
	e.EC2.Launch("i-2", now.Add(-time.Hour))
	e.DB.FailIf = func(op string, in any) error {
		if u, ok := in.(*dynamodb.UpdateItemInput); ok && protocol.IdentifierOf(u.Key) == "i-2" {
			return awsfake.ConditionFailed()
		}
		return nil
	}
	res := e.reap()
	if !slices.Equal(res.Expired, []string{"i-1"}) || !slices.Equal(e.EC2.TerminatedIDs(), []string{"i-1"}) {
		t.Errorf("expired %v, terminated %v; want only i-1", res.Expired, e.EC2.TerminatedIDs())
	}
}

func TestReapTerminatesOrphansAfterGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	e.EC2.Launch("i-orphan", now.Add(-orphanGrace-time.Minute))
	e.EC2.Launch("i-booting", now.Add(-time.Minute))
	e.EC2.Launch("i-tracked", now.Add(-time.Hour))
	e.PutRecord("i-tracked", protocol.StateIdle, "", now.Add(time.Hour), now)
	e.EC2.Launch("i-reaped-earlier", now.Add(-time.Hour)) // its termination failed last time
	e.PutRecord("i-reaped-earlier", protocol.StateTerminated, "", now.Add(-time.Minute), now)
	res := e.reap()
	want := []string{"i-orphan", "i-reaped-earlier"}
	if got := sorted(res.Orphans); !slices.Equal(got, want) {
		t.Errorf("orphans %v, want %v", got, want)
	}
	if got := e.EC2.TerminatedIDs(); !slices.Equal(got, want) {
		t.Errorf("terminated %v, want %v", got, want)
	}
}

// A live record whose instance EC2 no longer runs (a reclaimed spot
// instance) is expired and terminated, once it is older than the grace.
func TestReapRecordsVanishedInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	e.PutRecord("i-vanished", protocol.StateIdle, "", now.Add(time.Hour), now.Add(-orphanGrace-time.Minute))
	e.PutRecord("i-new", protocol.StateCreated, "run-1", now.Add(time.Hour), now.Add(-time.Minute))
	res := e.reap()
	if !slices.Equal(res.Vanished, []string{"i-vanished"}) {
		t.Errorf("vanished %v, want [i-vanished]", res.Vanished)
	}
	if r := e.DB.Instance(t, "i-vanished"); r.State != protocol.StateTerminated {
		t.Errorf("i-vanished is %s, want terminated", r.State)
	}
	if r := e.DB.Instance(t, "i-new"); r.State != protocol.StateCreated {
		t.Errorf("i-new (within the grace) is %s, want created", r.State)
	}
}

func TestReapSkipsCorruptRecordsAndPaginates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.DB.QueryPage = 2
	now := time.Now()
	for _, id := range []string{"i-1", "i-2", "i-3", "i-4", "i-5"} {
		e.PutRecord(id, protocol.StateIdle, "", now.Add(-time.Minute), now)
		e.EC2.Launch(id, now)
	}
	bad := protocol.BaseItem(protocol.TypeInstance, "i-bad", protocol.FormatTime(now))
	bad[protocol.AttrState] = &types.AttributeValueMemberN{Value: "7"}
	e.DB.Put(bad)
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
	e.EC2.Launch("i-alive", now.Add(-time.Hour))
	e.PutRecord("i-alive", protocol.StateClaimed, "run-alive", now.Add(time.Minute), now)
	for runID, c := range map[string]struct {
		state string
		ids   []string
	}{
		"run-stale":    {claim.StatePending, []string{"i-gone"}},
		"run-alive":    {claim.StatePending, []string{"i-alive"}},
		"run-complete": {claim.StateComplete, []string{"i-gone"}},
	} {
		r := claim.Record{Request: claim.Request{Pool: poolworld.Pool, RunID: runID, InstanceCount: 1, ResourceClass: "large"}, State: c.state, Nonce: "n", OwnedIDs: c.ids}
		item := r.Item(protocol.FormatTime(old))
		e.DB.Put(item)
	}
	res := e.reap()
	if !slices.Equal(res.StaleClaims, []string{"run-stale"}) {
		t.Errorf("stale claims %v, want [run-stale]", res.StaleClaims)
	}
	for runID, want := range map[string]bool{"run-stale": false, "run-alive": true, "run-complete": true} {
		if got := e.DB.Get(protocol.TypeClaim, runID) != nil; got != want {
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
		if _, ran, err := ReapIfDue(ctx, e.c, poolworld.Pool, tc.interval); err != nil || ran != tc.want {
			t.Errorf("call %d: ran %v (%v), want %v", i, ran, err, tc.want)
		}
	}
	// The lease is TYPE#LEASE / ID#reaper, beside the pool config: claims
	// may not write TYPE#METADATA.
	lease := e.DB.Get(protocol.TypeLease, protocol.ReaperLeaseID)
	if got := protocol.StringAttr(lease, protocol.AttrUpdatedAt); got != protocol.FormatTime(now.Add(-time.Hour)) {
		t.Errorf("lease item %v, want updatedAt of the last reap", lease)
	}
	if it := e.DB.Get(protocol.TypeMetadata, protocol.ReaperLeaseID); it != nil {
		t.Errorf("a lease under TYPE#METADATA: %v", it)
	}
}
