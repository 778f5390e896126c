package simulate

import (
	"context"
	"fmt"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Replay runs a trace through the pool under policy, a job's time to
// runner being latency by its runner's source (LatencyBySource), and
// measures it. The pool starts empty at midnight (UTC) of the trace's
// first day.
func Replay(ctx context.Context, tr Trace, policy Policy, latency map[string]time.Duration) (Result, error) {
	if len(tr.Runs) == 0 {
		return Result{}, fmt.Errorf("trace %s has no runs", tr.Name)
	}
	return NewWorld(tr.Runs[0].At.UTC().Truncate(24*time.Hour), policy, latency).Replay(ctx, tr)
}

// Replay runs a trace in the world, from its current time to the end of
// the trace's last day, with the policy's fills: the pool apply's now,
// and a scheduled fill at each opening of a window of its schedules.
func (w *World) Replay(ctx context.Context, tr Trace) (Result, error) {
	if len(tr.Runs) == 0 {
		return Result{}, fmt.Errorf("trace %s has no runs", tr.Name)
	}
	end := tr.Runs[len(tr.Runs)-1].At.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	if w.policy.FillAtStart {
		w.At(w.clock.Now(), "fill by the apply", w.fill)
	}
	if w.policy.FillAtWindows {
		for _, at := range w.policy.windowOpenings(w.clock.Now(), end) {
			w.At(at, "fill as a window opens", w.fill)
		}
	}
	for i, run := range tr.Runs {
		if _, ok := Classes[run.Class]; !ok {
			return Result{}, fmt.Errorf("trace %s, run %d: unknown resource class %q", tr.Name, i+1, run.Class)
		}
		runID := fmt.Sprintf("run-%d", i+1)
		w.At(run.At, "start "+runID, func(ctx context.Context) error { return w.start(ctx, runID, run) })
	}
	if err := w.Run(ctx); err != nil {
		return Result{}, fmt.Errorf("replaying %s under %q: %w", tr.Name, w.policy.Name, err)
	}
	return w.result(tr.Name, end), nil
}

// fill fills the pool's warm targets in force now, as the pool's apply and
// a scheduled ec2runners_warm action do.
func (w *World) fill(ctx context.Context) error {
	_, err := maintenance.Warm(ctx, w.claimer, poolName, maintenance.WarmOptions{Timings: claim.DefaultTimings()})
	return err
}

// start claims the runners of a run, as its `terraform apply` would, and
// schedules the release for when its last job ends. Its jobs take the
// runners in the order the claim lists them, warm ones first.
func (w *World) start(ctx context.Context, runID string, run Run) error {
	maintained := maintenance.Alongside(ctx, w.claimer, poolName)
	res, err := w.claimer.Create(ctx, claim.Request{
		Pool: poolName, RunID: runID, InstanceCount: len(run.Jobs), ResourceClass: run.Class,
		UsageClass: protocol.UsageOnDemand, AllowedTypes: []string{"c6i.*"}, FleetFallback: true,
		Timings: claim.DefaultTimings(),
	})
	maintained()
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
		w.jobs = append(w.jobs, jobStat{wait: wait, source: inst.Source, runAt: run.At, class: run.Class})
		w.instances[inst.ID].busy += run.Jobs[k]
		end = later(end, run.At.Add(wait+run.Jobs[k]))
	}
	if end.Sub(run.At) > maxRuntime {
		return fmt.Errorf("run %s lasts %s, longer than the simulated pool's max_runtime (%s)", runID, end.Sub(run.At), maxRuntime)
	}
	for _, inst := range res.Instances {
		w.instances[inst.ID].held += end.Sub(run.At)
	}
	w.events.push(event{at: end, key: "release " + runID, do: func(ctx context.Context) error {
		maintained := maintenance.Alongside(ctx, w.claimer, poolName)
		_, err := w.claimer.Release(ctx, poolName, runID)
		maintained()
		return err
	}})
	return nil
}
