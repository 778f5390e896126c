package github

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// answer is one canned stub response.
type answer struct {
	status int
	header map[string]string
	body   string
}

// sequenceStub answers with answers in order, repeating the last one.
func sequenceStub(t *testing.T, answers ...answer) *stub {
	var n atomic.Int32
	return newStub(t, func(w http.ResponseWriter, r *http.Request) {
		a := answers[min(int(n.Add(1))-1, len(answers)-1)]
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		reply(w, a.status, a.body)
	})
}

var okAnswer = answer{status: http.StatusCreated, body: `{"token":"` + regSecret + `","expires_at":"` + expiresAt + `"}`}

func TestErrors(t *testing.T) {
	repo, org := Target{"octo", "app"}, Target{Owner: "octo"}
	longHTML := "<html>" + strings.Repeat("oops ", 100) + "</html>"
	cases := []struct {
		name     string
		target   Target
		answer   answer
		attempts int
		want     []string
	}{
		{"401", repo, answer{status: 401, body: `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`}, 1,
			[]string{"create a registration token for repository octo/app: HTTP 401 Unauthorized: Bad credentials; the GitHub credentials are invalid or expired"}},
		{"403 repository", repo, answer{status: 403, body: `{"message":"Resource not accessible by personal access token"}`}, 1,
			[]string{"repository octo/app: HTTP 403 Forbidden: Resource not accessible by personal access token", `repository permission "Administration" (read and write)`, `"repo" scope`}},
		{"403 organization", org, answer{status: 403, body: `{"message":"Must have admin rights to Repository."}`}, 1,
			[]string{"create a registration token for organization octo: HTTP 403 Forbidden: Must have admin rights", `organization permission "Self-hosted runners" (read and write)`, `"admin:org" scope`}},
		{"404", repo, answer{status: 404, body: `{"message":"Not Found"}`}, 1,
			[]string{"repository octo/app: HTTP 404 Not Found; repository octo/app does not exist or is not visible to these credentials (GitHub also answers 404 when a permission is missing)"}},
		{"422", repo, answer{status: 422, body: `{"message":"Validation Failed"}`}, 1,
			[]string{"repository octo/app: HTTP 422 Unprocessable Entity: Validation Failed"}},
		{"500 persists", repo, answer{status: 500, body: `{"message":"Server Error"}`}, 3,
			[]string{"repository octo/app: HTTP 500 Internal Server Error: Server Error (after 3 attempts); GitHub had a server error; try again later"}},
		{"502 HTML body is truncated", repo, answer{status: 502, body: longHTML}, 3,
			[]string{"repository octo/app: HTTP 502 Bad Gateway: <html>oops oops", "oops…"}},
		{"error body echoing the credential", repo, answer{status: 400, body: "bad header Authorization: Bearer " + pat}, 1,
			[]string{"HTTP 400 Bad Request: bad header Authorization: Bearer [redacted]"}},
		{"429 with a long Retry-After", repo, answer{status: 429, header: map[string]string{"Retry-After": "3600"}, body: `{"message":"slow down"}`}, 1,
			[]string{"HTTP 429 Too Many Requests: slow down; rate limited by GitHub; GitHub asks to wait 1h0m0s"}},
		{"403 without rate-limit headers is not retried", repo, answer{status: 403, header: map[string]string{"X-RateLimit-Remaining": "4999"}, body: `{"message":"Forbidden"}`}, 1,
			[]string{"HTTP 403 Forbidden;", "Administration"}},
		{"malformed JSON", repo, answer{status: 201, body: `{"token":"` + regSecret + `",`}, 1,
			[]string{"create a registration token for repository octo/app: HTTP 201 response is not the expected JSON object"}},
		{"missing token", repo, answer{status: 201, body: `{"expires_at":"` + expiresAt + `"}`}, 1,
			[]string{"create a registration token for repository octo/app: HTTP 201 response has no token"}},
		{"missing expires_at", repo, answer{status: 201, body: `{"token":"` + regSecret + `"}`}, 1,
			[]string{"create a registration token for repository octo/app: HTTP 201 response has no expires_at"}},
		{"bad expires_at", repo, answer{status: 201, body: `{"token":"` + regSecret + `","expires_at":"tomorrow"}`}, 1,
			[]string{`HTTP 201 response has expires_at "tomorrow", which is not an RFC 3339 time`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := sequenceStub(t, tc.answer)
			c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
			tok, err := c.RegistrationToken(context.Background(), tc.target)
			if err == nil {
				t.Fatalf("got token %+v, want an error", tok)
			}
			msg := err.Error()
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("err = %q\nwant it to contain %q", msg, want)
				}
			}
			assertNoSecrets(t, msg)
			if n := len(s.requests()); n != tc.attempts {
				t.Errorf("sent %d requests, want %d", n, tc.attempts)
			}
		})
	}
}

func assertNoSecrets(t *testing.T, msg string) {
	t.Helper()
	for _, secret := range []string{pat, regSecret} {
		if strings.Contains(msg, secret) {
			t.Errorf("err leaks %q: %q", secret, msg)
		}
	}
}

func TestTruncatedBodyLength(t *testing.T) {
	s := sequenceStub(t, answer{status: 400, body: strings.Repeat("x", 5000)})
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	_, err := c.RegistrationToken(context.Background(), Target{"octo", "app"})
	if n := strings.Count(err.Error(), "x"); n != maxMessageRunes {
		t.Errorf("err quotes %d body characters, want %d: %q", n, maxMessageRunes, err)
	}
}

func TestRetriesThenSucceeds(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		failures []answer
	}{
		{"500", []answer{{status: 500, body: `{"message":"Server Error"}`}}},
		{"500 then 503", []answer{{status: 500}, {status: 503}}},
		{"429 with Retry-After 0", []answer{{status: 429, header: map[string]string{"Retry-After": "0"}}}},
		{"403 with Retry-After", []answer{{status: 403, header: map[string]string{"Retry-After": "0"}, body: `{"message":"You have exceeded a secondary rate limit"}`}}},
		{"403 with spent rate limit resetting now", []answer{{status: 403, header: map[string]string{
			"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(now.Unix(), 10)}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := sequenceStub(t, append(tc.failures, okAnswer)...)
			c := newTestClient(t, Config{BaseURL: s.URL, Token: pat, Now: func() time.Time { return now }})
			tok, err := c.RemoveToken(context.Background(), Target{Owner: "octo"})
			if err != nil {
				t.Fatal(err)
			}
			if tok.Value != regSecret {
				t.Errorf("token = %q", tok.Value)
			}
			if n, want := len(s.requests()), len(tc.failures)+1; n != want {
				t.Errorf("sent %d requests, want %d", n, want)
			}
		})
	}
}

func TestSpentRateLimitResettingLaterIsNotRetried(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := sequenceStub(t, answer{status: 403, header: map[string]string{
		"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(now.Add(20*time.Minute).Unix(), 10)},
		body: `{"message":"API rate limit exceeded for installation ID 42."}`})
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat, Now: func() time.Time { return now }})
	_, err := c.RegistrationToken(context.Background(), Target{"octo", "app"})
	want := "create a registration token for repository octo/app: HTTP 403 Forbidden: API rate limit exceeded for installation ID 42.; rate limited by GitHub; GitHub asks to wait 20m0s"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("sent %d requests, want 1", n)
	}
}

func TestCancelDuringRetryWait(t *testing.T) {
	s := sequenceStub(t, answer{status: 503, header: map[string]string{"Retry-After": "10"}})
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(50*time.Millisecond, cancel)

	began := time.Now()
	_, err := c.RegistrationToken(ctx, Target{"octo", "app"})
	if elapsed := time.Since(began); elapsed > 2*time.Second {
		t.Errorf("returned after %v, want promptly after cancellation", elapsed)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if err != nil && !strings.Contains(err.Error(), "repository octo/app: gave up waiting to retry after HTTP 503") {
		t.Errorf("err = %q, want it to name the target and status", err)
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("sent %d requests, want 1", n)
	}
}

func TestCanceledContextBeforeCall(t *testing.T) {
	s := sequenceStub(t, okAnswer)
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.RegistrationToken(ctx, Target{"octo", "app"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
