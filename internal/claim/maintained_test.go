package claim_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// create and release make and give back a claim as the claim resource
// does: with the pool's maintenance alongside (maintenance.Alongside).
func create(c *claim.Claimer, req claim.Request) (*claim.Result, error) {
	ctx := context.Background()
	defer maintenance.Alongside(ctx, c, req.Pool)()
	return c.Create(ctx, req)
}

func release(c *claim.Claimer, runID string) ([]string, error) {
	ctx := context.Background()
	defer maintenance.Alongside(ctx, c, claim.TestPool)()
	return c.Release(ctx, claim.TestPool, runID)
}

// Claims and releases reap the pool they use, at most once per interval.
func TestCreateAndReleaseReapThePool(t *testing.T) {
	t.Parallel()
	w := claim.NewWorld(t)
	c := w.Claimer()
	c.ReapInterval = 0
	w.PutExpired("i-expired")
	w.SeedIdle("i-1")
	if _, err := create(c, w.Request(1)); err != nil {
		t.Fatal(err)
	}
	if r := w.Instances()["i-expired"]; r.State != protocol.StateTerminated {
		t.Errorf("after a claim, the expired runner is %s, want terminated", r.State)
	}
	w.PutExpired("i-expired-2")
	w.ReaperLeaseTaken(time.Now().Add(-2 * claim.DefaultReapInterval))
	if _, err := release(c, claim.TestRun); err != nil {
		t.Fatal(err)
	}
	if r := w.Instances()["i-expired-2"]; r.State != protocol.StateTerminated {
		t.Errorf("after a release, the expired runner is %s, want terminated", r.State)
	}
}

// A claim that starts the stopped runners of a class tops the stopped tier
// up again on its way out, when its opportunistic reap was due.
func TestCreateTopsStoppedTierUp(t *testing.T) {
	t.Parallel()
	w := claim.NewWorld(t)
	c := w.Claimer()
	c.ReapInterval = 0 // due: the first claim reaps
	w.SetWarm(map[string]protocol.WarmTarget{"large": {Stopped: 1}})
	w.SeedStopped("i-s1")
	res, err := create(c, w.Request(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := claim.Sources(res); !slices.Equal(got[claim.SourceStopped], []string{"i-s1"}) {
		t.Fatalf("sources %v, want i-s1 started", got)
	}
	status, err := c.WarmStatus(context.Background(), claim.TestPool)
	if err != nil {
		t.Fatal(err)
	}
	if status["large"].Stopped != 1 {
		t.Errorf("stopped tier %+v after the claim, want it topped up to 1", status["large"])
	}
	// The next claim within the reap interval tops nothing up.
	fleets := w.FleetCalls()
	w.SeedIdle("i-2")
	req := w.Request(1)
	req.RunID = "run-2"
	if _, err := create(c, req); err != nil {
		t.Fatal(err)
	}
	if n := w.FleetCalls(); n != fleets {
		t.Errorf("%d more CreateFleet calls by a claim the pool had a runner for, within the reap interval", n-fleets)
	}
}

// A release may launch, as the documents say, but only this: when its reap
// was due, up to maintenance.TopUpMost stopped runners per class the
// stopped tier lacks, which prepare and stop themselves; none when the
// reap was not due.
func TestReleaseLaunchesOnlyTheStoppedTopUp(t *testing.T) {
	t.Parallel()
	for _, due := range []bool{false, true} {
		w := claim.NewWorld(t)
		c := w.Claimer()
		w.SetWarm(map[string]protocol.WarmTarget{"large": {Hot: 1, Stopped: 4}})
		w.SeedIdle("i-1")
		if _, err := create(c, w.Request(1)); err != nil { // ReapInterval -1: no maintenance
			t.Fatal(err)
		}
		c.ReapInterval = time.Hour
		if !due {
			if _, ran, err := c.ReapIfDue(context.Background(), claim.TestPool, c.ReapInterval); err != nil || !ran {
				t.Fatalf("reaping ahead of the release: %v, %v", ran, err)
			}
		}
		if _, err := release(c, claim.TestRun); err != nil {
			t.Fatal(err)
		}
		launched := map[string]protocol.Instance{}
		for id, r := range w.Instances() {
			if id != "i-1" {
				launched[id] = r
			}
		}
		switch {
		case !due && len(launched) != 0:
			t.Errorf("a release whose reap was not due launched %v", slices.Sorted(maps.Keys(launched)))
		case due && len(launched) != maintenance.TopUpMost:
			t.Errorf("a release whose reap was due launched %v, want %d stopped runners", slices.Sorted(maps.Keys(launched)), maintenance.TopUpMost)
		}
		for id, r := range launched {
			if r.StopUntil == "" || r.State != protocol.StateIdle || r.RunID != "" {
				t.Errorf("%s, launched by the release: %+v; want a stopped-tier runner", id, r)
			}
		}
	}
}
