package agentscript_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// What a job leaves where the wipe once did not look or did not see, one
// test per kind of place.

// leaveScript leaves, in dir, the files of every kind a shell job can make:
// a fifo, hidden, dash and newline names, a file of mode 000 and a
// directory of its own.
func leaveScript(dir string) string {
	return `cd ` + dir + ` && mkfifo left-fifo && echo left >.left-hidden && echo left >-left-dash &&
echo left >"$(printf 'left\nnewline')" && echo left >left-locked && chmod 000 left-locked &&
mkdir left-dir && echo left >left-dir/file && echo LEFT ALL`
}

// findScript prints a LEFT line for each file of the runner user in dir.
func findScript(dir string) string {
	return `find ` + dir + ` -mindepth 1 -user "$(id -u)" -printf 'LEFT %p\n'; true`
}

// An image whose /run/lock is an overlay without xino, with its layers on
// two file systems: its files report their layer's st_dev, not the
// overlay's, and the wipe once took them for another file system's. The
// next run finds nothing the last left there.
func TestInstance_nextRunFindsNothingInAnOverlay(t *testing.T) {
	f := newFixture(t, repo, nil)
	f.image.Overlay = "/run/lock"
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	f.start(f.options(), nil)
	f.awaitServing()
	claimAgain(t, f, "run-1")
	first := runJob(t, f, "run-1", leaveScript("/run/lock")+` &&
[ "$(stat -c %d /run/lock)" != "$(stat -c %d /run/lock/-left-dash)" ] && echo LAYER ST_DEV`)
	if first.ExitCode != 0 || !strings.Contains(first.Output, "LEFT ALL") || !strings.Contains(first.Output, "LAYER ST_DEV") {
		t.Fatalf("the first job could not leave its files in an overlay whose files report their layer's st_dev (exit code %d):\n%s", first.ExitCode, first.Output)
	}
	release(t, f, "run-1")
	claimAgain(t, f, "run-2")
	second := runJob(t, f, "run-2", findScript("/run/lock"))
	if strings.Contains(second.Output, "LEFT ") || second.ExitCode != 0 {
		t.Errorf("the next run found what the last left in the overlay (exit code %d):\n%s", second.ExitCode, second.Output)
	}
}

// A pre-runner script that makes a directory every user can write (here
// it mounts a scratch file system for jobs, mode 1777): the agent looks for
// such directories only once the script has run, and the next run finds
// nothing the last left there.
func TestInstance_nextRunFindsNothingWhereThePreRunnerScriptLetsJobsWrite(t *testing.T) {
	scratch := markerDir(t)
	f := newFixture(t, repo, nil)
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	o := f.options()
	o.PreRunnerScript = "mount -t tmpfs -o mode=1777 scratch " + scratch
	f.start(o, nil)
	f.awaitServing()
	claimAgain(t, f, "run-1")
	if first := runJob(t, f, "run-1", leaveScript(scratch)); first.ExitCode != 0 || !strings.Contains(first.Output, "LEFT ALL") {
		t.Fatalf("the first job could not leave its files in the scratch file system (exit code %d):\n%s", first.ExitCode, first.Output)
	}
	release(t, f, "run-1")
	claimAgain(t, f, "run-2")
	second := runJob(t, f, "run-2", findScript(scratch))
	if strings.Contains(second.Output, "LEFT ") || second.ExitCode != 0 {
		t.Errorf("the next run found what the last left in the scratch file system (exit code %d):\n%s", second.ExitCode, second.Output)
	}
}
