package scripttest

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// unpackRunner unpacks the stub's runner of version into a directory.
func unpackRunner(t *testing.T, g *GitHub, version string) string {
	t.Helper()
	dir := t.TempDir()
	resp, err := http.Get(g.RunnerArchiveURL(version))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	untar := exec.Command("tar", "-xz", "-C", dir)
	untar.Stdin = resp.Body
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("unpacking the stub runner: %v\n%s", err, out)
	}
	return dir
}

// runConfigSh runs the stub config.sh of dir with the token in the
// environment, as root may only with RUNNER_ALLOW_RUNASROOT.
func runConfigSh(dir, token string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(dir, "config.sh"), args...)
	cmd.Env = append(os.Environ(), "ACTIONS_RUNNER_INPUT_TOKEN="+token, "RUNNER_ALLOW_RUNASROOT=1")
	return cmd.CombinedOutput()
}

// The stub config.sh takes the token as the real one does from
// ACTIONS_RUNNER_INPUT_TOKEN when --token is absent, to register and to
// remove, accepts --disableupdate, and removes the runner at the GitHub its
// .runner names.
func TestStubRunner_tokenFromEnvironment(t *testing.T) {
	g := NewGitHub(t)
	dir := unpackRunner(t, g, RunnerVersion)
	reg, _ := g.IssueToken("registration-token", "octo/app")
	if out, err := runConfigSh(dir, reg, "--unattended", "--url", g.URL+"/octo/app", "--name", "i-1", "--labels", "run-1",
		"--no-default-labels", "--replace", "--disableupdate", "--work", "_work"); err != nil {
		t.Fatalf("config.sh: %v\n%s", err, out)
	}
	if r := g.Runners()["i-1"]; r.Target != "octo/app" || r.Labels != "run-1" || r.Version != RunnerVersion {
		t.Errorf("registered runner = %+v", r)
	}
	rem, _ := g.IssueToken("remove-token", "octo/app")
	if out, err := runConfigSh(dir, rem, "remove"); err != nil {
		t.Fatalf("config.sh remove: %v\n%s", err, out)
	}
	if want := []string{"download runner " + RunnerVersion, "register i-1 run-1", "remove i-1"}; !slices.Equal(g.Events(), want) {
		t.Errorf("events = %q, want %q", g.Events(), want)
	}
}

// As the real one, the stub config.sh refuses root without
// RUNNER_ALLOW_RUNASROOT, and the stub refuses to register a runner older
// than GitHub's minimum.
func TestStubRunner_refusals(t *testing.T) {
	g := NewGitHub(t)
	g.PublishRunner("2.328.0", time.Now().Add(-100*24*time.Hour))
	if os.Geteuid() == 0 {
		dir := unpackRunner(t, g, RunnerVersion)
		cmd := exec.Command(filepath.Join(dir, "config.sh"), "--unattended", "--no-default-labels", "--url", g.URL+"/octo/app", "--name", "i-1")
		cmd.Env = append(os.Environ(), "ACTIONS_RUNNER_INPUT_TOKEN=x")
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Must not run with sudo") {
			t.Errorf("config.sh as root without RUNNER_ALLOW_RUNASROOT: %v\n%s", err, out)
		}
	}
	dir := unpackRunner(t, g, "2.328.0")
	reg, _ := g.IssueToken("registration-token", "octo/app")
	out, err := runConfigSh(dir, reg, "--unattended", "--url", g.URL+"/octo/app", "--name", "i-1", "--labels", "run-1", "--no-default-labels")
	if err == nil || len(g.Runners()) != 0 {
		t.Errorf("a 2.328.0 runner registered: %v\n%s", err, out)
	}
}

// The stub sends no job to a runner GitHub's policy no longer accepts: its
// listener is refused with GitHub's message, and the refusal is an event.
func TestGitHub_refusesJobsToOutdatedRunners(t *testing.T) {
	g := NewGitHub(t)
	g.PublishRunner("2.329.0", time.Now().Add(-100*24*time.Hour)) // its successor, 2.330.0, came out 40 days ago
	poll := func(version string) (int, string) {
		resp, err := http.Get(g.URL + "/_stub/job?name=i-1&version=" + version)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, body := poll("2.329.0"); status != http.StatusForbidden || !strings.Contains(body, "Runner version v2.329.0 is deprecated and cannot receive messages.") {
		t.Errorf("a 2.329.0 runner's poll: HTTP %d %q, want 403 and GitHub's message", status, body)
	}
	if status, _ := poll(OlderRunnerVersion); status == http.StatusForbidden {
		t.Errorf("a %s runner (its successor came out 5 days ago) was refused", OlderRunnerVersion)
	}
	if !slices.Contains(g.Events(), "deprecated i-1 2.329.0") {
		t.Errorf("events = %v, want the refusal", g.Events())
	}
}

// As GitHub does, the stub config.sh registers an organization's runner in
// the runner group --runnergroup names, looked up case-insensitively, and
// fails for a group the organization does not have; a repository's runners
// have only the default group.
func TestStubRunner_runnerGroups(t *testing.T) {
	g := NewGitHub(t)
	g.AddRunnerGroup("octo", "Trusted builds", GroupAccess{})
	for _, tc := range []struct {
		target, group, want string // want "": refused
	}{
		{"octo", "trusted BUILDS", "Trusted builds"},
		{"octo", "", "Default"},
		{"octo", "Default", "Default"},
		{"octo", "Untrusted", ""},
		{"other", "Trusted builds", ""},
		{"octo/app", "Trusted builds", ""},
		{"octo/app", "default", "Default"},
	} {
		dir := unpackRunner(t, g, RunnerVersion)
		reg, _ := g.IssueToken("registration-token", tc.target)
		args := []string{"--unattended", "--url", g.URL + "/" + tc.target, "--name", "i-1", "--labels", "run-1-abcdefgh23456", "--no-default-labels"}
		if tc.group != "" {
			args = append(args, "--runnergroup", tc.group)
		}
		out, err := runConfigSh(dir, reg, args...)
		r, registered := g.Runners()["i-1"]
		switch {
		case tc.want == "" && (err == nil || registered):
			t.Errorf("%s in group %q: registered %+v, want refused", tc.target, tc.group, r)
		case tc.want != "" && (err != nil || r.Group != tc.want || r.Labels != "run-1-abcdefgh23456"):
			t.Errorf("%s in group %q: %+v, %v (%s); want registered in %s", tc.target, tc.group, r, err, out, tc.want)
		}
		g.mu.Lock()
		delete(g.runners, "i-1")
		g.mu.Unlock()
	}
	if events := strings.Join(g.Events(), "\n"); !strings.Contains(events, `could not find any self-hosted runner group named "Untrusted"`) {
		t.Errorf("events %q: no refusal naming the missing group", events)
	}
}
