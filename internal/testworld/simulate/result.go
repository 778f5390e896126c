package simulate

import (
	"maps"
	"slices"
	"time"
)

// Result is what a replay measured.
type Result struct {
	Trace, Policy string
	Jobs          int
	// P50, P95 and P99 of the jobs' time to runner.
	P50, P95, P99 time.Duration
	// InWindowJobs are the jobs whose run started inside a window of its
	// class's schedule, and InWindowP95 their p95 (none: the policy has no
	// schedule, or no run started in it).
	InWindowJobs int
	InWindowP95  time.Duration
	// BySource counts the runners handed out, by source.
	BySource map[string]int
	// Launched instances. InstanceHours they ran (paid on demand), of
	// which HeldHours held by runs (running jobs, booting, waiting for the
	// run's other jobs), BusyHours of that running jobs, and IdleHours the
	// rest: hot in the pool (what idle_timeout and hot targets buy, up to
	// the stop or the self-termination), or booting for a fill.
	// StoppedHours they were stopped (their volume only is paid).
	Launched                            int
	InstanceHours, BusyHours, HeldHours float64
	IdleHours, StoppedHours             float64
	Cost, CostPer1000Jobs               float64
	TerminatedAtIdleDeadline            int
	// StoppedAtEnd are the stopped runners the replay leaves in the pool
	// (a stopped target carries them to the next day), metered to its end.
	// RunningAtEnd cannot happen once every event ran; counted, not
	// hidden.
	StoppedAtEnd, RunningAtEnd int
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

// result measures the replay, whose instances still alive are metered to
// end (the end of the trace's last day), or to now if later.
func (w *World) result(trace string, end time.Time) Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := Result{Trace: trace, Policy: w.policy.Name, Jobs: len(w.jobs), BySource: map[string]int{}, Launched: len(w.instances)}
	var waits, inWindow []time.Duration
	for _, j := range w.jobs {
		waits = append(waits, j.wait)
		r.BySource[j.source]++
		if w.policy.inWindow(j.class, j.runAt) {
			inWindow = append(inWindow, j.wait)
		}
	}
	slices.Sort(waits)
	slices.Sort(inWindow)
	r.P50, r.P95, r.P99 = percentile(waits, 50), percentile(waits, 95), percentile(waits, 99)
	r.InWindowJobs, r.InWindowP95 = len(inWindow), percentile(inWindow, 95)
	end = later(end, w.clock.Now())
	for _, id := range slices.Sorted(maps.Keys(w.instances)) { // sums in one order: the same replay, the same floats
		life := w.instances[id]
		if life.ended.IsZero() {
			if life.runningSince.IsZero() {
				r.StoppedAtEnd++
			} else {
				r.RunningAtEnd++
			}
			life.end(end)
		}
		if life.terminatedByIdle {
			r.TerminatedAtIdleDeadline++
		}
		r.InstanceHours += life.running().Hours()
		r.StoppedHours += life.stopped.Hours()
		r.BusyHours += life.busy.Hours()
		r.HeldHours += life.held.Hours()
		r.Cost += life.cost()
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
