package simulate

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// oneRun is a trace of one large run at at, of jobs.
func oneRun(at time.Time, jobs ...time.Duration) Trace {
	return Trace{Name: "one", Runs: []Run{{At: at, Class: "large", Jobs: jobs}}}
}

// lives are the world's instances in the order they were launched.
func lives(w *World) []*instanceLife {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*instanceLife
	for _, l := range w.instances {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *instanceLife) int { return a.launched.Compare(b.launched) })
	return out
}

func replayIn(t *testing.T, w *World, tr Trace) Result {
	t.Helper()
	res, err := w.Replay(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func at(d time.Duration) time.Time { return day.Add(d) }

// A stopped target of one large runner, filled by the pool's apply at
// 08:00: the runner boots for ColdBoot, then stops (its agent, prepared).
// A run at 08:10 starts it: its job waits StoppedStart, the claim waits for
// its registration on the clock, and its top-up launches a second stopped
// runner at 08:10:15, when the claim ends. Released at 08:15:15 (15 s and
// a 5 minute job), the first runner finds the tier full: idle for a minute,
// it terminates itself 75 s after (08:17:30). The second stays stopped to
// the end of the day. Stopped, each pays its volume only.
func TestReplayServesARunFromTheStoppedTier(t *testing.T) {
	policy := Policy{Name: "stopped 1", IdleTimeout: time.Minute, Warm: map[string]protocol.WarmTarget{"large": {Stopped: 1}}, FillAtStart: true}
	w := NewWorld(day, policy, LatencyBySource(ColdBoot, StoppedStart))
	res := replayIn(t, w, oneRun(at(10*time.Minute), 5*time.Minute))
	if res.BySource[SourceStopped] != 1 || res.P50 != StoppedStart {
		t.Fatalf("sources %v, time to runner %s; want one stopped start of %s", res.BySource, res.P50, StoppedStart)
	}
	l := lives(w)
	if len(l) != 2 {
		t.Fatalf("%d instances launched, want the fill's and the top-up's", len(l))
	}
	first, second := l[0], l[1]
	midnight := day.Truncate(24 * time.Hour).Add(24 * time.Hour)
	want := []struct {
		name                     string
		life                     *instanceLife
		launched, ended          time.Time
		runs                     []time.Duration
		stopped                  time.Duration
		terminatedByIdle, atIdle bool
	}{
		{"the fill's", first, at(0), at(17*time.Minute + 30*time.Second), []time.Duration{ColdBoot, 7*time.Minute + 30*time.Second}, 10*time.Minute - ColdBoot, true, true},
		{"the top-up's", second, at(10*time.Minute + StoppedStart), midnight, []time.Duration{ColdBoot}, midnight.Sub(at(10*time.Minute + StoppedStart + ColdBoot)), false, false},
	}
	for _, c := range want {
		l := c.life
		if !l.launched.Equal(c.launched) || !l.ended.Equal(c.ended) || !slices.Equal(l.runs, c.runs) || l.stopped != c.stopped || l.terminatedByIdle != c.terminatedByIdle {
			t.Errorf("%s: launched %s, ended %s, ran %v, stopped %s, terminated at its idle deadline %v; want %s, %s, %v, %s, %v",
				c.name, l.launched, l.ended, l.runs, l.stopped, l.terminatedByIdle, c.launched, c.ended, c.runs, c.stopped, c.terminatedByIdle)
		}
		paid := volumeCost(c.ended.Sub(c.launched))
		for _, r := range c.runs {
			paid += runningCost(Classes["large"], r)
		}
		if !near(l.cost(), paid) {
			t.Errorf("%s cost $%.6f, want $%.6f: its running spans on demand, its volume for its life", c.name, l.cost(), paid)
		}
	}
	stopped := first.stopped + second.stopped
	if !near(res.StoppedHours, stopped.Hours()) || res.StoppedAtEnd != 1 || res.RunningAtEnd != 0 {
		t.Errorf("stopped %.4f h, %d stopped and %d running at the end; want %.4f h, 1, 0", res.StoppedHours, res.StoppedAtEnd, res.RunningAtEnd, stopped.Hours())
	}
	if !near(res.HeldHours, (StoppedStart + 5*time.Minute).Hours()) {
		t.Errorf("held %.4f h, want the start and the job", res.HeldHours)
	}
}

// A stopped runner whose stopped time is over is ended by the reaper of the
// next claim: a window's stopped target (08:00 to 09:00) keeps the fill's
// runner stopped until 09:00; the run at 09:10 finds none to start, launches
// one, and its claim's reap terminates the stopped runner then.
func TestReplayEndsAStoppedRunnerPastItsStoppedTime(t *testing.T) {
	window := protocol.WarmWindow{Days: []string{"mon"}, From: "08:00", To: "09:00", TimeZone: "UTC", Stopped: protocol.Count(1)}
	policy := Policy{Name: "stopped 1 08-09", IdleTimeout: time.Minute, FillAtStart: true,
		Warm: map[string]protocol.WarmTarget{"large": {Schedule: []protocol.WarmWindow{window}}}}
	w := NewWorld(day, policy, LatencyBySource(ColdBoot, StoppedStart))
	res := replayIn(t, w, oneRun(at(70*time.Minute), 5*time.Minute))
	if res.BySource[SourceFleet] != 1 {
		t.Errorf("sources %v, want a launch: the stopped runner's time is over", res.BySource)
	}
	stopped := lives(w)[0]
	if !stopped.ended.Equal(at(70*time.Minute)) || stopped.terminatedByIdle || stopped.stopped != 70*time.Minute-ColdBoot {
		t.Errorf("the stopped runner ended at %s (by its agent: %v), stopped %s; want the claim's reap at %s, stopped %s",
			stopped.ended, stopped.terminatedByIdle, stopped.stopped, at(70*time.Minute), 70*time.Minute-ColdBoot)
	}
}

// A scheduled fill at the window's opening launches its hot target then,
// which serves the first run in the window from the pool once booted.
func TestReplayFillsAWindowAsItOpens(t *testing.T) {
	window := protocol.WarmWindow{Days: []string{"mon"}, From: "08:00", To: "19:00", TimeZone: "UTC", Hot: protocol.Count(2)}
	policy := Policy{Name: "hot 2 08-19", IdleTimeout: time.Minute, FillAtWindows: true,
		Warm: map[string]protocol.WarmTarget{"large": {Schedule: []protocol.WarmWindow{window}}}}
	w := NewWorld(at(-time.Hour), policy, LatencyBySource(ColdBoot, StoppedStart))
	res := replayIn(t, w, oneRun(at(30*time.Minute), 5*time.Minute, 5*time.Minute))
	if res.BySource[SourcePool] != 2 || res.Launched != 2 || len(w.ec2.FleetInputs()) != 1 {
		t.Errorf("sources %v, %d launched by %d fleets; want the fill's two from the pool", res.BySource, res.Launched, len(w.ec2.FleetInputs()))
	}
	for _, l := range lives(w) {
		if !l.launched.Equal(day) {
			t.Errorf("a runner launched at %s, want the window's opening, %s", l.launched, day)
		}
	}
	if res.InWindowJobs != 2 || res.InWindowP95 != PoolClaim {
		t.Errorf("%d jobs in the window, p95 %s; want 2, a hot claim", res.InWindowJobs, res.InWindowP95)
	}
}

// The openings of the guide's office hours in a week are the weekdays'
// 08:00.
func TestWindowOpenings(t *testing.T) {
	monday := day.Truncate(24 * time.Hour)
	got := WarmPolicy(time.Minute, PerClass{1, 1}, Window{When: OfficeHours, Hot: PerClass{1, 1}}).windowOpenings(monday, monday.AddDate(0, 0, 7))
	var want []time.Time
	for d := range 5 {
		want = append(want, monday.AddDate(0, 0, d).Add(8*time.Hour))
	}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("openings %v, want %v", got, want)
	}
}

// A replay is deterministic: the same trace under the same policy measures
// the same, however the goroutines of its claims were scheduled.
func TestReplayIsDeterministic(t *testing.T) {
	tr := Generate(Weekday(), Seed)
	policy := WarmPolicy(2*time.Minute, PerClass{16, 4}, Window{When: OfficeHours, Hot: PerClass{8, 2}})
	var results []Result
	for range 2 {
		r, err := Replay(context.Background(), tr, policy, LatencyBySource(ColdBoot, StoppedStart))
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	if !reflect.DeepEqual(results[0], results[1]) {
		t.Errorf("two replays differ:\n%+v\n%+v", results[0], results[1])
	}
}
