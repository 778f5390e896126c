package claim

import (
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// orgEnv is a pool whose runners register with the organization octo, with
// the provider's credentials for octo, which read its runner groups from
// the stub GitHub, and a warm runner i-1.
func orgEnv(t *testing.T) (*env, *scripttest.GitHub) {
	t.Helper()
	e := tokenEnv(t, &fakeTokens{})
	e.cfg.GitHub = &protocol.GitHubTarget{Owner: "octo"}
	e.writeConfig()
	e.agents.SetTarget("octo")
	gh := scripttest.NewGitHub(t)
	client, err := github.New(github.Config{BaseURL: gh.URL, Token: gh.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	e.c.GitHub.Groups = client
	e.seedIdle("i-1", healthy)
	return e, gh
}

// claimFor claims one runner in group ("": the default group) for
// repository.
func (e *env) claimFor(repository, group string) error {
	_, err := e.create(1, func(r *Request) { r.Repository, r.RunnerGroup = repository, group })
	return err
}

// A claim whose runner group would send none of its repository's jobs to
// its runners fails before it takes any, naming the group, the repository
// and what to change: a group of selected repositories without it, a
// group (the default one too) that refuses public repositories and a
// public repository, a group the organization does not have, and a
// repository of another owner.
func TestClaimRefusesARunnerGroupThatDoesNotAdmitItsRepository(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		setUp             func(*scripttest.GitHub)
		repository, group string
		want              []string
	}{
		"selected repositories without it": {
			setUp: func(gh *scripttest.GitHub) {
				gh.AddRunnerGroup("octo", "Trusted builds", scripttest.GroupAccess{SelectedRepositories: []string{"octo/infra"}})
			},
			repository: "octo/app", group: "trusted builds",
			want: []string{`runner group "Trusted builds" of organization octo admits only selected repositories, and octo/app is not one of them`, "Repository access"},
		},
		"public repository, default group": {
			setUp:      func(gh *scripttest.GitHub) { gh.AddRepository("octo/site", true) },
			repository: "octo/site",
			want:       []string{`runner group "Default" of organization octo does not allow public repositories, and octo/site is public`, "Allow public repositories"},
		},
		"public repository, group refusing public ones": {
			setUp: func(gh *scripttest.GitHub) {
				gh.AddRepository("octo/site", true)
				gh.AddRunnerGroup("octo", "Trusted builds", scripttest.GroupAccess{SelectedRepositories: []string{"octo/site"}})
			},
			repository: "octo/site", group: "Trusted builds",
			want: []string{`runner group "Trusted builds" of organization octo does not allow public repositories, and octo/site is public`},
		},
		"no such group": {
			setUp:      func(gh *scripttest.GitHub) { gh.AddRunnerGroup("octo", "Trusted builds", scripttest.GroupAccess{}) },
			repository: "octo/app", group: "Nightly",
			want: []string{`runner group "Nightly": organization octo has no such runner group (it has "Default", "Trusted builds")`},
		},
		"another owner's repository": {
			setUp:      func(*scripttest.GitHub) {},
			repository: "mallory/app",
			want:       []string{"the jobs of repository mallory/app cannot run on the runners of pool " + testPool},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, gh := orgEnv(t)
			tc.setUp(gh)
			err := e.claimFor(tc.repository, tc.group)
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("claim error = %v, want %q", err, want)
				}
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle || r.RunID != "" {
				t.Errorf("i-1 is %s for %q, want untouched", r.State, r.RunID)
			}
			if _, ok := e.claimRecord(); ok {
				t.Error("a claim record was written")
			}
		})
	}
}

// A claim whose runner group admits its repository takes its runners: a
// group of selected repositories with it, a group that allows public
// repositories and a public one, the default group and a private one.
func TestClaimInARunnerGroupThatAdmitsItsRepository(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		setUp             func(*scripttest.GitHub)
		repository, group string
		calls             []string
	}{
		"selected repositories with it": {
			setUp: func(gh *scripttest.GitHub) {
				gh.AddRepository("octo/app", false)
				gh.AddRunnerGroup("octo", "Trusted builds", scripttest.GroupAccess{SelectedRepositories: []string{"octo/infra", "Octo/App"}})
			},
			repository: "octo/app", group: "Trusted builds",
			calls: []string{"runner-groups octo", "runner-group-repositories octo", "repository octo/app"},
		},
		"public repository, group allowing public ones": {
			setUp: func(gh *scripttest.GitHub) {
				gh.AddRepository("octo/site", true)
				gh.AddRunnerGroup("octo", "Open source", scripttest.GroupAccess{AllowPublicRepositories: true})
			},
			repository: "octo/site", group: "Open source",
			calls: []string{"runner-groups octo"},
		},
		"private repository, default group": {
			setUp:      func(gh *scripttest.GitHub) { gh.AddRepository("octo/app", false) },
			repository: "octo/app",
			calls:      []string{"runner-groups octo", "repository octo/app"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, gh := orgEnv(t)
			tc.setUp(gh)
			if err := e.claimFor(tc.repository, tc.group); err != nil {
				t.Fatal(err)
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateRunning || r.RunID != testRun {
				t.Errorf("i-1 is %s for %q, want running for %s", r.State, r.RunID, testRun)
			}
			if got := strings.Join(gh.APICalls(), ", "); got != strings.Join(tc.calls, ", ") {
				t.Errorf("asked GitHub %s, want %s", got, strings.Join(tc.calls, ", "))
			}
		})
	}
}

// Credentials that may not read the organization's runner groups cannot
// check: the claim goes ahead, as without the check, and says so in the
// log.
func TestClaimWithoutPermissionToReadRunnerGroupsProceeds(t *testing.T) {
	t.Parallel()
	e, gh := orgEnv(t)
	gh.AddRunnerGroup("octo", "Trusted builds", scripttest.GroupAccess{SelectedRepositories: []string{"octo/infra"}})
	gh.DenyRunnerGroupReads(true)
	logs := e.captureLogs()
	if err := e.claimFor("octo/app", "Trusted builds"); err != nil {
		t.Fatal(err)
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateRunning || r.RunID != testRun {
		t.Errorf("i-1 is %s for %q, want running for %s", r.State, r.RunID, testRun)
	}
	if want := `cannot check that the runner group admits the claim's repository`; !strings.Contains(logs(), want) ||
		!strings.Contains(logs(), `organization permission "Self-hosted runners" (read)`) {
		t.Errorf("log lacks %q and the permission:\n%s", want, logs())
	}
}
