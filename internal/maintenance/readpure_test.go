package maintenance

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

// readOps are the only DynamoDB calls a read path makes.
var readOps = []string{"GetItem", "BatchGetItem", "Query"}

// What the provider's reads call (a claim's Read, List for the list
// resource, Runners and WarmStatus for the data sources and the pool's
// refresh, pool.ReadConfig for plans) writes nothing, on a pool where
// everything is due for reaping: a runner past its deadline, an orphan
// instance, a crashed attempt's claim record, warm slots, and no reaper
// lease. The same pool reaped afterwards shows that all of it was due.
func TestReadPathsWriteNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.c.ReapInterval = 0 // due, as far as ReapIfDue is concerned
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 1, Stopped: 1}}
	e.writeConfig()
	now := time.Now()
	long := now.Add(-2 * time.Hour)
	e.PutRecord("i-expired", protocol.StateIdle, "", now.Add(-time.Minute), long)
	e.EC2.Launch("i-expired", long)
	e.EC2.Launch("i-orphan", long)
	e.PutRecord("i-held", protocol.StateRunning, poolworld.Run, now.Add(time.Hour), now)
	e.EC2.Launch("i-held", now.Add(-time.Hour))
	e.AddSlot(protocol.TierHot, "large", poolworld.Slot{ID: "i-expired", Until: protocol.FormatTime(now.Add(time.Hour)), Taken: protocol.FormatTime(long)})
	held := []claim.Instance{{ID: "i-held", InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, Source: claim.SourcePool}}
	complete := claim.Record{Request: e.request(1), State: claim.StateComplete, Nonce: "n1", Instances: held, OwnedIDs: []string{"i-held"}}
	e.DB.Put(complete.Item(protocol.FormatTime(now)))
	crashed := claim.Record{Request: claim.Request{Pool: poolworld.Pool, RunID: "run-crashed", InstanceCount: 1, ResourceClass: "large"}, State: claim.StatePending, Nonce: "n2", OwnedIDs: []string{"i-gone"}}
	e.DB.Put(crashed.Item(protocol.FormatTime(now.Add(-staleClaimAge - time.Minute))))

	items := snapshot(e.DB)
	ec2Before := ec2Snapshot(e.EC2)
	ctx := context.Background()
	if _, live, ok, err := e.c.Read(ctx, poolworld.Pool, poolworld.Run); err != nil || !ok || len(live) != 1 {
		t.Fatalf("Read = %v, %v, %v", live, ok, err)
	}
	if claims, _, err := e.c.List(ctx, poolworld.Pool, claim.ListFilter{}); err != nil || len(claims) != 2 {
		t.Fatalf("List = %d claims, %v", len(claims), err)
	}
	if runners, _, err := e.c.Runners(ctx, poolworld.Pool); err != nil || len(runners) != 1 {
		t.Fatalf("Runners = %v, %v", runners, err)
	}
	if counts, err := WarmStatus(ctx, e.c, poolworld.Pool); err != nil || counts["large"].HotTarget != 1 {
		t.Fatalf("WarmStatus = %v, %v", counts, err)
	}
	if _, err := pool.ReadConfig(ctx, e.DB, poolworld.Pool); err != nil {
		t.Fatal(err)
	}

	for _, c := range calls(e.DB) {
		if !slices.Contains(readOps, c) {
			t.Errorf("a read path called DynamoDB %s", c)
		}
	}
	if !reflect.DeepEqual(items, snapshot(e.DB)) {
		t.Error("the table changed")
	}
	if n := e.SQS.CallCount(); n != 0 {
		t.Errorf("a read path made %d SQS calls (a receive hides messages)", n)
	}
	if got := ec2Snapshot(e.EC2); !reflect.DeepEqual(got, ec2Before) {
		t.Errorf("EC2 changed: %+v, was %+v", got, ec2Before)
	}

	// Reaped afterwards, the same pool shows that all of it was due.
	res, ran, err := ReapIfDue(ctx, e.c, poolworld.Pool, DefaultReapInterval)
	if err != nil || !ran {
		t.Fatalf("ReapIfDue = %v, %v", ran, err)
	}
	if !slices.Equal(res.Expired, []string{"i-expired"}) || !slices.Equal(res.Orphans, []string{"i-orphan"}) || !slices.Equal(res.StaleClaims, []string{"run-crashed"}) {
		t.Errorf("the reap after the reads: %+v; want i-expired expired, i-orphan an orphan, run-crashed stale", res)
	}
}

// snapshot copies the table's items.
func snapshot(f *poolworld.Table) map[string]poolworld.Item {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	out := make(map[string]poolworld.Item, len(f.Items))
	for k, it := range f.Items {
		out[k] = awsfake.CopyItem(it)
	}
	return out
}

// calls names the table's calls, in order.
func calls(f *poolworld.Table) []string {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	out := make([]string, len(f.Calls))
	for i, c := range f.Calls {
		out[i] = c.Op
	}
	return out
}

// ec2State is what EC2 writes change.
type ec2State struct {
	Live       []string
	Stopped    []string
	Fleets     int
	Runs       int
	Terminated []string
	TerminateN int
	Started    []string
}

func ec2Snapshot(e *awsfake.EC2) ec2State {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	return ec2State{
		Live: slices.Sorted(maps.Keys(e.Live)), Stopped: slices.Sorted(maps.Keys(e.Stopped)),
		Fleets: len(e.Fleets), Runs: len(e.Runs), Terminated: slices.Clone(e.Terminated), TerminateN: e.TerminateN, Started: slices.Clone(e.StartedIDs),
	}
}
