package actions

import (
	"regexp"
	"testing"
)

// TestActions_stepsExecTheScript checks that every run: step of the claim
// and release actions execs ec2runners.sh. The runner cancels a step by
// signalling the step's process alone; only when that process is the
// script does the interrupt reach Terraform (TestActions_claimAndRelease
// cancels the claim step as the runner does).
func TestActions_stepsExecTheScript(t *testing.T) {
	execsScript := regexp.MustCompile(`^exec bash "\$GITHUB_ACTION_PATH/\.\./lib/ec2runners\.sh"( [a-z]+)+\n?$`)
	for _, action := range []string{"claim", "release"} {
		runs := 0
		for _, s := range actionSteps(t, action) {
			if s.Run == "" {
				continue
			}
			runs++
			if !execsScript.MatchString(s.Run) {
				t.Errorf("a run: step of the %s action does not exec the script, so a cancel would not reach Terraform: %q", action, s.Run)
			}
		}
		if runs == 0 {
			t.Errorf("the %s action has no run: step", action)
		}
	}
}
