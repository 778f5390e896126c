package claim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// tokenEnv is a pool whose runners register with octo/app, and whose
// agents need a token for each run; tokens, when not nil, are the
// provider's credentials, for owner octo.
func tokenEnv(t *testing.T, tokens TokenSource) *env {
	t.Helper()
	e := newEnv(t)
	e.w.RegisterWith(&e.cfg, protocol.GitHubTarget{Owner: "octo", Repository: "app"})
	if tokens != nil {
		e.c.GitHub = &GitHubAccess{Tokens: tokens, Owner: "octo"}
	}
	return e
}

// assertToken checks that instance id holds the token sk with value for
// the test run and octo/app.
func (e *env) assertToken(t *testing.T, id, sk, value string) {
	t.Helper()
	tok, ok := e.token(id, sk)
	switch {
	case !ok:
		t.Errorf("%s holds no %s", id, sk)
	case tok.Token != value || tok.RunID != testRun || tok.Target != "octo/app" || tok.InstanceARN != arn(id):
		t.Errorf("%s's %s = %+v, want %s for %s and octo/app", id, sk, tok, value, testRun)
	case time.Until(tok.ExpiresAt) < 55*time.Minute:
		t.Errorf("%s's %s expires at %v, want GitHub's hour", id, sk, tok.ExpiresAt)
	}
}

// One registration token per claim, handed to every runner before it is
// given the run: the agents register only with a token for their
// record's run in their partition at that moment.
func TestRegistrationTokenHandedToEachWarmRunner(t *testing.T) {
	t.Parallel()
	src := &fakeTokens{}
	e := tokenEnv(t, src)
	e.seedMany(3)
	res, err := e.create(3)
	if err != nil {
		t.Fatal(err)
	}
	e.assertComplete(t, res, 3)
	if got := src.Issued(); !slices.Equal(got, []string{"registration octo/app"}) {
		t.Errorf("GitHub calls %q, want one registration token for the claim", got)
	}
	for _, id := range []string{"i-00", "i-01", "i-02"} {
		e.assertToken(t, id, protocol.SortKeyRegistrationToken, "registration-1")
	}
	// Written in one call, before the transaction that claims them.
	e.db.Mu.Lock()
	calls := slices.Clone(e.db.Calls)
	e.db.Mu.Unlock()
	put := slices.IndexFunc(calls, func(c awsfake.Call) bool { return c.Op == "BatchWriteItem" })
	claim := slices.IndexFunc(calls, func(c awsfake.Call) bool { return isClaimOf(c.In, "i-00") })
	if put < 0 || claim < 0 || put > claim || e.db.Count("BatchWriteItem") != 1 {
		t.Errorf("BatchWriteItem at call %d (%d calls), claim at %d: want one write of the tokens before the claim", put, e.db.Count("BatchWriteItem"), claim)
	}
}

// Launched runners get the token before their created record names the run.
func TestRegistrationTokenHandedToEachLaunchedRunner(t *testing.T) {
	t.Parallel()
	src := &fakeTokens{}
	e := tokenEnv(t, src)
	res, err := e.create(2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Created != 2 {
		t.Fatalf("result %+v, want two launched", res)
	}
	for _, id := range ids(res.Instances) {
		e.assertToken(t, id, protocol.SortKeyRegistrationToken, "registration-1")
	}
	if got := src.Issued(); !slices.Equal(got, []string{"registration octo/app"}) {
		t.Errorf("GitHub calls %q, want one registration token", got)
	}
}

// Throttled writes leave items unprocessed: they are written again.
func TestRegistrationTokensUnprocessedAreRetried(t *testing.T) {
	t.Parallel()
	e := tokenEnv(t, &fakeTokens{})
	e.db.UnprocessedWrites = 2
	e.seedMany(3)
	res, err := e.create(3)
	if err != nil {
		t.Fatal(err)
	}
	e.assertComplete(t, res, 3)
	if n := e.db.Count("BatchWriteItem"); n != 3 {
		t.Errorf("%d BatchWriteItem calls, want 3 (two left an item unprocessed)", n)
	}
}

// Tokens that cannot be handed over fail the claim before it claims the
// runners; they go back to the pool untouched.
func TestRegistrationTokenNotWrittenFailsBeforeClaiming(t *testing.T) {
	t.Parallel()
	e := tokenEnv(t, &fakeTokens{})
	e.db.Fail("BatchWriteItem", 1, errors.New("AccessDeniedException"))
	e.seedIdle("i-1", healthy)
	_, err := e.create(1)
	if err == nil || !strings.Contains(err.Error(), "handing the registration token of run "+testRun) {
		t.Fatalf("claim error = %v, want the token write named", err)
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle || r.RunID != "" {
		t.Errorf("i-1 is %s for %q, want untouched", r.State, r.RunID)
	}
	e.assertNothingHeld(t)
}

// A pool without a GitHub target gets no tokens: no GitHub call, no write.
func TestNoTokensWithoutGitHubTarget(t *testing.T) {
	t.Parallel()
	src := &fakeTokens{}
	e := newEnv(t)
	e.c.GitHub = &GitHubAccess{Tokens: src, Owner: "octo"}
	e.claimed(t, map[string]behavior{"i-1": healthy})
	if _, err := e.release(); err != nil {
		t.Fatal(err)
	}
	if got := src.Issued(); len(got) != 0 || e.db.Count("BatchWriteItem") != 0 {
		t.Errorf("GitHub calls %q, %d token writes; want none", got, e.db.Count("BatchWriteItem"))
	}
	if _, ok := e.token("i-1", protocol.SortKeyRegistrationToken); ok {
		t.Error("i-1 holds a registration token")
	}
}

// A claim that cannot mint the pool's tokens fails before it touches a
// runner, saying which setting of the provider's github block is missing
// or does not match.
func TestRegistrationTokenRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		access  *GitHubAccess
		target  protocol.GitHubTarget
		wantErr []string
	}{
		{"noCredentials", nil, protocol.GitHubTarget{Owner: "octo", Repository: "app"},
			[]string{"pool testpool registers its runners with GitHub octo/app", "configure the provider's github block"}},
		{"noOwner", &GitHubAccess{Tokens: &fakeTokens{}}, protocol.GitHubTarget{Owner: "octo", Repository: "app"},
			[]string{"github.owner is not set (nor GITHUB_REPOSITORY_OWNER)", `set github.owner = "octo"`}},
		{"otherOwner", &GitHubAccess{Tokens: &fakeTokens{}, Owner: "mallory"}, protocol.GitHubTarget{Owner: "octo", Repository: "app"},
			[]string{"GitHub octo/app", `github.owner = "mallory"`, "github.repository = any repository of the owner"}},
		{"otherRepository", &GitHubAccess{Tokens: &fakeTokens{}, Owner: "octo", Repository: "site"}, protocol.GitHubTarget{Owner: "octo", Repository: "app"},
			[]string{"GitHub octo/app", `github.owner = "octo"`, `github.repository = "site"`}},
		{"organizationWhenRepositorySet", &GitHubAccess{Tokens: &fakeTokens{}, Owner: "octo", Repository: "app"}, protocol.GitHubTarget{Owner: "octo"},
			[]string{"GitHub octo,", `github.repository = "app"`}},
		{"gitHubDown", &GitHubAccess{Tokens: &fakeTokens{Err: errors.New("HTTP 503")}, Owner: "octo"}, protocol.GitHubTarget{Owner: "octo", Repository: "app"},
			[]string{"cannot get a runner registration token for octo/app: HTTP 503"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := tokenEnv(t, nil)
			e.cfg.GitHub = &tc.target
			e.writeConfig()
			e.c.GitHub = tc.access
			e.seedIdle("i-1", healthy)
			_, err := e.create(1)
			for _, want := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("claim error = %v, want it to say %q", err, want)
				}
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle || r.RunID != "" {
				t.Errorf("i-1 is %s for %q: touched by a claim that had no token", r.State, r.RunID)
			}
			if n := len(e.sqs.ReceiveInputs()); n != 0 {
				t.Errorf("%d receives from the queue, want none", n)
			}
			if _, ok := e.claimRecord(); ok {
				t.Error("a claim record was written")
			}
		})
	}
}

// The owner and repository match as GitHub compares names: ignoring case.
func TestRegistrationTokenTargetMatchIgnoresCase(t *testing.T) {
	t.Parallel()
	e := tokenEnv(t, nil)
	e.c.GitHub = &GitHubAccess{Tokens: &fakeTokens{}, Owner: "Octo", Repository: "APP"}
	e.seedIdle("i-1", healthy)
	if _, err := e.create(1); err != nil {
		t.Fatal(err)
	}
}

// One removal token per release, handed to every runner before it is told
// to leave: the agents deregister only with a token for the run they
// leave.
func TestRemovalTokenHandedToEachReleasedRunner(t *testing.T) {
	t.Parallel()
	src := &fakeTokens{}
	e := tokenEnv(t, src)
	e.claimed(t, map[string]behavior{"i-1": healthy, "i-2": healthy})
	writes := e.db.Count("BatchWriteItem")
	outcomes, err := e.release()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(outcomes, []string{"i-1: released to the pool", "i-2: released to the pool"}) {
		t.Errorf("outcomes %q", outcomes)
	}
	if got := src.Issued(); !slices.Equal(got, []string{"registration octo/app", "remove octo/app"}) {
		t.Errorf("GitHub calls %q, want one registration and one removal token", got)
	}
	for _, id := range []string{"i-1", "i-2"} {
		e.assertToken(t, id, protocol.SortKeyRemovalToken, "remove-2")
	}
	if n := e.db.Count("BatchWriteItem") - writes; n != 1 {
		t.Errorf("%d BatchWriteItem calls for the release, want 1", n)
	}
}

// A release never fails for tokens: without a removal token a runner
// cannot deregister from GitHub, and is terminated instead of going back
// to the pool with a stale registration.
func TestReleaseWithoutRemovalTokenTerminates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		change  func(*env, *fakeTokens)
		wantWhy string
	}{
		{"noCredentials", func(e *env, _ *fakeTokens) { e.c.GitHub = nil }, "configure the provider's github block"},
		{"gitHubDown", func(_ *env, src *fakeTokens) { src.Err = errors.New("HTTP 503") }, "HTTP 503"},
		{"tokenNotWritten", func(e *env, _ *fakeTokens) {
			e.db.FailIf = func(op string, _ any) error {
				if op == "BatchWriteItem" {
					return errors.New("AccessDeniedException")
				}
				return nil
			}
		}, "AccessDeniedException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &fakeTokens{}
			e := tokenEnv(t, src)
			e.claimed(t, map[string]behavior{"i-1": healthy})
			tc.change(e, src)
			sends := e.sqs.Count("SendMessageBatch")
			outcomes, err := e.release()
			if err != nil {
				t.Fatalf("Release = %v: a release must not fail for tokens", err)
			}
			if len(outcomes) != 1 || !strings.Contains(outcomes[0], "cannot deregister from GitHub") ||
				!strings.Contains(outcomes[0], tc.wantWhy) || !strings.HasSuffix(outcomes[0], "; terminated") {
				t.Errorf("outcomes %q, want i-1 terminated because it cannot deregister (%s)", outcomes, tc.wantWhy)
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateTerminated || !slices.Contains(e.ec2.TerminatedIDs(), "i-1") {
				t.Errorf("i-1 is %s (terminated in EC2: %v), want terminated", r.State, e.ec2.TerminatedIDs())
			}
			if n := e.sqs.Count("SendMessageBatch") - sends; n != 0 {
				t.Errorf("%d messages sent: a runner that cannot deregister went back to the pool", n)
			}
			if _, ok := e.claimRecord(); ok {
				t.Error("the claim record is still there")
			}
		})
	}
}

// Each claim's runners register with a label of its own, the run id and a
// secret, handed only with their registration token: two claims of one run
// id (one released, the next made) share no label, and the runners of an
// organization's pool join the claim's runner group.
func TestClaimLabelAndRunnerGroupHandedWithTheToken(t *testing.T) {
	t.Parallel()
	e := tokenEnv(t, &fakeTokens{})
	e.cfg.GitHub = &protocol.GitHubTarget{Owner: "octo"}
	e.writeConfig()
	e.agents.SetTarget("octo")
	e.seedMany(2)
	var labels []string
	for range 2 {
		res, err := e.create(2, func(r *Request) { r.RunnerGroup = "Trusted builds" })
		if err != nil {
			t.Fatal(err)
		}
		if err := protocol.ValidateLabel(testRun, res.Label); err != nil || res.Label == testRun {
			t.Fatalf("label %q: %v, want %s-<secret>", res.Label, err, testRun)
		}
		for _, id := range ids(res.Instances) {
			tok, _ := e.token(id, protocol.SortKeyRegistrationToken)
			if tok.Label != res.Label || tok.RunnerGroup != "Trusted builds" {
				t.Errorf("%s's registration token carries label %q, group %q; want %q, Trusted builds", id, tok.Label, tok.RunnerGroup, res.Label)
			}
			if reg := e.agents.Registered(id); reg == nil || reg.Label != res.Label || reg.RunnerGroup != "Trusted builds" {
				t.Errorf("%s registered with %+v, want label %q in Trusted builds", id, reg, res.Label)
			}
		}
		rec, _, ok, err := e.c.Read(context.Background(), testPool, testRun)
		if err != nil || !ok || rec.Request.Label != res.Label || rec.Request.RunnerGroup != "Trusted builds" {
			t.Errorf("claim record %+v (%v, found %v), want label %q and group Trusted builds", rec.Request, err, ok, res.Label)
		}
		labels = append(labels, res.Label)
		if _, err := e.release(); err != nil {
			t.Fatal(err)
		}
	}
	if labels[0] == labels[1] {
		t.Errorf("two claims of run %s took one label, %q", testRun, labels[0])
	}
}

// A runner group for a pool whose runners register with a repository, or
// with no GitHub at all, is refused before any runner is touched.
func TestRunnerGroupRefusedWithoutOrganization(t *testing.T) {
	t.Parallel()
	for name, target := range map[string]*protocol.GitHubTarget{
		"repository": {Owner: "octo", Repository: "app"},
		"no GitHub":  nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := tokenEnv(t, &fakeTokens{})
			e.cfg.GitHub = target
			e.writeConfig()
			e.seedIdle("i-1", healthy)
			_, err := e.create(1, func(r *Request) { r.RunnerGroup = "Trusted" })
			if err == nil || !strings.Contains(err.Error(), `runner group "Trusted"`) {
				t.Fatalf("claim error = %v, want the runner group refused", err)
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle || r.RunID != "" {
				t.Errorf("i-1 is %s for %q, want untouched", r.State, r.RunID)
			}
		})
	}
}

// A runner that registered with another label than its claim's, or with
// the run id alone (an agent older than labels with a secret), would get
// none of the claim's jobs, or those of any job that names the run id: it
// fails at once.
func TestRegisteredRequiresTheClaimsLabel(t *testing.T) {
	t.Parallel()
	now := time.Now()
	reg := registration{runID: testRun, label: testRun + "-abcdefgh23456"}
	for _, tc := range []struct {
		name, label, wantErr string
	}{
		{"claim's label", reg.label, ""},
		{"another label", testRun + "-bbbbbbbb23456", "another label than the claim's"},
		{"run id alone", "", "older than this provider"},
	} {
		st := agentState{heartbeat: now, signal: protocol.Signal{State: protocol.SignalRegistered, RunID: testRun, Label: tc.label}}
		done, err := registered(reg, time.Minute, true, testTimings(), nil)(st, view{now: now, deadline: now.Add(time.Minute), since: now})
		switch {
		case !done:
			t.Errorf("%s: undecided, want decided at once", tc.name)
		case tc.wantErr == "" && err != nil, tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	// A pool without a GitHub target hands no label: the run's signal is enough.
	st := agentState{heartbeat: now, signal: protocol.Signal{State: protocol.SignalRegistered, RunID: testRun}}
	if done, err := registered(registration{runID: testRun}, time.Minute, true, testTimings(), nil)(st, view{now: now, deadline: now.Add(time.Minute), since: now}); !done || err != nil {
		t.Errorf("no label handed: %v, %v; want registered", done, err)
	}
}
