package simulate

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var day = time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)

// twoRuns: a one-job run at 0 whose 5 minute job ends, on a runner that
// booted for ColdBoot, at 375 s, when the run releases it; a second
// one-job run 45 s later (before the pool's once-a-minute reap is due).
func twoRuns() Trace {
	return Trace{Name: "two", Runs: []Run{
		{At: day, Class: "large", Jobs: []time.Duration{5 * time.Minute}},
		{At: day.Add(ColdBoot + 5*time.Minute + 45*time.Second), Class: "large", Jobs: []time.Duration{5 * time.Minute}},
	}}
}

func replayTwoRuns(t *testing.T, idle time.Duration) (*World, Result) {
	t.Helper()
	w := NewWorld(day, HotPolicy(idle), LatencyBySource(ColdBoot, StoppedStart))
	res, err := w.Replay(context.Background(), twoRuns())
	if err != nil {
		t.Fatal(err)
	}
	return w, res
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func hours(d time.Duration) float64 { return d.Hours() }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Under a 7 minute idle_timeout the second run reuses the first's runner,
// 45 s after its release: one launch. The runner then idles 7 minutes and
// terminates itself at its first check a minute past its deadline.
func TestReplayReusesRunnerWithinIdleTimeout(t *testing.T) {
	_, res := replayTwoRuns(t, 7*time.Minute)
	if res.BySource[SourceFleet] != 1 || res.BySource[SourcePool] != 1 || res.Launched != 1 {
		t.Fatalf("sources %v, launched %d: want the second run served from the pool", res.BySource, res.Launched)
	}
	if res.P50 != PoolClaim || res.P99 != ColdBoot {
		t.Errorf("time to runner p50 %s, p99 %s: want one hot claim and one cold boot", res.P50, res.P99)
	}
	// Launched at 0; released at 375 s and again at 420 + 0.48 + 300 s;
	// idle 7 min from that second (thresholds are whole seconds);
	// terminated 75 s past its deadline.
	life := seconds(720 + 420 + 75)
	if !near(res.InstanceHours, hours(life)) || !near(res.HeldHours, hours(seconds(375+PoolClaim.Seconds()+300))) || !near(res.BusyHours, hours(10*time.Minute)) {
		t.Errorf("instance %.6f h, held %.6f h, busy %.6f h; want %.6f, %.6f, %.6f", res.InstanceHours, res.HeldHours, res.BusyHours,
			hours(life), hours(seconds(375+PoolClaim.Seconds()+300)), hours(10*time.Minute))
	}
	if want := runningCost(Classes["large"], life) + volumeCost(life); !near(res.Cost, want) || !near(res.CostPer1000Jobs, want/2*1000) {
		t.Errorf("cost %v, per 1000 jobs %v; want %v, %v", res.Cost, res.CostPer1000Jobs, want, want/2*1000)
	}
	if res.TerminatedAtIdleDeadline != 1 || res.RunningAtEnd != 0 {
		t.Errorf("%d terminated at their idle deadline, %d still running; want the one", res.TerminatedAtIdleDeadline, res.RunningAtEnd)
	}
}

// Under a 30 s idle_timeout the first runner's deadline has passed when
// the second run comes: it launches, and each runner lives its run, 30 s
// and the agent's minute and 15 s.
func TestReplayLaunchesPastIdleTimeout(t *testing.T) {
	_, res := replayTwoRuns(t, 30*time.Second)
	if res.BySource[SourceFleet] != 2 || res.BySource[SourcePool] != 0 || res.Launched != 2 {
		t.Fatalf("sources %v, launched %d: want two launches", res.BySource, res.Launched)
	}
	if res.P50 != ColdBoot || res.P99 != ColdBoot {
		t.Errorf("time to runner p50 %s, p99 %s: want cold boots", res.P50, res.P99)
	}
	life := seconds(375 + 30 + 75)
	if !near(res.InstanceHours, hours(2*life)) || !near(res.IdleHours, hours(2*(30+75)*time.Second)) {
		t.Errorf("instance %.6f h, idle %.6f h; want %.6f, %.6f", res.InstanceHours, res.IdleHours, hours(2*life), hours(2*(30+75)*time.Second))
	}
	if res.TerminatedAtIdleDeadline != 2 {
		t.Errorf("%d terminated at their idle deadline, want 2", res.TerminatedAtIdleDeadline)
	}
}

// The replay's claims are the real Claimer's calls on the fakes: one
// CreateFleet per launch, the pool config read by every Create and
// Release, the claims recorded and their records gone once released, and
// the runners' lifecycle written as the protocol's transitions.
func TestReplayDrivesTheRealClaimer(t *testing.T) {
	for _, tc := range []struct {
		idle     time.Duration
		launches int
	}{{7 * time.Minute, 1}, {30 * time.Second, 2}} {
		w, _ := replayTwoRuns(t, tc.idle)
		if got := len(w.ec2.FleetInputs()); got != tc.launches {
			t.Errorf("idle %s: %d CreateFleet calls, want %d", tc.idle, got, tc.launches)
		}
		// Create and Release each read the pool config (GetItem) and write
		// the claim record; the claims complete in one transaction each.
		if got := w.db.Count("GetItem"); got < 4 {
			t.Errorf("idle %s: %d GetItem calls, want at least the 4 config reads", tc.idle, got)
		}
		if got := w.db.Count("TransactWriteItems"); got < 2 {
			t.Errorf("idle %s: %d TransactWriteItems, want a claim completed in each", tc.idle, got)
		}
		for _, id := range []string{"run-1", "run-2"} {
			if it := w.db.Get(protocol.TypeClaim, id); it != nil {
				t.Errorf("idle %s: the claim record of %s is left after its release", tc.idle, id)
			}
		}
		if got := w.ec2.TerminatedIDs(); len(got) < tc.launches {
			t.Errorf("idle %s: terminated %v, want every runner launched", tc.idle, got)
		}
	}
}

// A claim that fails stops the replay with its error: measuring on would
// hide that the policy or the fakes are wrong.
func TestReplayReportsClaimErrors(t *testing.T) {
	w := NewWorld(day, SeedsPolicy(), LatencyBySource(ColdBoot, StoppedStart))
	tr := twoRuns()
	tr.Runs[0].Jobs = slices.Repeat(tr.Runs[0].Jobs, 2)
	w.ec2.ShortBy = 1 // EC2 is short of capacity: the claim fails, all or nothing
	if _, err := w.Replay(context.Background(), tr); err == nil {
		t.Fatal("a replay whose claim failed succeeded")
	}
}

// A claim whose runners never answer waits for them on the virtual clock,
// which moves while it waits, fails once its wait is over, and stops the
// replay.
func TestReplayReportsAClaimWhoseRunnersNeverAnswer(t *testing.T) {
	latency := LatencyBySource(ColdBoot, StoppedStart)
	latency[SourceFleet] = time.Hour // longer than the claim's FleetValidationWait
	w := NewWorld(day, SeedsPolicy(), latency)
	w.db.AfterInstance = nil // nor does a claim's launch register at once
	_, err := w.Replay(context.Background(), twoRuns())
	if err == nil || !strings.Contains(err.Error(), "claim of 1 large runner(s) for run run-1") {
		t.Fatalf("Replay = %v, want the first claim failed", err)
	}
	if at := w.clock.Now(); at.Sub(day) < claim.DefaultTimings().FleetValidationWait {
		t.Errorf("the claim failed at %s, before its wait of %s was over", at, claim.DefaultTimings().FleetValidationWait)
	}
}

// An event that waits for what nothing left will do (no event is due, no
// wait on the clock) is reported stuck, not left to hang the replay.
func TestReplayReportsADeadlock(t *testing.T) {
	w := NewWorld(day, SeedsPolicy(), LatencyBySource(ColdBoot, StoppedStart))
	w.At(day, "wait for nothing", func(ctx context.Context) error {
		<-ctx.Done() // the replay's end unwinds it
		return nil
	})
	err := w.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("Run = %v, want the event reported stuck", err)
	}
}

// A whole weekday replays through the real code under two policies: every
// job gets a runner, every instance ends, the hours add up, and a longer
// idle_timeout launches fewer runners and costs more.
func TestReplayWeekday(t *testing.T) {
	tr := Generate(Weekday(), Seed)
	var results []Result
	for _, p := range []Policy{SeedsPolicy(), HotPolicy(time.Hour)} {
		r, err := Replay(context.Background(), tr, p, LatencyBySource(ColdBoot, StoppedStart))
		if err != nil {
			t.Fatal(err)
		}
		if r.Jobs != tr.Jobs() || r.BySource[SourcePool]+r.BySource[SourceFleet] != r.Jobs || r.RunningAtEnd != 0 {
			t.Errorf("%s: %d jobs of %d, sources %v, %d instances still running", p.Name, r.Jobs, tr.Jobs(), r.BySource, r.RunningAtEnd)
		}
		if r.Launched != r.BySource[SourceFleet] || r.BusyHours > r.HeldHours || r.HeldHours > r.InstanceHours || !near(r.IdleHours, r.InstanceHours-r.HeldHours) {
			t.Errorf("%s: launched %d for %d fleet runners; busy %.1f, held %.1f, idle %.1f of %.1f hours", p.Name, r.Launched, r.BySource[SourceFleet], r.BusyHours, r.HeldHours, r.IdleHours, r.InstanceHours)
		}
		results = append(results, r)
	}
	if seeds, hour := results[0], results[1]; hour.Launched >= seeds.Launched || hour.Cost <= seeds.Cost {
		t.Errorf("idle 1h launched %d and cost $%.2f, the seeds' %d and $%.2f: want fewer launches at a higher cost", hour.Launched, hour.Cost, seeds.Launched, seeds.Cost)
	}
}
