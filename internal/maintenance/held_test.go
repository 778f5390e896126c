package maintenance

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

// setDeadline moves runner's deadline (its record's threshold) to at.
func (e *env) setDeadline(runner string, at time.Time) {
	e.T.Helper()
	e.DB.SetInstance(e.T, runner, func(i *protocol.Instance) { i.Threshold = protocol.FormatTime(at) })
}

// assertDeadline checks that runner's deadline is at.
func (e *env) assertDeadline(t *testing.T, runner string, at time.Time) {
	t.Helper()
	if got := e.DB.Instance(t, runner).Threshold; got != protocol.FormatTime(at) {
		t.Errorf("%s's deadline is %s, want %s", runner, got, protocol.FormatTime(at))
	}
}

// A claim near its deadline, its attempt going on with a job on one of its
// runners, holds all its runners heldRunExtension longer, however young
// the claim: at its old deadline (its max_runtime) the next reap leaves
// them running for the run.
func TestReapHoldsTheRunnersOfAJobStillRunning(t *testing.T) {
	t.Parallel()
	e, gh, runs := runsEnv(t, "")
	gh.StartRunAttempt("octo/app", 7, 1)
	e.SeedIdle("i-2", poolworld.Healthy)
	e.claimForRun("run-7-1", "i-1", 7, func(r *claim.Request) { r.InstanceCount = 2 })
	young := e.DB.Get(protocol.TypeClaim, "run-7-1")
	young[protocol.AttrUpdatedAt] = strAttr(protocol.FormatTime(time.Now()))
	e.DB.Put(young)
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	e.setDeadline("i-1", deadline)
	e.setDeadline("i-2", deadline)
	gh.StartJob("octo/app", 7, 1, "i-2", start.Add(-20*time.Minute))
	if res := e.reap(); !slices.Equal(res.HeldRuns, []string{"run-7-1"}) || len(res.EndedRuns) != 0 {
		t.Errorf("held %v and released %v, want run-7-1 held", res.HeldRuns, res.EndedRuns)
	}
	for _, id := range []string{"i-1", "i-2"} {
		poolworld.During(start, heldRunExtension).Check(t, id+"'s deadline", e.DB.Instance(t, id).Threshold)
	}
	if want := []string{"attempt 1 of workflow run 7 of octo/app"}; !slices.Equal(runs.jobs, want) {
		t.Errorf("listed the jobs of %q, want %q", runs.jobs, want)
	}
	e.c.Now = func() time.Time { return deadline.Add(2 * time.Minute) }
	if res := e.reap(); len(res.Expired) != 0 {
		t.Errorf("the reap past the old deadline expired %v", res.Expired)
	}
	e.assertHeld(t, "run-7-1", "i-1")
	e.assertHeld(t, "run-7-1", "i-2")
}

// Only a job in progress on a claim's own runner holds it: a claim whose
// job ended, or whose job runs on another runner, keeps its deadline; a
// claim whose deadline is far is not asked about its jobs.
func TestReapHoldsOnlyTheRunnersOfAJobStillRunning(t *testing.T) {
	t.Parallel()
	e, gh, runs := runsEnv(t, "")
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	for run, tc := range map[int64]struct {
		runner, jobOn string
		deadline      time.Time
		completed     bool
	}{
		7:  {runner: "i-1", jobOn: "i-1", deadline: deadline},
		8:  {runner: "i-2", jobOn: "i-2", deadline: deadline, completed: true},
		9:  {runner: "i-3", jobOn: "i-9", deadline: deadline},
		10: {runner: "i-4", jobOn: "i-4", deadline: start.Add(time.Hour)},
	} {
		gh.StartRunAttempt("octo/app", run, 1)
		e.claimForRun(fmt.Sprint("run-", run), tc.runner, run)
		e.setDeadline(tc.runner, tc.deadline)
		job := gh.StartJob("octo/app", run, 1, tc.jobOn, start.Add(-20*time.Minute))
		if tc.completed {
			gh.CompleteJob(job)
		}
	}
	if res := e.reap(); !slices.Equal(res.HeldRuns, []string{"run-7"}) {
		t.Errorf("held %v, want [run-7]", res.HeldRuns)
	}
	poolworld.During(start, heldRunExtension).Check(t, "i-1's deadline", e.DB.Instance(t, "i-1").Threshold)
	e.assertDeadline(t, "i-2", deadline)
	e.assertDeadline(t, "i-3", deadline)
	e.assertDeadline(t, "i-4", start.Add(time.Hour))
	if got := sorted(runs.jobs); len(got) != 3 || slices.ContainsFunc(got, func(a string) bool { return strings.Contains(a, "run 10 ") }) {
		t.Errorf("listed the jobs of %q, want those of runs 7, 8 and 9", got)
	}
}

// A job runs at most GitHub's 5 days: its runners are held until then at
// the latest, and not at all when GitHub ends the job before their
// deadline.
func TestReapHoldsRunnersNoLongerThanGitHubLetsAJobRun(t *testing.T) {
	t.Parallel()
	e, gh, _ := runsEnv(t, "")
	now := time.Now()
	deadline := now.Add(5 * time.Minute)
	started := map[int64]time.Time{
		7: now.Add(-github.MaxJobExecutionTime + 10*time.Minute), // GitHub ends it in 10 minutes
		8: now.Add(-github.MaxJobExecutionTime + 3*time.Minute),  // in 3, before the deadline
	}
	for run, runner := range map[int64]string{7: "i-1", 8: "i-2"} {
		gh.StartRunAttempt("octo/app", run, 1)
		e.claimForRun(fmt.Sprint("run-", run), runner, run)
		e.setDeadline(runner, deadline)
		gh.StartJob("octo/app", run, 1, runner, started[run])
	}
	if res := e.reap(); !slices.Equal(res.HeldRuns, []string{"run-7"}) {
		t.Errorf("held %v, want [run-7]", res.HeldRuns)
	}
	e.assertDeadline(t, "i-1", started[7].Add(github.MaxJobExecutionTime))
	e.assertDeadline(t, "i-2", deadline)
}

// outage is a way to the stub GitHub that a test cuts: while it is down,
// every request's connection closes unanswered.
type outage struct {
	*httptest.Server
	down atomic.Bool
}

func newOutage(t *testing.T, to string) *outage {
	target, err := url.Parse(to)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	o := &outage{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.down.Load() {
			panic(http.ErrAbortHandler) // the connection closes, unanswered
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

// When GitHub cannot tell whether the attempt ended, or which jobs run
// where (rate limited, or not answering), the deadline stays as it is,
// and the failure is logged; the next pass, GitHub answering again,
// holds the runners.
func TestReapLeavesDeadlinesWhenGitHubCannotTell(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		limit int // requests the stub answers before its rate limit
		down  bool
		log   string
	}{
		"rate limited":             {limit: 0, log: "cannot tell whether its run ended"},
		"rate limited at the jobs": {limit: 1, log: "cannot tell whether a job of its run runs on its runners"},
		"unreachable":              {limit: github.TokenRateLimit, down: true, log: "cannot tell whether its run ended"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, gh, _ := runsEnv(t, "")
			way := newOutage(t, gh.URL)
			client, err := github.New(github.Config{BaseURL: way.URL, Token: gh.APIKey})
			if err != nil {
				t.Fatal(err)
			}
			e.c.GitHub.Runs = client
			gh.StartRunAttempt("octo/app", 7, 1)
			e.claimForRun("run-7-1", "i-1", 7)
			deadline := time.Now().Add(5 * time.Minute)
			e.setDeadline("i-1", deadline)
			gh.StartJob("octo/app", 7, 1, "i-1", time.Now().Add(-time.Hour))
			gh.SetRateLimit(tc.limit)
			way.down.Store(tc.down)
			logs := e.captureLogs()
			if res := e.reap(); len(res.HeldRuns) != 0 {
				t.Errorf("held %v", res.HeldRuns)
			}
			e.assertDeadline(t, "i-1", deadline)
			if !strings.Contains(logs(), tc.log) {
				t.Errorf("%q not logged:\n%s", tc.log, logs())
			}
			gh.SetRateLimit(github.TokenRateLimit)
			way.down.Store(false)
			if res := e.reap(); !slices.Equal(res.HeldRuns, []string{"run-7-1"}) {
				t.Errorf("once GitHub answers, held %v, want [run-7-1]", res.HeldRuns)
			}
		})
	}
}

// A job on a just-in-time runner of a claim's instance (its name the
// instance id and a suffix) holds the claim's runners as a job on the
// instance's own registration does.
func TestReapHoldsTheRunnersOfAJobOnAJustInTimeRunner(t *testing.T) {
	t.Parallel()
	e, gh, _ := runsEnv(t, "")
	gh.StartRunAttempt("octo/app", 7, 1)
	e.claimForRun("run-7-1", "i-1", 7)
	start := time.Now()
	e.setDeadline("i-1", start.Add(5*time.Minute))
	gh.StartJob("octo/app", 7, 1, protocol.JITRunnerName("i-1", "k2m4q7x3"), start.Add(-20*time.Minute))
	if res := e.reap(); !slices.Equal(res.HeldRuns, []string{"run-7-1"}) {
		t.Errorf("held %v, want run-7-1 held", res.HeldRuns)
	}
	poolworld.During(start, heldRunExtension).Check(t, "i-1's deadline", e.DB.Instance(t, "i-1").Threshold)
}
