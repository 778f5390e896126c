package github

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var octoRun = RunAttempt{Repository: Target{"octo", "app"}, RunID: 4242, Attempt: 2}

const octoRunPath = "/repos/octo/app/actions/runs/4242/attempts/2"

// A run attempt has ended when GitHub says it is completed, whatever its
// conclusion; queued, waiting and in-progress attempts have not.
func TestRunAttemptEndedByStatus(t *testing.T) {
	for status, want := range map[string]bool{"completed": true, "in_progress": false, "queued": false, "waiting": false} {
		t.Run(status, func(t *testing.T) {
			s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
				reply(w, http.StatusOK, map[string]any{"id": 4242, "run_attempt": 2, "status": status, "conclusion": nil})
			})
			c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
			ended, err := c.RunAttemptEnded(context.Background(), octoRun)
			if err != nil || ended != want {
				t.Fatalf("ended = %v (%v), want %v", ended, err, want)
			}
			reqs := s.requests()
			if len(reqs) != 1 || reqs[0].method != http.MethodGet || reqs[0].path != octoRunPath {
				t.Fatalf("requests %+v, want GET %s", reqs, octoRunPath)
			}
			assertHeaders(t, reqs[0].header, "Bearer "+pat)
		})
	}
}

// GitHub answers 404 for a deleted run, and also for a repository the
// credentials do not see: only a repository that answers tells the run
// is gone.
func TestRunAttemptNotFound(t *testing.T) {
	for _, tc := range []struct {
		name       string
		repoStatus int
		ended      bool
		wantErr    string
	}{
		{"deleted run", http.StatusOK, true, ""},
		{"invisible repository", http.StatusNotFound, false, "repository octo/app does not exist or is not visible to these credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/repos/octo/app" {
					reply(w, tc.repoStatus, map[string]any{"full_name": "octo/app", "message": "Not Found"})
					return
				}
				reply(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			})
			c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
			ended, err := c.RunAttemptEnded(context.Background(), octoRun)
			if ended != tc.ended || tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("ended = %v (%v), want %v (error %q)", ended, err, tc.ended, tc.wantErr)
			}
			var paths []string
			for _, r := range s.requests() {
				paths = append(paths, r.path)
			}
			if want := []string{octoRunPath, "/repos/octo/app"}; !slices.Equal(paths, want) {
				t.Errorf("requests %q, want %q", paths, want)
			}
		})
	}
}

// A credential without the "Actions" permission is told so, and the
// error is not a temporary one.
func TestRunAttemptForbidden(t *testing.T) {
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusForbidden, map[string]string{"message": "Resource not accessible by integration"})
	})
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	ended, err := c.RunAttemptEnded(context.Background(), octoRun)
	if ended || err == nil || !strings.Contains(err.Error(), `repository permission "Actions" (read)`) {
		t.Fatalf("ended = %v (%v), want the Actions permission named", ended, err)
	}
	if Temporary(err) {
		t.Errorf("a missing permission is temporary: %v", err)
	}
}

// Rate limits, server errors and a GitHub that does not answer are
// temporary: asking about another run would fail alike.
func TestRunAttemptTemporaryErrors(t *testing.T) {
	limited := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		reply(w, http.StatusForbidden, map[string]string{"message": "API rate limit exceeded"})
	})
	broken := newStub(t, func(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusBadGateway, "") })
	gone := newStub(t, func(w http.ResponseWriter, r *http.Request) {})
	gone.Close()
	for name, url := range map[string]string{"rate limited": limited.URL, "server error": broken.URL, "unreachable": gone.URL} {
		t.Run(name, func(t *testing.T) {
			c := newTestClient(t, Config{BaseURL: url, Token: pat})
			ended, err := c.RunAttemptEnded(context.Background(), octoRun)
			if ended || err == nil || !Temporary(err) {
				t.Fatalf("ended = %v (%v), want a temporary error", ended, err)
			}
		})
	}
	if len(limited.requests()) != 1 {
		t.Errorf("a rate limit resetting in an hour was asked %d times, want once", len(limited.requests()))
	}
}

func TestRunAttemptRejectsIncompleteNamesWithoutARequest(t *testing.T) {
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {})
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	for _, a := range []RunAttempt{{Repository: Target{Owner: "octo"}, RunID: 1, Attempt: 1}, {Repository: Target{"octo", "app"}, Attempt: 1}, {Repository: Target{"octo", "app"}, RunID: 1}} {
		if _, err := c.RunAttemptEnded(context.Background(), a); err == nil {
			t.Errorf("%v: no error", a)
		}
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("sent %d requests, want 0", n)
	}
}

// An attempt's jobs are read page by page, 100 a page, until GitHub's
// total_count; a job no runner took has no runner name and no start.
func TestRunAttemptJobsReadsEveryPage(t *testing.T) {
	started := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	var pages []string
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		pages = append(pages, r.URL.RawQuery)
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		var jobs []map[string]any
		for i := range min(100, 130-(page-1)*100) {
			jobs = append(jobs, map[string]any{"id": (page-1)*100 + i, "status": "completed", "runner_name": "i-old", "started_at": started})
		}
		if page == 2 {
			jobs[29] = map[string]any{"id": 129, "status": "in_progress", "runner_name": "i-0123456789abcdef0", "started_at": started}
			jobs[28] = map[string]any{"id": 128, "status": "queued", "runner_name": nil, "started_at": nil}
		}
		reply(w, http.StatusOK, map[string]any{"total_count": 130, "jobs": jobs})
	})
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	jobs, err := c.RunAttemptJobs(context.Background(), octoRun)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"per_page=100&page=1", "per_page=100&page=2"}; !slices.Equal(pages, want) {
		t.Errorf("asked for %q, want %q", pages, want)
	}
	if reqs := s.requests(); reqs[0].path != octoRunPath+"/jobs" {
		t.Errorf("GET %s, want %s/jobs", reqs[0].path, octoRunPath)
	}
	if len(jobs) != 130 {
		t.Fatalf("%d jobs, want 130", len(jobs))
	}
	if j := jobs[129]; !j.InProgress() || j.RunnerName != "i-0123456789abcdef0" || !j.StartedAt.Equal(started) {
		t.Errorf("job 129 = %+v, want in progress on i-0123456789abcdef0 since %s", j, started)
	}
	if j := jobs[128]; j.InProgress() || j.RunnerName != "" || !j.StartedAt.IsZero() {
		t.Errorf("queued job = %+v", j)
	}
}

// A list longer than the client reads is an error, not a partial answer.
func TestListTooLongIsAnError(t *testing.T) {
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		jobs := make([]map[string]any, 100)
		for i := range jobs {
			jobs[i] = map[string]any{"id": i, "status": "completed"}
		}
		reply(w, http.StatusOK, map[string]any{"total_count": 100*maxListPages + 1, "jobs": jobs})
	})
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	if _, err := c.RunAttemptJobs(context.Background(), octoRun); err == nil || !strings.Contains(err.Error(), "more than 2000 items") {
		t.Errorf("error %v, want more than 2000 items", err)
	}
	if n := len(s.requests()); n != maxListPages {
		t.Errorf("%d requests, want %d", n, maxListPages)
	}
}

// The active runs of a repository are its queued and its in-progress
// runs, each with its latest attempt: GitHub filters the list by status.
func TestActiveRunsAsksForQueuedAndInProgressRuns(t *testing.T) {
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		runs := map[string][]map[string]any{
			"queued":      {{"id": 7, "run_attempt": 2, "status": "queued"}},
			"in_progress": {{"id": 8, "run_attempt": 3, "status": "in_progress"}},
		}[r.URL.Query().Get("status")]
		reply(w, http.StatusOK, map[string]any{"total_count": len(runs), "workflow_runs": runs})
	})
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	runs, err := c.ActiveRuns(context.Background(), Target{"octo", "app"})
	want := []Run{{ID: 7, Attempt: 2, Status: "queued"}, {ID: 8, Attempt: 3, Status: "in_progress"}}
	if err != nil || !slices.Equal(runs, want) {
		t.Fatalf("runs %+v (%v), want %+v", runs, err, want)
	}
	for _, r := range s.requests() {
		if r.method != http.MethodGet || r.path != "/repos/octo/app/actions/runs" {
			t.Errorf("request %s %s, want GET /repos/octo/app/actions/runs", r.method, r.path)
		}
	}
}

// A job waits for a label when it is queued with it among its labels,
// compared as GitHub compares labels: ignoring case.
func TestJobWaitsFor(t *testing.T) {
	for _, tc := range []struct {
		job  Job
		want bool
	}{
		{Job{Status: "queued", Labels: []string{"7-1-abc"}}, true},
		{Job{Status: "queued", Labels: []string{"linux", "7-1-ABC"}}, true},
		{Job{Status: "queued", Labels: []string{"7-1-abd"}}, false},
		{Job{Status: "in_progress", Labels: []string{"7-1-abc"}}, false},
		{Job{Status: "completed", Labels: []string{"7-1-abc"}}, false},
	} {
		if got := tc.job.WaitsFor("7-1-abc"); got != tc.want {
			t.Errorf("%+v waits for 7-1-abc: %v, want %v", tc.job, got, tc.want)
		}
	}
}
