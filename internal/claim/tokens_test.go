package claim

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// fakeTokens issues numbered tokens valid for an hour, or fails.
type fakeTokens struct {
	mu      sync.Mutex
	calls   []string // "registration octo/app", "remove octo/app"
	err     error
	onFetch func() // runs inside RegistrationToken, to stage races
}

func (f *fakeTokens) issue(kind string, t github.Target) (github.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, kind+" "+t.String())
	if f.err != nil {
		return github.Token{}, f.err
	}
	return github.Token{Value: kind + "-" + string(rune('0'+len(f.calls))), ExpiresAt: time.Now().Add(time.Hour).Truncate(time.Second)}, nil
}

func (f *fakeTokens) RegistrationToken(_ context.Context, t github.Target) (github.Token, error) {
	if f.onFetch != nil {
		f.onFetch()
	}
	return f.issue("registration", t)
}

func (f *fakeTokens) RemoveToken(_ context.Context, t github.Target) (github.Token, error) {
	return f.issue("remove", t)
}

func (f *fakeTokens) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// tokenEnv is a pool that registers its runners with octo/app.
func tokenEnv(t *testing.T, tokens TokenSource) *env {
	t.Helper()
	e := newEnv(t)
	e.cfg.GitHub = &protocol.GitHubTarget{Owner: "octo", Repository: "app"}
	e.writeConfig()
	e.c.Tokens = tokens
	return e
}

func (e *env) tokenItem() (protocol.RegistrationToken, bool) {
	it := e.db.get(protocol.TypeMetadata, protocol.RegistrationTokenID)
	if it == nil {
		return protocol.RegistrationToken{}, false
	}
	tok, err := protocol.RegistrationTokenFromItem(it)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok, true
}

// putTokenItem writes a token item fetched age ago for target, whose tokens
// expire life after it was fetched.
func (e *env) putTokenItem(target string, age, life time.Duration) protocol.RegistrationToken {
	fetched := time.Now().Add(-age).Truncate(time.Second)
	tok := protocol.RegistrationToken{Target: target, Token: "old-reg", ExpiresAt: fetched.Add(life), RemoveToken: "old-rem", RemoveExpiresAt: fetched.Add(life), FetchedAt: fetched}
	e.db.put(tok.Item())
	return tok
}

func TestTokensFetchedWhenMissing(t *testing.T) {
	t.Parallel()
	src := &fakeTokens{}
	e := tokenEnv(t, src)
	e.seedIdle("i-1", healthy)
	before := time.Now().Truncate(time.Second)
	if _, err := e.create(1); err != nil {
		t.Fatal(err)
	}
	tok, ok := e.tokenItem()
	if !ok || tok.Target != "octo/app" || tok.Token != "registration-1" || tok.RemoveToken != "remove-2" {
		t.Fatalf("token item = %+v (found %v), want both fresh tokens for octo/app", tok, ok)
	}
	// Fetched during the claim; expiring an hour after the fetch.
	if tok.FetchedAt.Before(before) || tok.FetchedAt.After(time.Now()) || time.Until(tok.ExpiresAt) < 55*time.Minute {
		t.Errorf("token item times: fetched %v, expires %v", tok.FetchedAt, tok.ExpiresAt)
	}
}

func TestTokensRefreshRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		target  string
		age     time.Duration
		fetches int
	}{
		{"fresh", "octo/app", 10 * time.Minute, 0},
		{"olderThan30m", "octo/app", 31 * time.Minute, 2},
		{"otherTarget", "octo/other", time.Minute, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &fakeTokens{}
			e := tokenEnv(t, src)
			before := e.putTokenItem(tc.target, tc.age, time.Hour)
			e.seedIdle("i-1", healthy)
			if _, err := e.create(1); err != nil {
				t.Fatal(err)
			}
			if src.count() != tc.fetches {
				t.Errorf("%d token calls (%v), want %d", src.count(), src.calls, tc.fetches)
			}
			after, _ := e.tokenItem()
			if changed := after.Token != before.Token; changed != (tc.fetches > 0) {
				t.Errorf("token item changed = %v, want %v", changed, tc.fetches > 0)
			}
			if after.Target != "octo/app" {
				t.Errorf("token item target %q", after.Target)
			}
		})
	}
}

// A pool without a GitHub target leaves the item to whoever maintains it.
func TestTokensUntouchedWithoutGitHubTarget(t *testing.T) {
	t.Parallel()
	src := &fakeTokens{}
	e := newEnv(t)
	e.c.Tokens = src
	e.seedIdle("i-1", healthy)
	if _, err := e.create(1); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.tokenItem(); ok || src.count() != 0 {
		t.Errorf("token item written (%v) or GitHub called %d times", ok, src.count())
	}
}

// When tokens are needed and cannot be had, the claim fails before any
// runner learns the run id; tokens still valid long enough are used as
// they are.
func TestTokensUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		src     TokenSource
		item    func(*env)
		wantErr string
	}{
		{"noCredentialsNoItem", nil, func(*env) {}, "configure the provider's github block"},
		{"noCredentialsExpiringItem", nil, func(e *env) { e.putTokenItem("octo/app", 50*time.Minute, time.Hour) }, "configure the provider's github block"},
		{"noCredentialsUsableItem", nil, func(e *env) { e.putTokenItem("octo/app", 40*time.Minute, time.Hour) }, ""},
		{"gitHubDownNoItem", &fakeTokens{err: errors.New("HTTP 503")}, func(*env) {}, "cannot get runner registration tokens for octo/app: HTTP 503"},
		{"gitHubDownUsableItem", &fakeTokens{err: errors.New("HTTP 503")}, func(e *env) { e.putTokenItem("octo/app", 35*time.Minute, time.Hour) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := tokenEnv(t, tc.src)
			tc.item(e)
			e.seedIdle("i-1", healthy)
			_, err := e.create(1)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("claim failed: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("claim error = %v, want %q", err, tc.wantErr)
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle || r.RunID != "" {
				t.Errorf("i-1 is %s for %q: touched by a claim that had no tokens", r.State, r.RunID)
			}
			if n := len(e.sqs.queuedIDs(t, largeURL)); n != 1 {
				t.Errorf("%d messages in the queue, want the runner's one untouched", n)
			}
		})
	}
}

// Two claims refreshing at once: the second writer loses the condition and
// keeps the first one's tokens instead of failing.
func TestTokensConcurrentRefreshKeepsTheWinner(t *testing.T) {
	t.Parallel()
	src := &fakeTokens{}
	e := tokenEnv(t, src)
	e.putTokenItem("octo/app", 40*time.Minute, time.Hour)
	winner := protocol.RegistrationToken{Target: "octo/app", Token: "winner", ExpiresAt: time.Now().Add(time.Hour), RemoveToken: "winner-rem", RemoveExpiresAt: time.Now().Add(time.Hour), FetchedAt: time.Now().Add(time.Second)}
	src.onFetch = func() { e.db.put(winner.Item()) }
	e.seedIdle("i-1", healthy)
	if _, err := e.create(1); err != nil {
		t.Fatal(err)
	}
	if tok, _ := e.tokenItem(); tok.Token != "winner" {
		t.Errorf("token item holds %q, want the concurrent winner's", tok.Token)
	}
}

// Release refreshes the removal token the agents deregister with, and
// releases even when GitHub cannot be reached.
func TestTokensOnRelease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		err       error
		wantToken string
	}{
		{"refreshed", nil, "registration-3"},
		{"gitHubDown", errors.New("HTTP 503"), "old-reg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &fakeTokens{}
			e := tokenEnv(t, src)
			e.claimed(t, map[string]behavior{"i-1": healthy})
			e.putTokenItem("octo/app", 31*time.Minute, time.Hour)
			src.err = tc.err
			outcomes, err := e.release()
			if err != nil {
				t.Fatal(err)
			}
			if len(outcomes) != 1 || outcomes[0] != "i-1: released to the pool" {
				t.Errorf("outcomes %q", outcomes)
			}
			if tok, _ := e.tokenItem(); tok.Token != tc.wantToken {
				t.Errorf("token item holds %q, want %q", tok.Token, tc.wantToken)
			}
		})
	}
}
