package maintenance

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

// create and release make and give back a claim as the claim resource
// does: with the pool's maintenance alongside (Alongside).
func create(c *claim.Claimer, req claim.Request) (*claim.Result, error) {
	ctx := context.Background()
	defer Alongside(ctx, c, req.Pool)()
	return c.Create(ctx, req)
}

func release(c *claim.Claimer, runID string) ([]string, error) {
	ctx := context.Background()
	defer Alongside(ctx, c, poolworld.Pool)()
	return c.Release(ctx, poolworld.Pool, runID)
}

// putExpired writes the record of an idle runner past its deadline.
func (e *env) putExpired(id string) {
	now := time.Now()
	e.PutRecord(id, protocol.StateIdle, "", now.Add(-time.Minute), now)
}

// seedStopped puts a stopped large runner in the pool, holding a slot of
// the stopped tier.
func (e *env) seedStopped(id string) {
	until := e.SeedStopped(id, poolworld.Healthy)
	e.AddSlot(protocol.TierStopped, "large", poolworld.Slot{ID: id, Until: until, Taken: protocol.FormatTime(time.Now().Add(-time.Hour))})
}

// instances are the pool's instance records, by id.
func (e *env) instances() map[string]protocol.Instance {
	e.T.Helper()
	records, _, err := e.c.PoolTable(poolworld.Pool).Instances(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	out := map[string]protocol.Instance{}
	for _, r := range records {
		out[r.ID] = r
	}
	return out
}

// Claims and releases reap the pool they use, at most once per interval.
func TestCreateAndReleaseReapThePool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.c
	c.ReapInterval = 0
	e.putExpired("i-expired")
	e.SeedIdle("i-1", poolworld.Healthy)
	if _, err := create(c, e.request(1)); err != nil {
		t.Fatal(err)
	}
	if r := e.instances()["i-expired"]; r.State != protocol.StateTerminated {
		t.Errorf("after a claim, the expired runner is %s, want terminated", r.State)
	}
	e.putExpired("i-expired-2")
	e.DB.Put(protocol.BaseItem(protocol.TypeLease, protocol.ReaperLeaseID, protocol.FormatTime(time.Now().Add(-2*DefaultReapInterval))))
	if _, err := release(c, poolworld.Run); err != nil {
		t.Fatal(err)
	}
	if r := e.instances()["i-expired-2"]; r.State != protocol.StateTerminated {
		t.Errorf("after a release, the expired runner is %s, want terminated", r.State)
	}
}

// A claim that starts the stopped runners of a class tops the stopped tier
// up again on its way out, when its opportunistic reap was due.
func TestCreateTopsStoppedTierUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.c
	c.ReapInterval = 0 // due: the first claim reaps
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 1}}
	e.writeConfig()
	e.seedStopped("i-s1")
	res, err := create(c, e.request(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Instances; len(got) != 1 || got[0].ID != "i-s1" || got[0].Source != claim.SourceStopped {
		t.Fatalf("sources %v, want i-s1 started", got)
	}
	status, err := WarmStatus(context.Background(), c, poolworld.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if status["large"].Stopped != 1 {
		t.Errorf("stopped tier %+v after the claim, want it topped up to 1", status["large"])
	}
	// The next claim within the reap interval tops nothing up.
	fleets := len(e.EC2.FleetInputs())
	e.SeedIdle("i-2", poolworld.Healthy)
	req := e.request(1)
	req.RunID = "run-2"
	if _, err := create(c, req); err != nil {
		t.Fatal(err)
	}
	if n := len(e.EC2.FleetInputs()); n != fleets {
		t.Errorf("%d more CreateFleet calls by a claim the pool had a runner for, within the reap interval", n-fleets)
	}
}

// A release may launch, as the documents say, but only this: when its reap
// was due, up to TopUpMost stopped runners per class the
// stopped tier lacks, which prepare and stop themselves; none when the
// reap was not due.
func TestReleaseLaunchesOnlyTheStoppedTopUp(t *testing.T) {
	t.Parallel()
	for _, due := range []bool{false, true} {
		e := newEnv(t)
		c := e.c
		e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 1, Stopped: 4}}
		e.writeConfig()
		e.SeedIdle("i-1", poolworld.Healthy)
		if _, err := create(c, e.request(1)); err != nil { // ReapInterval -1: no maintenance
			t.Fatal(err)
		}
		c.ReapInterval = time.Hour
		if !due {
			if _, ran, err := ReapIfDue(context.Background(), c, poolworld.Pool, c.ReapInterval); err != nil || !ran {
				t.Fatalf("reaping ahead of the release: %v, %v", ran, err)
			}
		}
		if _, err := release(c, poolworld.Run); err != nil {
			t.Fatal(err)
		}
		launched := map[string]protocol.Instance{}
		for id, r := range e.instances() {
			if id != "i-1" {
				launched[id] = r
			}
		}
		switch {
		case !due && len(launched) != 0:
			t.Errorf("a release whose reap was not due launched %v", slices.Sorted(maps.Keys(launched)))
		case due && len(launched) != TopUpMost:
			t.Errorf("a release whose reap was due launched %v, want %d stopped runners", slices.Sorted(maps.Keys(launched)), TopUpMost)
		}
		for id, r := range launched {
			if r.StopUntil == "" || r.State != protocol.StateIdle || r.RunID != "" {
				t.Errorf("%s, launched by the release: %+v; want a stopped-tier runner", id, r)
			}
		}
	}
}
