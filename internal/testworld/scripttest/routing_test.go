package scripttest

import (
	"net/http"
	"testing"
	"time"
)

// GitHub sends a job only to a runner its repository may use: a
// repository's runner takes only its repository's jobs, by whatever
// runs-on; an organization's runner only those of the repositories its
// group lets in (the default group: all private ones); group: restricts a
// job to its group's runners; and a runner must have every label. Each
// case queues one job in a fresh world and polls the runners in order,
// the wrong ones first: the job must land on the runner the case names, or
// on none, the first in that order that Routes says it reaches.
func TestGitHub_routesJobsAsGitHub(t *testing.T) {
	// world: runners in the order they poll.
	world := func(t *testing.T) *GitHub {
		g := NewGitHub(t)
		g.pollWait = 100 * time.Millisecond // a runner GitHub sends nothing waits this long
		g.AddRepository("octo/site", true)
		g.AddRunnerGroup("octo", "Trusted builds", GroupAccess{SelectedRepositories: []string{"octo/app"}})
		g.AddRunnerGroup("octo", "Open", GroupAccess{AllowPublicRepositories: true})
		for _, r := range []struct{ target, group, name, labels string }{
			{"octo/app", "", "app-runner", "linux,gpu"},
			{"octo", "Trusted builds", "trusted", "linux,gpu"},
			{"octo", "Open", "open", "linux"},
			{"octo", "", "default", "linux,gpu"},
			{"octo/lib", "", "lib-runner", "linux,gpu"},
		} {
			tok, _ := g.IssueToken("registration-token", r.target)
			if got := registerIn(t, g, r.target, r.group, tok, r.name, r.labels); got != http.StatusOK {
				t.Fatalf("registering %s: HTTP %d", r.name, got)
			}
		}
		return g
	}
	order := []string{"app-runner", "trusted", "open", "default", "lib-runner"}
	for _, tc := range []struct {
		what, repository string
		runsOn           RunsOn
		want             string // the runner that takes the job; "": none
	}{
		{"another repository's labels", "octo/lib", RunsOn{Labels: []string{"linux"}}, "open"},
		{"another repository's labels, all of them", "octo/lib", RunsOn{Labels: []string{"linux", "gpu"}}, "default"},
		{"its own labels, case-insensitively", "octo/app", RunsOn{Labels: []string{"LINUX", "Gpu"}}, "app-runner"},
		{"self-hosted, which --no-default-labels leaves out", "octo/app", RunsOn{Labels: []string{"self-hosted"}}, ""},
		{"a label no runner has them all with", "octo/app", RunsOn{Labels: []string{"linux", "arm64"}}, ""},
		{"a group that did not select the repository", "octo/lib", RunsOn{Group: "Trusted builds"}, ""},
		{"a group that did not select it, with labels", "octo/lib", RunsOn{Group: "Trusted builds", Labels: []string{"linux"}}, ""},
		{"the group that selected it", "octo/app", RunsOn{Group: "trusted BUILDS"}, "trusted"},
		{"the group that selected it, with labels", "octo/app", RunsOn{Group: "Trusted builds", Labels: []string{"GPU"}}, "trusted"},
		{"the group, with a label its runner lacks", "octo/app", RunsOn{Group: "Trusted builds", Labels: []string{"arm64"}}, ""},
		{"the default group, from a private repository", "octo/lib", RunsOn{Group: "Default"}, "default"},
		{"the default group, from a public repository", "octo/site", RunsOn{Group: "Default"}, ""},
		{"a public repository's labels", "octo/site", RunsOn{Labels: []string{"linux", "gpu"}}, ""},
		{"a public repository, a group allowing public ones", "octo/site", RunsOn{Labels: []string{"linux"}}, "open"},
		{"another organization's repository", "other/app", RunsOn{Labels: []string{"linux"}}, ""},
		{"another organization's, naming the group", "other/app", RunsOn{Group: "Open"}, ""},
	} {
		t.Run(tc.what, func(t *testing.T) {
			g := world(t)
			routed := ""
			for _, runner := range order {
				if g.Routes(tc.repository, tc.runsOn, runner) {
					routed = runner
					break
				}
			}
			if routed != tc.want {
				t.Errorf("Routes: the first runner a job of %s with runs-on %+v reaches is %q, want %q", tc.repository, tc.runsOn, routed, tc.want)
			}
			id := g.QueueJobFor(tc.repository, tc.runsOn, "true")
			took := ""
			for _, runner := range order {
				if nextJob(t, g, runner) == id {
					took = runner
					break
				}
			}
			if took != tc.want {
				t.Errorf("a job of %s with runs-on %+v went to %q, want %q", tc.repository, tc.runsOn, took, tc.want)
			}
			if job := g.JobResult(id); took != "" && job.Repository != tc.repository {
				t.Errorf("the job runs for %q, want %q", job.Repository, tc.repository)
			}
		})
	}
}
