package scripttest

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The stub config.sh takes the token as the real one does from
// ACTIONS_RUNNER_INPUT_TOKEN when --token is absent, to register and to
// remove, and accepts --disableupdate.
func TestStubRunner_tokenFromEnvironment(t *testing.T) {
	g := NewGitHub(t)
	dir := t.TempDir()
	resp, err := http.Get(g.RunnerDownloadURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	untar := exec.Command("tar", "-xz", "-C", dir)
	untar.Stdin = resp.Body
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("unpacking the stub runner: %v\n%s", err, out)
	}
	config := func(token string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, "config.sh"), args...)
		cmd.Env = append(os.Environ(), "ACTIONS_RUNNER_INPUT_TOKEN="+token)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("config.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	reg, _ := g.IssueToken("registration-token", "octo/app")
	config(reg, "--unattended", "--url", g.URL+"/octo/app", "--name", "i-1", "--labels", "run-1",
		"--no-default-labels", "--replace", "--disableupdate", "--work", "_work")
	if r := g.Runners()["i-1"]; r.Target != "octo/app" || r.Labels != "run-1" {
		t.Errorf("registered runner = %+v", r)
	}
	rem, _ := g.IssueToken("remove-token", "octo/app")
	config(rem, "remove")
	if want := []string{"register i-1 run-1", "remove i-1"}; !slices.Equal(g.Events(), want) {
		t.Errorf("events = %q, want %q", g.Events(), want)
	}
}
