package scripttest

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
)

// The stub GitHub enforces GitHub's rules (internal/github's limits.go),
// answering over HTTP as config.sh, run.sh and the provider see it.

// stubClock is a clock a test moves.
type stubClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stubClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *stubClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// withClock puts the stub on a clock the test moves.
func withClock(g *GitHub) *stubClock {
	c := &stubClock{now: time.Now()}
	g.mu.Lock()
	g.now = c.Now
	g.mu.Unlock()
	return c
}

// register posts what the stub config.sh posts for a runner of octo/app;
// it returns the status.
func register(t *testing.T, g *GitHub, token, name, labels string) int {
	t.Helper()
	return registerIn(t, g, "octo/app", "", token, name, labels)
}

// registerIn posts what the stub config.sh posts for a runner of target in
// group; it returns the status.
func registerIn(t *testing.T, g *GitHub, target, group, token, name, labels string) int {
	t.Helper()
	resp, err := http.PostForm(g.URL+"/_stub/register", url.Values{"url": {g.URL + "/" + target}, "token": {token},
		"name": {name}, "labels": {labels}, "runnergroup": {group}, "version": {RunnerVersion}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A runner registers with a name of at most 64 characters and no empty
// label, with a registration token of its repository younger than an hour.
func TestGitHub_registrationRules(t *testing.T) {
	g := NewGitHub(t)
	clock := withClock(g)
	for _, tc := range []struct {
		what, name, labels string
		status             int
	}{
		{"a name of 65 characters", strings.Repeat("i", 65), "run-1", http.StatusForbidden},
		{"an empty label", "i-1", "run-1,,run-2", http.StatusForbidden},
		{"a name of 64 characters", strings.Repeat("i", 64), "run-1", http.StatusOK},
	} {
		tok, _ := g.IssueToken("registration-token", "octo/app")
		if got := register(t, g, tok, tc.name, tc.labels); got != tc.status {
			t.Errorf("%s: HTTP %d, want %d", tc.what, got, tc.status)
		}
	}
	tok, expires := g.IssueToken("registration-token", "octo/app")
	if want := clock.Now().Add(github.TokenLifetime).Truncate(time.Second); !expires.Equal(want) {
		t.Errorf("token expires at %v, want an hour on, %v", expires, want)
	}
	clock.Add(github.TokenLifetime + time.Second)
	if got := register(t, g, tok, "i-2", "run-1"); got != http.StatusForbidden {
		t.Errorf("a registration token past its hour: HTTP %d, want 403", got)
	}
	events := strings.Join(g.Events(), "\n")
	for _, want := range []string{"must be 1 to 64 characters", "hold an empty label", "token expired"} {
		if !strings.Contains(events, want) {
			t.Errorf("events %q: no refusal saying %q", events, want)
		}
	}
}

// An agent's registration registers where its URL says, as config.sh
// would, with the same checks: a repository's token registers a runner of
// that repository, and never one of its organization.
func TestGitHub_registersAgents(t *testing.T) {
	g := NewGitHub(t)
	tok, _ := g.IssueToken("registration-token", "octo/app")
	if err := g.RegisterAgent(agent.Registration{URL: "https://github.com/octo", Name: "i-1", Label: "run-1", Token: tok}); err == nil ||
		!strings.Contains(err.Error(), "token issued for octo/app, not octo") {
		t.Errorf("a repository's token registering with its organization: %v", err)
	}
	if err := g.RegisterAgent(agent.Registration{URL: "https://github.com/octo/app", Name: "i-1", Label: "run-1", Token: tok}); err != nil {
		t.Fatal(err)
	}
	if r := g.Runners()["i-1"]; r.Target != "octo/app" || r.Labels != "run-1" || r.Group != "Default" {
		t.Errorf("registered %+v, want a runner of octo/app labelled run-1", r)
	}
}

// nextJob polls for a job as run.sh does: the job's id, or "" on 204.
func nextJob(t *testing.T, g *GitHub, runner string) string {
	t.Helper()
	resp, err := http.Get(g.URL + "/_stub/job?" + url.Values{"name": {runner}, "version": {RunnerVersion}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNoContent {
		return ""
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("job poll: HTTP %d: %s", resp.StatusCode, body)
	}
	id, _, _ := strings.Cut(string(body), " ")
	return id
}

// GitHub matches labels case-insensitively, and ends a job no runner takes
// within 24 hours: it is never run.
func TestGitHub_jobsMatchAndExpire(t *testing.T) {
	g := NewGitHub(t)
	clock := withClock(g)
	tok, _ := g.IssueToken("registration-token", "octo/app")
	if got := register(t, g, tok, "i-1", "Run-1"); got != http.StatusOK {
		t.Fatalf("registration: HTTP %d", got)
	}
	stale := g.QueueJobAt("run-1", "true", clock.Now().Add(-github.MaxJobQueueTime-time.Second))
	fresh := g.QueueJobAt("RUN-1", "true", clock.Now().Add(-github.MaxJobQueueTime+time.Minute))
	if got := nextJob(t, g, "i-1"); got != fresh {
		t.Errorf("the runner labelled Run-1 took %q, want the job for RUN-1 queued under 24 hours ago, %q", got, fresh)
	}
	if job := g.JobResult(stale); !job.Canceled || !job.Done || job.Runner != "" {
		t.Errorf("the job queued 24 hours and a second ago: %+v, want it expired, done and never taken", job)
	}
}

// The REST API counts a credential's requests against its hourly limit,
// says so in x-ratelimit-* headers, and once it is spent answers 403 with
// x-ratelimit-remaining 0 and GitHub's message; the provider's client
// reports the rate limit and the wait instead of waiting an hour.
func TestGitHub_rateLimit(t *testing.T) {
	g := NewGitHub(t)
	withClock(g)
	g.SetRateLimit(2)
	issue := func() *http.Response {
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/repos/octo/app/actions/runners/registration-token", nil)
		req.Header.Set("Authorization", "Bearer "+g.APIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i, want := range []string{"1", "0"} {
		resp := issue()
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-RateLimit-Remaining") != want || resp.Header.Get("X-RateLimit-Limit") != "2" {
			t.Errorf("request %d: HTTP %d, remaining %q of %q; want 201, %s of 2", i+1, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("X-RateLimit-Limit"), want)
		}
	}
	resp := issue()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	reset, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-RateLimit-Remaining") != "0" || reset <= time.Now().Unix() ||
		!strings.Contains(string(body), "API rate limit exceeded") {
		t.Errorf("past the limit: HTTP %d, remaining %q, reset %d, %s; want 403, 0, a reset ahead, GitHub's message", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), reset, body)
	}
	c, err := github.New(github.Config{BaseURL: g.URL, Token: g.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.RegistrationToken(context.Background(), github.Target{Owner: "octo", Repository: "app"})
	if err == nil || !strings.Contains(err.Error(), "rate limited by GitHub; GitHub asks to wait") {
		t.Errorf("the provider's client past the limit: %v, want it to report the rate limit and the wait", err)
	}
}

// The provider's client reads run attempts from the stub as from GitHub:
// in progress until completed, an earlier attempt completed by a re-run,
// a deleted run ended, and a repository the stub never saw not found.
func TestGitHub_runAttempts(t *testing.T) {
	g := NewGitHub(t)
	c, err := github.New(github.Config{BaseURL: g.URL, Token: g.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	app := github.Target{Owner: "octo", Repository: "app"}
	ended := func(repo github.Target, run int64, attempt int) (bool, error) {
		return c.RunAttemptEnded(ctx, github.RunAttempt{Repository: repo, RunID: run, Attempt: attempt})
	}
	g.StartRunAttempt("octo/app", 7, 1)
	if got, err := ended(app, 7, 1); got || err != nil {
		t.Fatalf("a started attempt: ended %v (%v)", got, err)
	}
	g.CompleteRunAttempt("octo/app", 7, 1)
	g.StartRunAttempt("octo/app", 7, 2)
	if got, err := ended(app, 7, 1); !got || err != nil {
		t.Errorf("a completed attempt: ended %v (%v)", got, err)
	}
	if got, err := ended(app, 7, 2); got || err != nil {
		t.Errorf("the re-run's attempt: ended %v (%v)", got, err)
	}
	g.DeleteRun("octo/app", 7)
	if got, err := ended(app, 7, 2); !got || err != nil {
		t.Errorf("a deleted run: ended %v (%v)", got, err)
	}
	if got, err := ended(github.Target{Owner: "octo", Repository: "unseen"}, 7, 1); got || err == nil {
		t.Errorf("a run of a repository the stub does not know: ended %v (%v), want an error", got, err)
	}
}

// The provider's client lists a run attempt's jobs from the stub as from
// GitHub, page by page: in progress on their runner until completed, or
// until GitHub's 5 days of execution end them.
func TestGitHub_runAttemptJobs(t *testing.T) {
	g := NewGitHub(t)
	clock := withClock(g)
	c, err := github.New(github.Config{BaseURL: g.URL, Token: g.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	attempt := github.RunAttempt{Repository: github.Target{Owner: "octo", Repository: "app"}, RunID: 7, Attempt: 1}
	g.StartRunAttempt("octo/app", 7, 1)
	for range 120 {
		g.CompleteJob(g.StartJob("octo/app", 7, 1, "i-done", clock.Now()))
	}
	long := g.StartJob("octo/app", 7, 1, "i-long", clock.Now())
	clock.Add(time.Hour)
	short := g.StartJob("octo/app", 7, 1, "i-short", clock.Now())
	g.StartJob("octo/app", 7, 2, "i-other-attempt", clock.Now())
	inProgress := func() map[string]int64 {
		t.Helper()
		jobs, err := c.RunAttemptJobs(context.Background(), attempt)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 122 {
			t.Errorf("%d jobs, want 122", len(jobs))
		}
		running := map[string]int64{}
		for _, j := range jobs {
			if j.InProgress() {
				running[j.RunnerName] = j.ID
			}
		}
		return running
	}
	if got := inProgress(); len(got) != 2 || got["i-long"] != long || got["i-short"] != short {
		t.Errorf("in progress %v, want i-long's job %d and i-short's %d", got, long, short)
	}
	clock.Add(github.MaxJobExecutionTime - time.Hour + time.Second)
	if got := inProgress(); len(got) != 1 || got["i-short"] != short {
		t.Errorf("in progress %v after 5 days, want i-short's job alone", got)
	}
}

// The provider's client finds a re-run with a job queued for a label as
// on GitHub: the run listed with its latest attempt, queued while no job
// of it runs, in progress once one does, and the job queued with its
// labels; completed runs are not listed.
func TestGitHub_activeRunsAndQueuedJobs(t *testing.T) {
	g := NewGitHub(t)
	c, err := github.New(github.Config{BaseURL: g.URL, Token: g.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	repo := github.Target{Owner: "octo", Repository: "app"}
	g.StartRunAttempt("octo/app", 7, 1)
	g.CompleteRunAttempt("octo/app", 7, 1)
	g.StartRunAttempt("octo/app", 8, 1)
	g.CompleteRunAttempt("octo/app", 8, 1)
	g.StartRunAttempt("octo/app", 7, 2)
	queued := g.QueueRunJob("octo/app", 7, 2, "7-1-abc")
	active := func() []github.Run {
		t.Helper()
		runs, err := c.ActiveRuns(context.Background(), repo)
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	if got := active(); len(got) != 1 || got[0] != (github.Run{ID: 7, Attempt: 2, Status: "queued"}) {
		t.Errorf("active runs %+v, want run 7's attempt 2, queued", got)
	}
	jobs, err := c.RunAttemptJobs(context.Background(), github.RunAttempt{Repository: repo, RunID: 7, Attempt: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != queued || !jobs[0].WaitsFor("7-1-ABC") || jobs[0].WaitsFor("7-1") || jobs[0].RunnerName != "" {
		t.Errorf("jobs %+v, want job %d queued for 7-1-abc", jobs, queued)
	}
	g.StartJob("octo/app", 7, 2, "i-1", time.Now())
	if got := active(); len(got) != 1 || got[0] != (github.Run{ID: 7, Attempt: 2, Status: "in_progress"}) {
		t.Errorf("active runs %+v, want run 7's attempt 2, in progress", got)
	}
	g.CompleteRunAttempt("octo/app", 7, 2)
	if got := active(); len(got) != 0 {
		t.Errorf("active runs %+v, want none", got)
	}
}

// The provider's client reads an organization's runner groups, and whom
// they admit, from the stub as from GitHub: the default group open to all
// private repositories, a group of selected repositories with them; and a
// credential without the permission is refused.
func TestGitHub_runnerGroups(t *testing.T) {
	g := NewGitHub(t)
	c, err := github.New(github.Config{BaseURL: g.URL, Token: g.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := g.AddRunnerGroup("octo", "Trusted builds", GroupAccess{SelectedRepositories: []string{"octo/app"}, AllowPublicRepositories: true})
	groups, err := c.RunnerGroups(ctx, "octo")
	want := []github.RunnerGroup{
		{ID: 1, Name: "Default", Default: true, Visibility: "all"},
		{ID: id, Name: "Trusted builds", Visibility: github.VisibilitySelected, AllowsPublicRepositories: true},
	}
	if err != nil || !slices.Equal(groups, want) {
		t.Errorf("groups %+v (%v), want %+v", groups, err, want)
	}
	if repos, err := c.RunnerGroupRepositories(ctx, "octo", id); err != nil || !slices.Equal(repos, []string{"octo/app"}) {
		t.Errorf("repositories %q (%v), want [octo/app]", repos, err)
	}
	g.AddRepository("octo/site", true)
	if public, err := c.RepositoryIsPublic(ctx, github.Target{Owner: "octo", Repository: "site"}); !public || err != nil {
		t.Errorf("octo/site public %v (%v), want public", public, err)
	}
	g.DenyRunnerGroupReads(true)
	if _, err := c.RunnerGroups(ctx, "octo"); err == nil || !strings.Contains(err.Error(), "HTTP 403") {
		t.Errorf("error %v, want HTTP 403", err)
	}
}
