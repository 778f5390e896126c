package broker

import (
	"cmp"
	"errors"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// poolWithAccess is pool builds, whose claims run for at most an hour unless
// they ask for less, with the given access entries.
func poolWithAccess(entries ...protocol.RepositoryAccess) protocol.PoolConfig {
	cfg := protocol.PoolConfig{Name: "builds", MaxRuntime: protocol.Duration(time.Hour), InstanceARNPrefix: "arn:aws:ec2:eu-west-1:123456789012:instance/",
		ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}, "xlarge": {CPU: 4, MemoryMiB: 8192}}}
	if entries != nil {
		cfg.Access = &protocol.Access{Repositories: entries}
	}
	return cfg
}

// appJob is the identity of a job of octo/app's CI workflow on main.
var appJob = Identity{Repository: "octo/app", Owner: "octo", RunID: 4242, RunAttempt: 1,
	WorkflowRef: "octo/app/.github/workflows/ci.yml@refs/heads/main", JobWorkflowRef: "octo/app/.github/workflows/ci.yml@refs/heads/main"}

// assertError checks that err is an *Error of kind with message.
func assertError(t *testing.T, err error, kind, message string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Kind != kind || e.Message != message {
		t.Errorf("error %#v (%v)\nwant %s: %s", e, err, kind, message)
	}
}

// The pool's access policy names the repositories that may claim (as
// GitHub compares names, ignoring case), and optionally their workflows;
// every other caller is denied, told which repository, pool and
// attribute refused it.
func TestAdmit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		cfg       protocol.PoolConfig
		workflow  string
		wantError string
	}{
		{name: "listed", cfg: poolWithAccess(protocol.RepositoryAccess{Repository: "octo/app"})},
		{name: "listed in another case", cfg: poolWithAccess(protocol.RepositoryAccess{Repository: "Octo/App"})},
		{name: "workflow matches", cfg: poolWithAccess(protocol.RepositoryAccess{Repository: "octo/app",
			Workflows: []string{"octo/app/.github/workflows/release.yml@*", "octo/app/.github/workflows/*@refs/heads/main"}})},
		{name: "no policy", cfg: poolWithAccess(),
			wantError: "pool builds has no access policy, so its broker serves no repository (set the access attribute of its ec2runners_pool)"},
		{name: "not listed", cfg: poolWithAccess(protocol.RepositoryAccess{Repository: "octo/web"}, protocol.RepositoryAccess{Repository: "mallory/app"}),
			wantError: `repository octo/app may not claim runners of pool builds: the pool's access has no entry with repository = "octo/app"`},
		{name: "workflow does not match", cfg: poolWithAccess(protocol.RepositoryAccess{Repository: "octo/app",
			Workflows: []string{"octo/app/.github/workflows/release.yml@*", "octo/app/.github/workflows/ci.yml@refs/tags/*"}}),
			wantError: `workflow octo/app/.github/workflows/ci.yml@refs/heads/main of repository octo/app may not claim runners of pool builds: its access entry's workflows = ["octo/app/.github/workflows/release.yml@*", "octo/app/.github/workflows/ci.yml@refs/tags/*"] match none of it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := admit(tc.cfg, appJob)
			if tc.wantError != "" {
				assertError(t, err, ErrorDenied, tc.wantError)
				return
			}
			if err != nil || g.entry.Repository == "" {
				t.Fatalf("admit = %+v, %v; want admitted", g, err)
			}
		})
	}
}

// '*' matches any run of characters, '/' included; every other character
// only itself.
func TestGlobMatch(t *testing.T) {
	t.Parallel()
	ref := "octo/app/.github/workflows/ci.yml@refs/heads/main"
	for glob, want := range map[string]bool{
		ref:                                     true,
		"*":                                     true,
		"octo/app/*":                            true,
		"*@refs/heads/main":                     true,
		"octo/*/.github/workflows/ci.yml@*":     true,
		"octo/app/*.yml@refs/heads/*":           true,
		"octo/*/*/ci.yml*main":                  true,
		"*ci.yml*ci.yml*":                       false,
		"octo/app/.github/workflows/ci.yml":     false, // the ref too
		"octo/app/.github/workflows/ci.yml@*x":  false,
		"octo/app/.github/workflows/c?.yml@*":   false, // '?' is itself
		"Octo/app/.github/workflows/ci.yml@*":   false,
		"octo/app/.github/workflows/ci.yml@**n": true,
		"octo/app/.github/workflows/*/ci.yml@*": false,
		"":                                      false,
	} {
		if got := globMatch(glob, ref); got != want {
			t.Errorf("globMatch(%q) = %v, want %v", glob, got, want)
		}
	}
}

// Each cap of a repository's access entry refuses a claim over it, naming
// the repository, the pool, the cap's attribute and its value.
func TestCheckClaim(t *testing.T) {
	t.Parallel()
	entry := protocol.RepositoryAccess{Repository: "octo/app", MaxRunners: 4, MaxRuntime: protocol.Duration(2 * time.Hour), ResourceClasses: []string{"large"}}
	request := func(change func(*claim.Request)) claim.Request {
		r := claim.Request{Pool: "builds", RunID: "run-1", InstanceCount: 2, ResourceClass: "large", MaxRuntime: 90 * time.Minute}
		change(&r)
		return r
	}
	for _, tc := range []struct {
		name            string
		entry           func(*protocol.RepositoryAccess)
		pool            time.Duration // the pool's max runtime
		req             func(*claim.Request)
		kind, wantError string
	}{
		{name: "within", req: func(*claim.Request) {}},
		{name: "at the caps", req: func(r *claim.Request) { r.InstanceCount, r.MaxRuntime = 4, 2*time.Hour }},
		{name: "no caps", entry: func(e *protocol.RepositoryAccess) { *e = protocol.RepositoryAccess{Repository: "octo/app"} },
			req: func(r *claim.Request) { r.InstanceCount, r.MaxRuntime, r.ResourceClass = 100, 7*24*time.Hour, "xlarge" }},
		{name: "pool's runtime within", pool: time.Hour, req: func(r *claim.Request) { r.MaxRuntime = 0 }},
		{name: "resource class", req: func(r *claim.Request) { r.ResourceClass = "xlarge" },
			kind: ErrorDenied, wantError: `repository octo/app may not claim resource class "xlarge" of pool builds: its access entry's resource_classes = ["large"]`},
		{name: "max runtime", req: func(r *claim.Request) { r.MaxRuntime = 3 * time.Hour },
			kind: ErrorOverCap, wantError: `repository octo/app may claim runners of pool builds for at most 2h each (access max_runtime = "2h"); this claim asks for 3h`},
		{name: "pool's max runtime", pool: 6 * time.Hour, req: func(r *claim.Request) { r.MaxRuntime = 0 },
			kind: ErrorOverCap, wantError: `repository octo/app may claim runners of pool builds for at most 2h each (access max_runtime = "2h"); this claim asks for none, so the pool's 6h`},
		{name: "max runners alone", req: func(r *claim.Request) { r.InstanceCount = 5 },
			kind: ErrorOverCap, wantError: "repository octo/app may hold at most 4 runners of pool builds at once (access max_runners = 4); it holds 0 and asks for 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := entry
			if tc.entry != nil {
				tc.entry(&e)
			}
			cfg := poolWithAccess(e)
			cfg.MaxRuntime = protocol.Duration(cmp.Or(tc.pool, time.Hour))
			g, err := admit(cfg, appJob)
			if err != nil {
				t.Fatal(err)
			}
			err = g.checkClaim(request(tc.req))
			if tc.wantError == "" {
				if err != nil {
					t.Errorf("checkClaim = %v, want allowed", err)
				}
				return
			}
			assertError(t, err, tc.kind, tc.wantError)
		})
	}
}

// max_runners counts the runners the repository holds with those it asks
// for.
func TestCheckRunners(t *testing.T) {
	t.Parallel()
	g := grant{cfg: poolWithAccess(), entry: protocol.RepositoryAccess{Repository: "octo/app", MaxRunners: 4}}
	if err := g.checkRunners(2, 2); err != nil {
		t.Errorf("2 held, 2 asked: %v, want allowed", err)
	}
	assertError(t, g.checkRunners(3, 2), ErrorOverCap, "repository octo/app may hold at most 4 runners of pool builds at once (access max_runners = 4); it holds 3 and asks for 2")
	if err := (grant{cfg: poolWithAccess(), entry: protocol.RepositoryAccess{Repository: "octo/app"}}).checkRunners(1000, 1000); err != nil {
		t.Errorf("no max_runners: %v, want allowed", err)
	}
}
