package claim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// orgPool makes e's pool register its runners with organization octo, and
// its agents take the tokens of octo/app: the target the claims of these
// tests register with (RegisterWithRepository). The agents are configured
// with that target here: the agent takes only tokens for its configured
// target (internal/agent, Agent.token), and registers there.
func orgPool(e *env) {
	e.cfg.GitHub = &protocol.GitHubTarget{Owner: "octo"}
	e.writeConfig()
	e.agents.target = "octo/app"
}

// registerWithApp makes a claim for attempt 1 of workflow run 7 of
// octo/app register its runners with octo/app, as the broker's claims do.
func registerWithApp(r *Request) {
	r.Repository, r.WorkflowRun, r.RegisterWithRepository = "octo/app", WorkflowRun{ID: 7, Attempt: 1}, true
}

// A claim that registers with its repository has its runners register
// with octo/app, not with the pool's organization (whose runners any
// repository's `group:` or label can reach), and its release deregisters
// them from octo/app: the tokens are minted for that target, and the claim
// record keeps it for the release. A direct claim of the same pool
// registers with the organization, as before.
func TestClaimRegistersWithItsRepository(t *testing.T) {
	t.Parallel()
	src := &fakeTokens{}
	e := tokenEnv(t, src)
	orgPool(e)
	e.seedMany(2)
	res, err := e.create(2, registerWithApp)
	if err != nil {
		t.Fatal(err)
	}
	if got := src.issued(); !slices.Equal(got, []string{"registration octo/app"}) {
		t.Errorf("GitHub calls %q, want a registration token for octo/app alone", got)
	}
	for _, id := range ids(res.Instances) {
		if tok, _ := e.token(id, protocol.SortKeyRegistrationToken); tok.Target != "octo/app" {
			t.Errorf("%s's registration token is for %q, want octo/app", id, tok.Target)
		}
	}
	if rec, _ := e.claimRecord(); !rec.Request.RegisterWithRepository || rec.Request.Repository != "octo/app" {
		t.Errorf("claim record %+v, want it to register with octo/app", rec.Request)
	}
	if _, err := e.release(); err != nil {
		t.Fatal(err)
	}
	if got := src.issued(); !slices.Equal(got, []string{"registration octo/app", "remove octo/app"}) {
		t.Errorf("GitHub calls %q, want the removal token for octo/app too", got)
	}
	for _, id := range ids(res.Instances) {
		if tok, _ := e.token(id, protocol.SortKeyRemovalToken); tok.Target != "octo/app" {
			t.Errorf("%s's removal token is for %q, want octo/app", id, tok.Target)
		}
	}

	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		src := &fakeTokens{}
		e := tokenEnv(t, src)
		orgPool(e)
		e.agents.target = "octo"
		e.seedIdle("i-1", healthy)
		if _, err := e.create(1, func(r *Request) { r.Repository = "octo/app" }); err != nil {
			t.Fatal(err)
		}
		if got := src.issued(); !slices.Equal(got, []string{"registration octo"}) {
			t.Errorf("GitHub calls %q, want a direct claim's runners registered with the organization", got)
		}
	})
}

// The runners of a pool register only with its GitHub owner's
// repositories: a claim for another owner's repository is refused before
// any token is minted or runner touched, and a runner group (an
// organization's) with one that registers with its repository.
func TestClaimRegisteringWithRepositoryRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		change  func(*Request)
		wantErr string
	}{
		{"another owner", func(r *Request) { r.Repository = "mallory/app" }, "cannot register with repository mallory/app: pool testpool registers its runners with GitHub owner octo"},
		{"runner group", func(r *Request) { r.RunnerGroup = "Trusted" }, `runner group "Trusted": the runners of run run-1 register with its repository`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &fakeTokens{}
			e := tokenEnv(t, src)
			orgPool(e)
			e.seedIdle("i-1", healthy)
			_, err := e.create(1, registerWithApp, tc.change)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("claim error = %v, want %q", err, tc.wantErr)
			}
			if got := src.issued(); len(got) != 0 {
				t.Errorf("GitHub calls %q, want none", got)
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle || r.RunID != "" {
				t.Errorf("i-1 is %s for %q, want untouched", r.State, r.RunID)
			}
		})
	}
}

// A claim that registers with its repository never adopts, waits for or
// cleans up the claim record of another repository's claim of the same
// run id, nor one made directly: it would hand over that claim's runners
// and label.
func TestClaimOfAnotherRepositorysRunIDRefused(t *testing.T) {
	t.Parallel()
	for name, other := range map[string]func(*Request){
		"another repository": func(r *Request) { registerWithApp(r); r.Repository = "octo/web" },
		"a direct claim":     func(r *Request) { r.Repository = "octo/app" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t) // no GitHub target: the runners need no token
			e.seedMany(2)
			first, err := e.create(1, other)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.create(1, registerWithApp)
			if !errors.Is(err, ErrOtherRepository) || res != nil {
				t.Fatalf("claim = %+v, %v; want %v", res, err, ErrOtherRepository)
			}
			if strings.Contains(err.Error(), first.Label) || strings.Contains(err.Error(), "octo/web") {
				t.Errorf("the refusal %q describes the other claim", err)
			}
			if rec, _ := e.claimRecord(); rec.Request.Label != first.Label || rec.State != recordComplete {
				t.Errorf("claim record %+v, want the first claim's, untouched", rec)
			}
		})
	}
}

// The pool's maintenance deregisters the runners of a claim whose run
// ended from the claim's repository, and revives a released claim for a
// re-run with runners registered there again: both read the target from
// the claim record (or the released claim's marker).
func TestMaintenanceRegistersWithTheClaimsRepository(t *testing.T) {
	t.Parallel()
	t.Run("ended run", func(t *testing.T) {
		t.Parallel()
		e, gh, _ := runsEnv(t, "")
		orgPool(e)
		src := e.c.GitHub.Tokens.(*fakeTokens)
		gh.StartRunAttempt("octo/app", 7, 1)
		e.claimForRun("run-7-1", "i-1", 7, registerWithApp)
		gh.CompleteRunAttempt("octo/app", 7, 1)
		if res := e.reap(); !slices.Equal(res.EndedRuns, []string{"run-7-1"}) {
			t.Fatalf("released %v, want [run-7-1]", res.EndedRuns)
		}
		if got := src.issued(); !slices.Equal(got, []string{"registration octo/app", "remove octo/app"}) {
			t.Errorf("GitHub calls %q, want the removal token for octo/app", got)
		}
	})
	t.Run("revival", func(t *testing.T) {
		t.Parallel()
		e, gh, _ := runsEnv(t, "")
		orgPool(e)
		src := e.c.GitHub.Tokens.(*fakeTokens)
		gh.StartRunAttempt("octo/app", 7, 1)
		e.claimForRun("run-7-1", "i-1", 7, registerWithApp)
		label := e.recordOf(t, "run-7-1").Request.Label
		if _, err := e.c.Release(context.Background(), testPool, "run-7-1"); err != nil {
			t.Fatal(err)
		}
		gh.CompleteRunAttempt("octo/app", 7, 1)
		gh.StartRunAttempt("octo/app", 7, 2)
		gh.QueueRunJob("octo/app", 7, 2, label)
		if res := e.reap(); !slices.Equal(res.RevivedRuns, []string{"run-7-1"}) {
			t.Fatalf("revived %v, want [run-7-1]", res.RevivedRuns)
		}
		if got := src.issued(); !slices.Equal(got, []string{"registration octo/app", "remove octo/app", "registration octo/app"}) {
			t.Errorf("GitHub calls %q, want the revival's registration token for octo/app", got)
		}
		if rec := e.recordOf(t, "run-7-1"); !rec.Request.RegisterWithRepository {
			t.Errorf("revived claim %+v, want it to register with octo/app", rec.Request)
		}
	})
}
