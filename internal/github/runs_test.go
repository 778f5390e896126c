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
