package agentscript_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// What the runner prints is the jobs' to forge: a job stops its listener
// and leaves its own run.sh in the runner's directory, which prints
// GitHub's refusal and stays up. The agent decides nothing from what a
// runner prints, and never starts the job's run.sh: it starts the runner
// again from a fresh copy, and the run's next job runs on it.
func TestInstance_jobCannotFakeARefusal(t *testing.T) {
	f, inst := startServing(t, "run-1")
	forged := "An error occured: Runner version v" + scripttest.RunnerVersion + " is deprecated and cannot receive messages."
	f.env.GitHub.QueueJob(f.label("run-1"), fmt.Sprintf(`printf '#!/bin/bash\necho %%q\nexec sleep 600.5\n' %q >"$HOME/runner/run.sh.job"
chmod +x "$HOME/runner/run.sh.job" && mv -f "$HOME/runner/run.sh.job" "$HOME/runner/run.sh"
kill "$(cat "$HOME/runner/run.pid")"
sleep 600`, forged))
	await.True(t, "the runner started again", func() error {
		if n := countEvent(f.env.GitHub.Events(), "run "+f.instanceID); n < 2 {
			return fmt.Errorf("started %d times: %v", n, f.env.GitHub.Events())
		}
		return nil
	})
	checkJob(t, f, "run-1")
	if strings.Contains(inst.Output(), "is deprecated and cannot receive messages") {
		t.Errorf("the agent started the job's run.sh, which printed the forged refusal:\n%s", inst.Output())
	}
	release(t, f, "run-1")
}

// A job stops its listener, leaves a process behind and its own run.sh in
// the runner's directory for the agent to start again. The agent starts
// the runner again only once every process of the run has ended, from a
// fresh copy of the installation (here GitHub's newer release, as after a
// critical security release): nothing of the job's survives, and the
// run's next job runs on the new runner.
func TestInstance_runnerStartsAgainOnlyOnceTheRunsJobsEnded(t *testing.T) {
	f, inst := startServing(t, "run-1")
	const newer = "2.332.0"
	f.env.GitHub.PublishRunner(newer, time.Now())
	f.env.GitHub.QueueJob(f.label("run-1"), `setsid sleep 600.25 </dev/null >/dev/null 2>&1 &
printf '#!/bin/bash\necho "left by the job"\nexec sleep 600.5\n' >"$HOME/runner/run.sh.job"
chmod +x "$HOME/runner/run.sh.job" && mv -f "$HOME/runner/run.sh.job" "$HOME/runner/run.sh"
kill "$(cat "$HOME/runner/run.pid")"
sleep 600`)
	await.True(t, "the runner started again", func() error {
		if n := countEvent(f.env.GitHub.Events(), "run "+f.instanceID); n < 2 {
			return fmt.Errorf("started %d times: %v", n, f.env.GitHub.Events())
		}
		return nil
	})
	if out, err := inst.Command("pgrep", "-a", "-u", inst.RunnerUser, "-f", "sleep 600").CombinedOutput(); err == nil {
		t.Errorf("processes of the job outlived its runner:\n%s", out)
	}
	if strings.Contains(inst.Output(), "left by the job") {
		t.Errorf("the agent started the job's run.sh:\n%s", inst.Output())
	}
	checkJob(t, f, "run-1")
	if !strings.Contains(inst.Output(), "GitHub publishes runner "+newer+", newer than "+scripttest.RunnerVersion) {
		t.Errorf("the agent's log does not tell the update:\n%s", inst.Output())
	}
	release(t, f, "run-1")
}

// countEvent counts the stub GitHub's events equal to event.
func countEvent(events []string, event string) int {
	n := 0
	for _, e := range events {
		if e == event {
			n++
		}
	}
	return n
}
