package simulate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// Run is one workflow run of a trace: when it starts (its claim is made),
// the resource class of its runners, and how long each of its jobs runs
// once it has a runner. A run holds its runners until its last job ends.
type Run struct {
	At    time.Time
	Class string
	Jobs  []time.Duration
}

// Trace is a day (or any span) of workflow runs, in the order they start.
type Trace struct {
	Name string
	Runs []Run
}

// Jobs is the number of jobs in the trace.
func (t Trace) Jobs() int {
	n := 0
	for _, r := range t.Runs {
		n += len(r.Jobs)
	}
	return n
}

// runLine is one line of a trace file: a JSON object per run,
//
//	{"at":"2026-06-01T08:03:12Z","class":"large","job_seconds":[310,295]}
//
// at is RFC 3339 (with the zone the schedules will be read in), class a
// resource class of the pool, job_seconds each job's run time in seconds.
type runLine struct {
	At         time.Time `json:"at"`
	Class      string    `json:"class"`
	JobSeconds []float64 `json:"job_seconds"`
}

// ReadTrace reads a trace file (JSON lines, one run per line; blank lines
// are skipped) and sorts its runs by start.
func ReadTrace(name string, r io.Reader) (Trace, error) {
	t := Trace{Name: name}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l runLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return Trace{}, fmt.Errorf("%s line %d: %w", name, line, err)
		}
		if l.At.IsZero() || l.Class == "" || len(l.JobSeconds) == 0 {
			return Trace{}, fmt.Errorf("%s line %d: a run needs at, class and at least one of job_seconds", name, line)
		}
		run := Run{At: l.At, Class: l.Class}
		for _, s := range l.JobSeconds {
			if s <= 0 {
				return Trace{}, fmt.Errorf("%s line %d: job_seconds must be positive, got %v", name, line, s)
			}
			run.Jobs = append(run.Jobs, time.Duration(s*float64(time.Second)))
		}
		t.Runs = append(t.Runs, run)
	}
	if err := sc.Err(); err != nil {
		return Trace{}, fmt.Errorf("%s: %w", name, err)
	}
	slices.SortStableFunc(t.Runs, func(a, b Run) int { return a.At.Compare(b.At) })
	return t, nil
}

// Write writes the trace in the format ReadTrace reads.
func (t Trace) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, r := range t.Runs {
		l := runLine{At: r.At, Class: r.Class}
		for _, j := range r.Jobs {
			l.JobSeconds = append(l.JobSeconds, j.Seconds())
		}
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return nil
}
