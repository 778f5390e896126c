package claim

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agenttest"
)

// orgPool makes e's pool register its runners with organization octo, its
// agents configured for octo and with the pool's broker, which they ask
// for each job's registration when a claim hands them grants (the claims
// through the broker, RegisterWithRepository).
func orgPool(e *env) *agenttest.Broker {
	e.w.RegisterWith(&e.cfg, protocol.GitHubTarget{Owner: "octo"})
	b := &agenttest.Broker{}
	e.agents.SetBroker(b)
	return b
}

// registerWithApp makes a claim for attempt 1 of workflow run 7 of
// octo/app register its runners with octo/app, as the broker's claims do.
func registerWithApp(r *Request) {
	r.Repository, r.WorkflowRun, r.RegisterWithRepository = "octo/app", WorkflowRun{ID: 7, Attempt: 1}, true
}

// A claim that registers with its repository hands each runner a grant
// for octo/app, not for the pool's organization (whose runners any
// repository's `group:` or label can reach): the agents register each job
// there through the broker, and the claim asks GitHub for no token. Its
// release asks for none either: the agents have the broker delete their
// registrations. A direct claim of the same pool registers with the
// organization, with a token, as before.
func TestClaimRegistersWithItsRepository(t *testing.T) {
	t.Parallel()
	src := &fakeTokens{}
	e := tokenEnv(t, src)
	broker := orgPool(e)
	e.seedMany(2)
	res, err := e.create(2, registerWithApp)
	if err != nil {
		t.Fatal(err)
	}
	if got := src.Issued(); len(got) != 0 {
		t.Errorf("GitHub calls %q, want none: the agents register each job through the broker", got)
	}
	for _, id := range ids(res.Instances) {
		g, err := protocol.RegistrationGrantFromItem(e.db.getAgent(id, protocol.SortKeyRegistrationGrant))
		if err != nil || g.Target != "octo/app" || g.Label != res.Label {
			t.Errorf("%s's grant %+v (%v), want one for octo/app with the claim's label", id, g, err)
		}
	}
	presented := broker.Presented()
	if len(presented) != 2 {
		t.Fatalf("the agents asked the broker %d times, want once each", len(presented))
	}
	for _, g := range presented {
		if g.Target != "octo/app" {
			t.Errorf("an agent asked for a registration at %q, want octo/app", g.Target)
		}
	}
	if rec, _ := e.claimRecord(); !rec.Request.RegisterWithRepository || rec.Request.Repository != "octo/app" {
		t.Errorf("claim record %+v, want it to register with octo/app", rec.Request)
	}
	if _, err := e.release(); err != nil {
		t.Fatal(err)
	}
	if got := src.Issued(); len(got) != 0 {
		t.Errorf("GitHub calls %q, want none at release either", got)
	}
	if got := broker.Deregistered(); len(got) != 2 {
		t.Errorf("the broker deleted registrations %v, want each agent's", got)
	}

	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		src := &fakeTokens{}
		e := tokenEnv(t, src)
		orgPool(e)
		e.seedIdle("i-1", healthy)
		if _, err := e.create(1, func(r *Request) { r.Repository = "octo/app" }); err != nil {
			t.Fatal(err)
		}
		if got := src.Issued(); !slices.Equal(got, []string{"registration octo"}) {
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
			if got := src.Issued(); len(got) != 0 {
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
			e := newEnv(t) // no GitHub target: the runners register nowhere
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
