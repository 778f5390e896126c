package simulate

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Profile describes the traffic of one day, from which Generate draws a
// trace. Arrivals are a Poisson process whose rate changes by the hour,
// plus bursts; each run draws its number of jobs, its class, and each
// job's duration (log-normal: CI job times are skewed, a few long jobs
// and many short ones).
type Profile struct {
	Name string
	Day  time.Time // midnight of the day the trace covers
	// RunsPerHour is the arrival rate in each hour of the day.
	RunsPerHour [24]float64
	// Bursts start many runs at once (a nightly batch, a merge train).
	Bursts []Burst
	// JobsPerRun is drawn by weight.
	JobsPerRun []Weighted
	// JobMedian and JobSpread (the log-normal's sigma) draw job
	// durations, clamped to [JobMin, JobMax].
	JobMedian, JobMin, JobMax time.Duration
	JobSpread                 float64
	// XLargeShare of the runs use the xlarge class, the others large.
	XLargeShare float64
}

// Burst starts Runs runs at times spread uniformly over Within from At
// (an offset from midnight).
type Burst struct {
	At     time.Duration
	Runs   int
	Within time.Duration
}

// Weighted is a value drawn with probability Weight / (sum of weights).
type Weighted struct {
	N      int
	Weight float64
}

// Seed is the fixed seed of the guide's traces.
const Seed = 13

// Weekday: a team's working day (one time zone): quiet nights, a morning
// ramp, a lunch dip, busy afternoons; most runs are one to three jobs of a
// few minutes, some are matrices. About 260 runs and 700 jobs.
func Weekday() Profile {
	return Profile{
		Name: "weekday",
		Day:  time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), // a Monday
		RunsPerHour: [24]float64{
			0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 4, // 00-07
			12, 24, 30, 28, 14, 22, 30, 30, // 08-15
			26, 16, 8, 4, 1.5, 1.5, 1.5, 1.5, // 16-23
		},
		JobsPerRun: []Weighted{{1, 45}, {2, 20}, {3, 15}, {5, 12}, {10, 8}},
		JobMedian:  6 * time.Minute, JobSpread: 0.7, JobMin: time.Minute, JobMax: 45 * time.Minute,
		XLargeShare: 0.2,
	}
}

// NightlyBatch: a quiet day whose scheduled workflows (nightly builds,
// long test matrices) all start at 02:00 within five minutes. About 50
// runs and 400 jobs.
func NightlyBatch() Profile {
	p := Profile{
		Name:       "nightly",
		Day:        time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC),
		Bursts:     []Burst{{At: 2 * time.Hour, Runs: 40, Within: 5 * time.Minute}},
		JobsPerRun: []Weighted{{4, 30}, {8, 40}, {16, 30}},
		JobMedian:  15 * time.Minute, JobSpread: 0.5, JobMin: 2 * time.Minute, JobMax: 45 * time.Minute,
		XLargeShare: 0.3,
	}
	for h := range p.RunsPerHour {
		p.RunsPerHour[h] = 0.4
	}
	return p
}

// Weekend: a few runs an hour in the daytime, fewer at night. About 25
// runs and 40 jobs.
func Weekend() Profile {
	p := Profile{
		Name:       "weekend",
		Day:        time.Date(2026, 6, 6, 0, 0, 0, 0, time.UTC), // a Saturday
		JobsPerRun: []Weighted{{1, 60}, {2, 30}, {4, 10}},
		JobMedian:  5 * time.Minute, JobSpread: 0.7, JobMin: time.Minute, JobMax: 45 * time.Minute,
		XLargeShare: 0.1,
	}
	for h := range p.RunsPerHour {
		p.RunsPerHour[h] = 0.3
		if h >= 9 && h < 21 {
			p.RunsPerHour[h] = 1.5
		}
	}
	return p
}

// Profiles are the guide's three traces.
func Profiles() []Profile { return []Profile{Weekday(), NightlyBatch(), Weekend()} }

// Generate draws a trace from p; the same seed gives the same trace.
func Generate(p Profile, seed uint64) Trace {
	rng := rand.New(rand.NewPCG(seed, uint64(len(p.Name))))
	var starts []time.Time
	for h, rate := range p.RunsPerHour {
		if rate <= 0 {
			continue
		}
		// Exponential gaps at this hour's rate, restarted every hour.
		hourStart := p.Day.Add(time.Duration(h) * time.Hour)
		for t := rng.ExpFloat64() / rate; t < 1; t += rng.ExpFloat64() / rate {
			starts = append(starts, hourStart.Add(time.Duration(t*float64(time.Hour))).Truncate(time.Second))
		}
	}
	for _, b := range p.Bursts {
		for range b.Runs {
			starts = append(starts, p.Day.Add(b.At+time.Duration(rng.Float64()*float64(b.Within))).Truncate(time.Second))
		}
	}
	slices.SortFunc(starts, time.Time.Compare)
	t := Trace{Name: p.Name}
	for _, at := range starts {
		run := Run{At: at, Class: "large"}
		if rng.Float64() < p.XLargeShare {
			run.Class = "xlarge"
		}
		for range pick(rng, p.JobsPerRun) {
			run.Jobs = append(run.Jobs, p.jobDuration(rng))
		}
		t.Runs = append(t.Runs, run)
	}
	return t
}

func (p Profile) jobDuration(rng *rand.Rand) time.Duration {
	d := time.Duration(float64(p.JobMedian) * math.Exp(p.JobSpread*rng.NormFloat64()))
	return min(max(d, p.JobMin), p.JobMax).Truncate(time.Second)
}

func pick(rng *rand.Rand, ws []Weighted) int {
	total := 0.0
	for _, w := range ws {
		total += w.Weight
	}
	x := rng.Float64() * total
	for _, w := range ws {
		if x < w.Weight {
			return w.N
		}
		x -= w.Weight
	}
	return ws[len(ws)-1].N
}
