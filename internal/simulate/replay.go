package simulate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Replay runs a trace through the pool under policy, a job's time to
// runner being latency by its runner's source (LatencyBySource), and
// measures it.
func Replay(ctx context.Context, tr Trace, policy Policy, latency map[string]time.Duration) (Result, error) {
	if len(tr.Runs) == 0 {
		return Result{}, fmt.Errorf("trace %s has no runs", tr.Name)
	}
	return NewWorld(tr.Runs[0].At, policy, latency).Replay(ctx, tr)
}

// Replay runs a trace in the world, from its current time on.
func (w *World) Replay(ctx context.Context, tr Trace) (Result, error) {
	for i, run := range tr.Runs {
		if _, ok := Classes[run.Class]; !ok {
			return Result{}, fmt.Errorf("trace %s, run %d: unknown resource class %q", tr.Name, i+1, run.Class)
		}
		runID := fmt.Sprintf("run-%d", i+1)
		w.At(run.At, func(ctx context.Context) error { return w.start(ctx, runID, run) })
	}
	if err := w.Run(ctx); err != nil {
		return Result{}, fmt.Errorf("replaying %s under %q: %w", tr.Name, w.policy.Name, err)
	}
	return w.result(tr.Name), nil
}

// start claims the runners of a run, as its `terraform apply` would, and
// schedules the release for when its last job ends. Its jobs take the
// runners in the order the claim lists them, warm ones first.
func (w *World) start(ctx context.Context, runID string, run Run) error {
	res, err := w.claimer.Create(ctx, claim.Request{
		Pool: poolName, RunID: runID, InstanceCount: len(run.Jobs), ResourceClass: run.Class,
		UsageClass: protocol.UsageOnDemand, AllowedTypes: []string{"c6i.*"}, FleetFallback: true,
		Timings: claim.DefaultTimings(),
	})
	if err != nil {
		return err
	}
	end := run.At
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, inst := range res.Instances {
		wait, ok := w.latency[inst.Source]
		if !ok {
			return fmt.Errorf("run %s: no latency for runners from %q", runID, inst.Source)
		}
		w.jobs = append(w.jobs, jobStat{wait: wait, source: inst.Source})
		w.instances[inst.ID].busy += run.Jobs[k]
		end = later(end, run.At.Add(wait+run.Jobs[k]))
	}
	if end.Sub(run.At) > maxRuntime {
		return fmt.Errorf("run %s lasts %s, longer than the simulated pool's max_runtime (%s)", runID, end.Sub(run.At), maxRuntime)
	}
	for _, inst := range res.Instances {
		w.instances[inst.ID].held += end.Sub(run.At)
	}
	w.events.push(event{at: end, do: func(ctx context.Context) error {
		_, err := w.claimer.Release(ctx, poolName, runID)
		return err
	}})
	return nil
}

// Result is what a replay measured.
type Result struct {
	Trace, Policy string
	Jobs          int
	// P50, P95 and P99 of the jobs' time to runner.
	P50, P95, P99 time.Duration
	// BySource counts the runners handed out, by source.
	BySource map[string]int
	// Launched instances; InstanceHours they ran (all paid), BusyHours
	// of that running jobs, HeldHours held by runs (running jobs, booting,
	// waiting for the run's other jobs), IdleHours idle in the pool (the
	// rest: what idle_timeout buys, up to the self-termination).
	Launched                                  int
	InstanceHours, BusyHours, HeldHours       float64
	IdleHours, Cost, CostPer1000Jobs          float64
	TerminatedAtIdleDeadline, StillRunningEnd int
}

// Share is the fraction of runners from source.
func (r Result) Share(source string) float64 {
	total := 0
	for _, n := range r.BySource {
		total += n
	}
	if total == 0 {
		return 0
	}
	return float64(r.BySource[source]) / float64(total)
}

func (w *World) result(trace string) Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := Result{Trace: trace, Policy: w.policy.Name, Jobs: len(w.jobs), BySource: map[string]int{}, Launched: len(w.instances)}
	waits := make([]time.Duration, len(w.jobs))
	for i, j := range w.jobs {
		waits[i] = j.wait
		r.BySource[j.source]++
	}
	slices.Sort(waits)
	r.P50, r.P95, r.P99 = percentile(waits, 50), percentile(waits, 95), percentile(waits, 99)
	for _, life := range w.instances {
		end := life.ended
		if end.IsZero() { // cannot happen once every event ran; counted, not hidden
			r.StillRunningEnd++
			end = w.clock.Now()
		}
		if life.terminatedByIdle {
			r.TerminatedAtIdleDeadline++
		}
		ran := end.Sub(life.launched)
		r.InstanceHours += ran.Hours()
		r.BusyHours += life.busy.Hours()
		r.HeldHours += life.held.Hours()
		r.Cost += instanceCost(Classes[life.class], ran)
	}
	r.IdleHours = r.InstanceHours - r.HeldHours
	if r.Jobs > 0 {
		r.CostPer1000Jobs = r.Cost / float64(r.Jobs) * 1000
	}
	return r
}

// percentile is the nearest-rank p-th percentile of sorted values.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}
