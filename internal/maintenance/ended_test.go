package maintenance

import (
	"cmp"
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agenttest"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// askedRuns counts the questions about run attempts, the lists of their
// jobs, and the lists of a repository's active runs, answered by runs.
type askedRuns struct {
	runs   claim.RunSource
	mu     sync.Mutex
	asked  []string
	jobs   []string
	active []string
}

func (a *askedRuns) RunAttemptJobs(ctx context.Context, r github.RunAttempt) ([]github.Job, error) {
	a.mu.Lock()
	a.jobs = append(a.jobs, r.String())
	a.mu.Unlock()
	return a.runs.RunAttemptJobs(ctx, r)
}

func (a *askedRuns) RunAttemptEnded(ctx context.Context, r github.RunAttempt) (bool, error) {
	a.mu.Lock()
	a.asked = append(a.asked, r.String())
	a.mu.Unlock()
	return a.runs.RunAttemptEnded(ctx, r)
}

func (a *askedRuns) ActiveRuns(ctx context.Context, t github.Target) ([]github.Run, error) {
	a.mu.Lock()
	a.active = append(a.active, t.String())
	a.mu.Unlock()
	return a.runs.ActiveRuns(ctx, t)
}

func (a *askedRuns) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.asked)
}

// runsEnv is a pool whose runners register with octo/app, with the
// provider's credentials for octo, which read runs from the stub GitHub
// at url (the stub's, when "").
func runsEnv(t *testing.T, url string) (*env, *scripttest.GitHub, *askedRuns) {
	t.Helper()
	e := newEnv(t)
	e.RegisterWith(&e.cfg, protocol.GitHubTarget{Owner: "octo", Repository: "app"})
	e.c.GitHub = &claim.GitHubAccess{Tokens: &poolworld.Tokens{}, Owner: "octo"}
	gh := scripttest.NewGitHub(t)
	client, err := github.New(github.Config{BaseURL: cmp.Or(url, gh.URL), Token: gh.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	runs := &askedRuns{runs: client}
	e.c.GitHub.Runs = runs
	return e, gh, runs
}

// claimForRun claims runner (seeded warm) for runID, serving attempt 1 of
// workflow run workflowRun of octo/app (none when 0), and dates its claim
// record back past endedRunAge.
func (e *env) claimForRun(runID, runner string, workflowRun int64, change ...func(*claim.Request)) {
	e.T.Helper()
	e.SeedIdle(runner, poolworld.Healthy)
	_, err := e.create(1, append([]func(*claim.Request){func(r *claim.Request) {
		r.RunID = runID
		r.Timings.ReleaseWait = time.Minute // it returns once the agent confirms
		if workflowRun != 0 {
			r.Repository, r.WorkflowRun = "octo/app", claim.WorkflowRun{ID: workflowRun, Attempt: 1}
		}
	}}, change...)...)
	if err != nil {
		e.T.Fatal(err)
	}
	it := e.DB.Get(protocol.TypeClaim, runID)
	it[protocol.AttrUpdatedAt] = strAttr(protocol.FormatTime(time.Now().Add(-endedRunAge - time.Minute)))
	e.DB.Put(it)
}

// assertHeld checks that runner still runs for runID, its claim record there.
func (e *env) assertHeld(t *testing.T, runID, runner string) {
	t.Helper()
	if r := e.DB.Instance(t, runner); r.State != protocol.StateRunning || r.RunID != runID {
		t.Errorf("%s is %s for %q, want running for %s", runner, r.State, r.RunID, runID)
	}
	if e.DB.Get(protocol.TypeClaim, runID) == nil {
		t.Errorf("the claim record of %s is gone", runID)
	}
}

// assertReleasedWarm checks that runner went back to the pool: idle,
// unowned, its message in the queue, its instance not terminated, and the
// claim record of runID gone.
func (e *env) assertReleasedWarm(t *testing.T, runID, runner string) {
	t.Helper()
	if r := e.DB.Instance(t, runner); r.State != protocol.StateIdle || r.RunID != "" {
		t.Errorf("%s is %s for %q, want idle and unowned", runner, r.State, r.RunID)
	}
	if !slices.Contains(e.SQS.QueuedIDs(t, poolworld.LargeURL), runner) {
		t.Errorf("%s is not back in the queue: %v", runner, e.SQS.QueuedIDs(t, poolworld.LargeURL))
	}
	if slices.Contains(e.EC2.TerminatedIDs(), runner) {
		t.Errorf("%s was terminated", runner)
	}
	if e.DB.Get(protocol.TypeClaim, runID) != nil {
		t.Errorf("the claim record of %s is still there", runID)
	}
}

// A claim whose run attempt completed (a cancelled run whose release job
// was ended, or never ran), or whose run was deleted, is released warm by
// the next reap, as its destroy would release it; a claim of the same
// pool without a workflow run is left alone.
func TestReapReleasesClaimsOfEndedRuns(t *testing.T) {
	t.Parallel()
	for name, end := range map[string]func(*scripttest.GitHub){
		"completed": func(gh *scripttest.GitHub) { gh.CompleteRunAttempt("octo/app", 7, 1) },
		"deleted":   func(gh *scripttest.GitHub) { gh.DeleteRun("octo/app", 7) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, gh, runs := runsEnv(t, "")
			gh.StartRunAttempt("octo/app", 7, 1)
			e.claimForRun("run-7-1", "i-1", 7)
			e.claimForRun("local-run", "i-2", 0)
			end(gh)
			res := e.reap()
			if !slices.Equal(res.EndedRuns, []string{"run-7-1"}) {
				t.Errorf("released %v, want [run-7-1]", res.EndedRuns)
			}
			e.assertReleasedWarm(t, "run-7-1", "i-1")
			e.assertHeld(t, "local-run", "i-2")
			if runs.count() != 1 {
				t.Errorf("asked GitHub %q, want only about run 7", runs.asked)
			}
			if tok, ok := e.Token("i-1", protocol.SortKeyRemovalToken); !ok || tok.RunID != "run-7-1" {
				t.Errorf("i-1's removal token %+v (%v), want one for run-7-1", tok, ok)
			}
		})
	}
}

// The opportunistic reap of claims and releases, bounded by ReapBudget,
// gives the releases of ended runs a budget of their own: a release
// waits for its agents until settleMargin before its deadline, which
// ReapBudget would leave none of, and the runners would be terminated.
func TestReapIfDueReleasesEndedRunsWarm(t *testing.T) {
	t.Parallel()
	e, gh, _ := runsEnv(t, "")
	gh.StartRunAttempt("octo/app", 7, 1)
	e.claimForRun("run-7-1", "i-1", 7)
	gh.CompleteRunAttempt("octo/app", 7, 1)
	e.Agents.SetReleaseDelay(200 * time.Millisecond) // an agent takes a moment to leave its run
	res, ran, err := ReapIfDue(context.Background(), e.c, poolworld.Pool, time.Minute)
	if err != nil || !ran {
		t.Fatalf("ran %v (%v)", ran, err)
	}
	if !slices.Equal(res.EndedRuns, []string{"run-7-1"}) {
		t.Errorf("released %v, want [run-7-1]", res.EndedRuns)
	}
	e.assertReleasedWarm(t, "run-7-1", "i-1")
}

// A claim whose run attempt is under way is left alone, asked about once
// per reap; a claim younger than endedRunAge is not asked about.
func TestReapLeavesClaimsOfRunsUnderWay(t *testing.T) {
	t.Parallel()
	e, gh, runs := runsEnv(t, "")
	gh.StartRunAttempt("octo/app", 7, 1)
	gh.StartRunAttempt("octo/app", 8, 1)
	e.claimForRun("run-7-1", "i-1", 7)
	e.claimForRun("run-8-1", "i-2", 8)
	young := e.DB.Get(protocol.TypeClaim, "run-8-1")
	young[protocol.AttrUpdatedAt] = strAttr(protocol.FormatTime(time.Now().Add(-endedRunAge + time.Minute)))
	e.DB.Put(young)
	for pass := 1; pass <= 2; pass++ {
		if res := e.reap(); len(res.EndedRuns) != 0 {
			t.Errorf("pass %d released %v", pass, res.EndedRuns)
		}
		if want := []string{"attempt 1 of workflow run 7 of octo/app"}; runs.count() != pass || !slices.Equal(runs.asked[pass-1:], want) {
			t.Errorf("after pass %d asked GitHub %q, want once a pass about run 7", pass, runs.asked)
		}
	}
	e.assertHeld(t, "run-7-1", "i-1")
	e.assertHeld(t, "run-8-1", "i-2")
}

// The pool's credentials are asked only about runs of the repositories
// they mint tokens for: a claim recorded for another owner's run is left
// alone.
func TestReapAsksOnlyAboutRunsOfTheCredentialsOwner(t *testing.T) {
	t.Parallel()
	e, gh, runs := runsEnv(t, "")
	for _, repo := range []string{"octo/app", "mallory/app"} {
		gh.StartRunAttempt(repo, 7, 1)
		gh.CompleteRunAttempt(repo, 7, 1)
	}
	e.claimForRun("run-mallory", "i-1", 7, func(r *claim.Request) { r.Repository = "mallory/app" })
	e.claimForRun("run-octo", "i-2", 7)
	if res := e.reap(); !slices.Equal(res.EndedRuns, []string{"run-octo"}) {
		t.Errorf("released %v, want [run-octo]", res.EndedRuns)
	}
	if want := []string{"attempt 1 of workflow run 7 of octo/app"}; !slices.Equal(runs.asked, want) {
		t.Errorf("asked GitHub %q, want %q", runs.asked, want)
	}
	e.assertHeld(t, "run-mallory", "i-1")
	e.assertReleasedWarm(t, "run-octo", "i-2")
}

// When GitHub is rate limited or does not answer, no claim is released,
// and the pass asks no more: every question would fail alike.
func TestReapLeavesClaimsWhenGitHubCannotTell(t *testing.T) {
	t.Parallel()
	gone := httptest.NewServer(nil)
	gone.Close()
	for name, tc := range map[string]struct {
		url   string
		limit bool
	}{
		"rate limited": {limit: true},
		"unreachable":  {url: gone.URL},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, gh, runs := runsEnv(t, tc.url)
			for _, run := range []int64{7, 8} {
				gh.StartRunAttempt("octo/app", run, 1)
				gh.CompleteRunAttempt("octo/app", run, 1)
			}
			e.claimForRun("run-7-1", "i-1", 7)
			e.claimForRun("run-8-1", "i-2", 8)
			if tc.limit {
				gh.SetRateLimit(0)
			}
			logs := e.captureLogs()
			if res := e.reap(); len(res.EndedRuns) != 0 {
				t.Errorf("released %v", res.EndedRuns)
			}
			if runs.count() != 1 {
				t.Errorf("asked GitHub %q, want one question and no more", runs.asked)
			}
			e.assertHeld(t, "run-7-1", "i-1")
			e.assertHeld(t, "run-8-1", "i-2")
			if !strings.Contains(logs(), "cannot tell whether its run ended") {
				t.Errorf("nothing logged:\n%s", logs())
			}
		})
	}
}

// The maintenance that runs alongside a claim or a release, whose caller
// waits for it, releases no claim of an ended run: a release waits for its
// agents. The pool's own maintenance does.
func TestMaintenanceOnAClaimsPathReleasesNoEndedRun(t *testing.T) {
	t.Parallel()
	e, gh, runs := runsEnv(t, "")
	gh.StartRunAttempt("octo/app", 7, 1)
	e.claimForRun("run-7-1", "i-1", 7)
	gh.CompleteRunAttempt("octo/app", 7, 1)
	res, ran, err := reapIfDue(context.Background(), e.c, poolworld.Pool, time.Minute, followHolds)
	if err != nil || !ran {
		t.Fatalf("ran %v (%v)", ran, err)
	}
	if len(res.EndedRuns) > 0 || runs.count() > 0 {
		t.Errorf("released %v after asking GitHub %q, want neither on a claim's path", res.EndedRuns, runs.asked)
	}
	e.assertHeld(t, "run-7-1", "i-1")
}

// "Re-run failed jobs" runs the failed jobs on the claim of the attempt
// that claimed, whose own attempt has completed: the claim stays while the
// run's newer attempt is under way, and goes back warm once it ends.
func TestReapLeavesTheClaimARerunMayRunOn(t *testing.T) {
	t.Parallel()
	e, gh, _ := runsEnv(t, "")
	gh.StartRunAttempt("octo/app", 7, 1)
	e.claimForRun("run-7-1", "i-1", 7)
	gh.CompleteRunAttempt("octo/app", 7, 1)
	gh.StartRunAttempt("octo/app", 7, 2)
	if res := e.reap(); len(res.EndedRuns) > 0 {
		t.Fatalf("released %v while attempt 2 of its run is under way", res.EndedRuns)
	}
	e.assertHeld(t, "run-7-1", "i-1")
	gh.CompleteRunAttempt("octo/app", 7, 2)
	if res := e.reap(); !slices.Equal(res.EndedRuns, []string{"run-7-1"}) {
		t.Errorf("released %v once its run ended, want [run-7-1]", res.EndedRuns)
	}
	e.assertReleasedWarm(t, "run-7-1", "i-1")
}

// orgPool makes e's pool register its runners with organization octo, its
// agents configured for octo and with the pool's broker, which they ask
// for each job's registration when a claim hands them grants (the claims
// through the broker, RegisterWithRepository).
func orgPool(e *env) *agenttest.Broker {
	e.RegisterWith(&e.cfg, protocol.GitHubTarget{Owner: "octo"})
	b := &agenttest.Broker{}
	e.Agents.SetBroker(b)
	return b
}

// registerWithApp makes a claim for attempt 1 of workflow run 7 of
// octo/app register its runners with octo/app, as the broker's claims do.
func registerWithApp(r *claim.Request) {
	r.Repository, r.WorkflowRun, r.RegisterWithRepository = "octo/app", claim.WorkflowRun{ID: 7, Attempt: 1}, true
}

// The pool's maintenance releases the claim of an ended run with no
// removal token (its agents have the broker delete their registrations),
// and revives a released claim for a re-run with grants for the claim's
// repository again: both read the claim's kind from its record (or the
// released claim's marker).
func TestMaintenanceRegistersWithTheClaimsRepository(t *testing.T) {
	t.Parallel()
	t.Run("ended run", func(t *testing.T) {
		t.Parallel()
		e, gh, _ := runsEnv(t, "")
		broker := orgPool(e)
		src := e.c.GitHub.Tokens.(*poolworld.Tokens)
		gh.StartRunAttempt("octo/app", 7, 1)
		e.claimForRun("run-7-1", "i-1", 7, registerWithApp)
		gh.CompleteRunAttempt("octo/app", 7, 1)
		if res := e.reap(); !slices.Equal(res.EndedRuns, []string{"run-7-1"}) {
			t.Fatalf("released %v, want [run-7-1]", res.EndedRuns)
		}
		if got := src.Issued(); len(got) != 0 {
			t.Errorf("GitHub calls %q, want no token", got)
		}
		if got := broker.Deregistered(); len(got) != 1 {
			t.Errorf("the broker deleted registrations %v, want i-1's", got)
		}
	})
	t.Run("revival", func(t *testing.T) {
		t.Parallel()
		e, gh, _ := runsEnv(t, "")
		broker := orgPool(e)
		gh.StartRunAttempt("octo/app", 7, 1)
		e.claimForRun("run-7-1", "i-1", 7, registerWithApp)
		label := e.recordOf(t, "run-7-1").Request.Label
		if _, err := e.c.Release(context.Background(), poolworld.Pool, "run-7-1"); err != nil {
			t.Fatal(err)
		}
		gh.CompleteRunAttempt("octo/app", 7, 1)
		gh.StartRunAttempt("octo/app", 7, 2)
		gh.QueueRunJob("octo/app", 7, 2, label)
		if res := e.reap(); !slices.Equal(res.RevivedRuns, []string{"run-7-1"}) {
			t.Fatalf("revived %v, want [run-7-1]", res.RevivedRuns)
		}
		presented := broker.Presented()
		if len(presented) != 2 || presented[1].Target != "octo/app" || presented[1].Label != label {
			t.Errorf("grants presented %+v, want the revival's for octo/app with the claim's label", presented)
		}
		if rec := e.recordOf(t, "run-7-1"); !rec.Request.RegisterWithRepository {
			t.Errorf("revived claim %+v, want it to register with octo/app", rec.Request)
		}
	})
}
