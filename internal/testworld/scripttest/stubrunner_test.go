package scripttest

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// generateJIT posts body to the REST API's generate-jitconfig of target
// (owner/repo or an organization); it returns the status and the answer.
func generateJIT(t *testing.T, g *GitHub, target string, body any) (int, map[string]any) {
	t.Helper()
	path := "/orgs/" + target
	if strings.Contains(target, "/") {
		path = "/repos/" + target
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, g.URL+path+"/actions/runners/generate-jitconfig", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+g.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	return resp.StatusCode, answer
}

// The REST API makes a just-in-time runner registered and offline at once,
// and refuses what GitHub refuses: a name a runner has (409), no or more
// than 100 labels or no runner_group_id (422), a group the organization
// does not have or, for a repository, any but the default group (404).
func TestGitHub_justInTimeRunners(t *testing.T) {
	g := NewGitHub(t)
	trusted := g.AddRunnerGroup("octo", "Trusted builds", GroupAccess{})
	status, answer := generateJIT(t, g, "octo", map[string]any{"name": "i-1", "runner_group_id": trusted, "labels": []string{"run-1"}})
	runner, _ := answer["runner"].(map[string]any)
	if status != http.StatusCreated || answer["encoded_jit_config"] == "" || runner["name"] != "i-1" || runner["status"] != "offline" {
		t.Fatalf("generate-jitconfig: HTTP %d %v, want 201 with the offline runner and its configuration", status, answer)
	}
	if r, ok := g.Runners()["i-1"]; !ok || r.Target != "octo" || r.Group != "Trusted builds" || r.Labels != "run-1" || !r.Ephemeral || r.Running ||
		float64(r.ID) != runner["id"] {
		t.Errorf("runner %+v (registered: %t), want i-1 of octo in Trusted builds, ephemeral and offline, with the answer's id %v", r, ok, runner["id"])
	}
	var labels []string
	for i := range 101 {
		labels = append(labels, fmt.Sprint("label-", i))
	}
	for _, tc := range []struct {
		what, target string
		body         map[string]any
		status       int
	}{
		{"a name taken", "octo/app", map[string]any{"name": "i-1", "runner_group_id": 1, "labels": []string{"run-1"}}, http.StatusConflict},
		{"100 labels", "octo", map[string]any{"name": "i-100", "runner_group_id": 1, "labels": labels[:100]}, http.StatusCreated},
		{"no labels", "octo", map[string]any{"name": "i-2", "runner_group_id": 1, "labels": []string{}}, http.StatusUnprocessableEntity},
		{"101 labels", "octo", map[string]any{"name": "i-2", "runner_group_id": 1, "labels": labels}, http.StatusUnprocessableEntity},
		{"no runner group", "octo", map[string]any{"name": "i-2", "labels": []string{"run-1"}}, http.StatusUnprocessableEntity},
		{"a group the organization lacks", "octo", map[string]any{"name": "i-2", "runner_group_id": trusted + 1, "labels": []string{"run-1"}}, http.StatusNotFound},
		{"a repository's runner in a group", "octo/app", map[string]any{"name": "i-2", "runner_group_id": trusted, "labels": []string{"run-1"}}, http.StatusNotFound},
	} {
		if status, answer := generateJIT(t, g, tc.target, tc.body); status != tc.status {
			t.Errorf("%s: HTTP %d %v, want %d", tc.what, status, answer, tc.status)
		}
	}
	if _, ok := g.Runners()["i-2"]; ok {
		t.Errorf("a refused request registered i-2")
	}
	// GitHub sends a just-in-time runner one job alone.
	g.pollWait = 100 * time.Millisecond
	first := g.QueueJob("run-1", "true")
	g.QueueJob("run-1", "true")
	if got := nextJob(t, g, "i-1"); got != first {
		t.Errorf("i-1 took %q, want the first job, %q", got, first)
	}
	if got := nextJob(t, g, "i-1"); got != "" {
		t.Errorf("i-1 took a second job, %q", got)
	}
}

// RunJob runs on a just-in-time runner the one job GitHub sends it, of its
// repository and with its labels, and GitHub then removes the runner: the
// next job waits for another.
func TestGitHub_runJob(t *testing.T) {
	g := NewGitHub(t)
	if status, answer := generateJIT(t, g, "octo/app", map[string]any{"name": "i-1-a", "runner_group_id": 1, "labels": []string{"run-1"}}); status != http.StatusCreated {
		t.Fatalf("generate-jitconfig: HTTP %d %v", status, answer)
	}
	other := g.QueueJobFor("octo/web", RunsOn{Labels: []string{"run-1"}}, "true")
	unlabelled := g.QueueJobFor("octo/app", RunsOn{Labels: []string{"self-hosted"}}, "true")
	if job, ok := g.RunJob("i-1-a"); ok {
		t.Fatalf("i-1-a ran %+v: no job of octo/app has its label", job)
	}
	first := g.QueueJobFor("octo/app", RunsOn{Labels: []string{"RUN-1"}}, "true")
	second := g.QueueJobFor("octo/app", RunsOn{Labels: []string{"run-1"}}, "true")
	if job, ok := g.RunJob("i-1-a"); !ok || job.ID != first || !job.Done || job.Runner != "i-1-a" || job.ExitCode != 0 {
		t.Fatalf("i-1-a ran %+v (%t), want the first job of octo/app, done", job, ok)
	}
	if _, registered := g.Runners()["i-1-a"]; registered {
		t.Error("the just-in-time runner is still registered after its job")
	}
	if job, ok := g.RunJob("i-1-a"); ok {
		t.Errorf("i-1-a ran a second job, %+v", job)
	}
	for _, id := range []string{other, unlabelled, second} {
		if job := g.JobResult(id); job.Runner != "" || job.Done {
			t.Errorf("job %s: %+v, want it queued", id, job)
		}
	}
}

// An ephemeral runner, just-in-time (run.sh --jitconfig, from the REST
// API's configuration) or configured with config.sh --ephemeral, takes one
// job: then GitHub removes it and its run.sh exits, leaving the next job
// queued. config.sh without --no-default-labels gives the runner the
// default labels before its own.
func TestStubRunner_ephemeralRunnersTakeOneJob(t *testing.T) {
	for _, tc := range []struct {
		what   string
		runsOn RunsOn
		start  func(t *testing.T, g *GitHub, dir string) []string // run.sh's arguments
	}{
		{"just in time", RunsOn{Labels: []string{"run-1"}}, func(t *testing.T, g *GitHub, dir string) []string {
			status, answer := generateJIT(t, g, "octo/app", map[string]any{"name": "i-1", "runner_group_id": 1, "labels": []string{"run-1"}})
			if status != http.StatusCreated {
				t.Fatalf("generate-jitconfig: HTTP %d %v", status, answer)
			}
			return []string{"--jitconfig", answer["encoded_jit_config"].(string)}
		}},
		{"config.sh --ephemeral", RunsOn{Labels: []string{"self-hosted", "linux", "run-1"}}, func(t *testing.T, g *GitHub, dir string) []string {
			reg, _ := g.IssueToken("registration-token", "octo/app")
			if out, err := runConfigSh(dir, reg, "--unattended", "--url", g.URL+"/octo/app", "--name", "i-1", "--labels", "run-1", "--ephemeral"); err != nil {
				t.Fatalf("config.sh: %v\n%s", err, out)
			}
			if r := g.Runners()["i-1"]; !r.Ephemeral || !strings.HasPrefix(r.Labels, "self-hosted,Linux,") || !strings.HasSuffix(r.Labels, ",run-1") {
				t.Errorf("runner %+v, want it ephemeral with the default labels, then run-1", r)
			}
			return nil
		}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			g := NewGitHub(t)
			dir := unpackRunner(t, g, RunnerVersion)
			args := tc.start(t, g, dir)
			first := g.QueueJobFor("octo/app", tc.runsOn, "echo first")
			second := g.QueueJobFor("octo/app", tc.runsOn, "echo second")
			run := exec.Command(filepath.Join(dir, "run.sh"), args...)
			if out, err := runWithin(run, 30*time.Second); err != nil {
				t.Fatalf("run.sh: %v\n%s", err, out)
			}
			if job := g.JobResult(first); !job.Done || job.Runner != "i-1" || job.Output != "first\n" {
				t.Errorf("the first job: %+v, want it run by i-1", job)
			}
			if job := g.JobResult(second); job.Runner != "" {
				t.Errorf("the second job went to %s, want it left queued", job.Runner)
			}
			if _, ok := g.Runners()["i-1"]; ok || !slices.Contains(g.Events(), "remove i-1") {
				t.Errorf("events %q: want i-1 removed after its job", g.Events())
			}
		})
	}
}

// runWithin runs cmd, killing it past timeout; it returns the output.
func runWithin(cmd *exec.Cmd, timeout time.Duration) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	timer := time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	return out.Bytes(), err
}
