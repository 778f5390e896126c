package simulate

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestGenerateIsDeterministic(t *testing.T) {
	for _, p := range Profiles() {
		a, b := Generate(p, Seed), Generate(p, Seed)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two traces from seed %d differ", p.Name, Seed)
		}
		if c := Generate(p, Seed+1); reflect.DeepEqual(a, c) {
			t.Errorf("%s: seeds %d and %d give the same trace", p.Name, Seed, Seed+1)
		}
	}
}

// The traces follow their documented parameters, within what chance
// allows: the number of runs (Poisson: mean and variance the sum of the
// hourly rates, plus the bursts), the jobs per run by weight, the median
// job duration, the share of xlarge runs, and the arrivals by hour.
func TestGenerateFollowsItsProfile(t *testing.T) {
	for _, p := range Profiles() {
		var tr Trace
		var runs, jobs, xlarge int
		var durations []time.Duration
		perRun := map[int]int{}
		perHour := [24]int{}
		const seeds = 20 // pooled, so that the weekend's 25 runs a day say something
		for seed := range uint64(seeds) {
			tr = Generate(p, seed)
			for _, r := range tr.Runs {
				runs++
				jobs += len(r.Jobs)
				perRun[len(r.Jobs)]++
				perHour[r.At.Sub(p.Day)/time.Hour]++
				if r.Class == "xlarge" {
					xlarge++
				}
				durations = append(durations, r.Jobs...)
				if !slices.ContainsFunc(p.JobsPerRun, func(w Weighted) bool { return w.N == len(r.Jobs) }) {
					t.Fatalf("%s: a run of %d jobs, not one of %v", p.Name, len(r.Jobs), p.JobsPerRun)
				}
				for _, d := range r.Jobs {
					if d < p.JobMin || d > p.JobMax {
						t.Fatalf("%s: a job of %s, outside [%s, %s]", p.Name, d, p.JobMin, p.JobMax)
					}
				}
			}
			if !slices.IsSortedFunc(tr.Runs, func(a, b Run) int { return a.At.Compare(b.At) }) {
				t.Errorf("%s: runs not in order", p.Name)
			}
		}
		mean := 0.0
		for _, r := range p.RunsPerHour {
			mean += r
		}
		bursts := 0
		for _, b := range p.Bursts {
			bursts += b.Runs
		}
		mean = mean*seeds + float64(bursts*seeds)
		within(t, p.Name+" runs", float64(runs), mean, 4*math.Sqrt(mean))
		total := 0.0
		for _, w := range p.JobsPerRun {
			total += w.Weight
		}
		for _, w := range p.JobsPerRun {
			share := w.Weight / total
			within(t, p.Name+" runs of "+strconv.Itoa(w.N)+" jobs", float64(perRun[w.N]), share*float64(runs), 4*math.Sqrt(share*(1-share)*float64(runs)))
		}
		within(t, p.Name+" xlarge runs", float64(xlarge), p.XLargeShare*float64(runs), 4*math.Sqrt(p.XLargeShare*(1-p.XLargeShare)*float64(runs)))
		slices.Sort(durations)
		median := durations[len(durations)/2]
		within(t, p.Name+" median job (s)", median.Seconds(), p.JobMedian.Seconds(), 0.1*p.JobMedian.Seconds())
		for h, rate := range p.RunsPerHour {
			expected := rate * seeds
			for _, b := range p.Bursts {
				if b.At/time.Hour == time.Duration(h) {
					expected += float64(b.Runs * seeds)
				}
			}
			within(t, p.Name+" runs at "+strconv.Itoa(h)+"h", float64(perHour[h]), expected, 4*math.Sqrt(expected)+1)
		}
	}
}

func within(t *testing.T, what string, got, want, tolerance float64) {
	t.Helper()
	if math.Abs(got-want) > tolerance {
		t.Errorf("%s: %.1f, want %.1f ± %.1f", what, got, want, tolerance)
	}
}

func TestTraceFileRoundTrip(t *testing.T) {
	tr := Generate(Weekend(), Seed)
	var buf bytes.Buffer
	if err := tr.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTrace(tr.Name, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, tr) {
		t.Errorf("read back a different trace:\n%v\nwant\n%v", back, tr)
	}
}

func TestReadTraceRejectsBadRuns(t *testing.T) {
	for _, line := range []string{
		`{"at":"2026-06-01T08:00:00Z","class":"large"}`,
		`{"class":"large","job_seconds":[60]}`,
		`{"at":"2026-06-01T08:00:00Z","job_seconds":[60]}`,
		`{"at":"2026-06-01T08:00:00Z","class":"large","job_seconds":[0]}`,
		`not json`,
	} {
		if _, err := ReadTrace("bad", strings.NewReader(line+"\n")); err == nil || !strings.Contains(err.Error(), "bad line 1") {
			t.Errorf("%s: error %v, want one naming the line", line, err)
		}
	}
	tr, err := ReadTrace("ok", strings.NewReader("\n"+`{"at":"2026-06-01T09:00:00+02:00","class":"xlarge","job_seconds":[90.5, 30]}`+"\n"))
	if err != nil || len(tr.Runs) != 1 || tr.Runs[0].Jobs[0] != 90500*time.Millisecond || tr.Runs[0].At.Hour() != 9 {
		t.Errorf("ReadTrace = %+v, %v", tr, err)
	}
}
