package scripttest

import (
	"os/exec"
	"testing"
)

// The harness's shell scripts pass shellcheck, as the agent does. shellcheck
// is installed by .ci/run; a machine without it fails here.
func TestScripts_passShellcheck(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Fatal("shellcheck is not installed (apt-get install shellcheck)")
	}
	scripts := []string{"instance/init.sh", "instance/systemctl", "stubrunner/config.sh", "stubrunner/run.sh"}
	out, err := exec.Command("shellcheck", append([]string{"--severity=style", "--shell=bash"}, scripts...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
}
