package agentscript_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// The files the agent lays out, as root for a separate runner user: its own
// state and the runner installation are root's (state reachable by root
// only: its directories root's alone, its files root's and written by no
// one else, the registration's copy of the installation included; the
// installation readable by everyone and writable by no one else, and
// every directory above them traversable), the runner user's home and the
// run's runner directory are the runner's, the installation's files in it
// still root's; /proc hides other users' processes; the runner user's
// traffic to the metadata service is rejected.
func TestInstance_layout(t *testing.T) {
	f, inst := startServing(t, "run-1")
	o := inst.Options
	runner, err := user.Lookup(inst.RunnerUser)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(runner.Uid)

	checkMode(t, o.Paths.StateDir, 0, 0o700|fs.ModeDir)
	walk(t, o.Paths.StateDir, func(path string, info fs.FileInfo) {
		if ownerOf(info) != 0 || (info.IsDir() && info.Mode().Perm()&0o077 != 0) || info.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s: owner %d, mode %s; want root's, directories private, files written by root only", path, ownerOf(info), info.Mode())
		}
	})
	checkMode(t, o.AgentPath, 0, 0o711)
	for dir := filepath.Dir(o.Paths.RunnerDir); dir != "/" && strings.HasPrefix(dir, inst.Root); dir = filepath.Dir(dir) {
		checkMode(t, dir, 0, 0o755|fs.ModeDir) // the umask 077 of the agent must not close these
	}
	walk(t, o.Paths.RunnerDir, func(path string, info fs.FileInfo) {
		if ownerOf(info) != 0 || info.Mode().Perm()&0o022 != 0 || info.Mode().Perm()&0o004 == 0 {
			t.Errorf("%s: owner %d, mode %s; want root's, readable by all and writable by root only", path, ownerOf(info), info.Mode())
		}
	})

	checkMode(t, runner.HomeDir, uid, 0o700|fs.ModeDir)
	runDir := filepath.Join(runner.HomeDir, "runner")
	walk(t, runDir, func(path string, info fs.FileInfo) {
		rel, _ := filepath.Rel(runDir, path)
		_, installed := os.Lstat(filepath.Join(installation(t, inst), rel))
		switch {
		case info.IsDir() && ownerOf(info) != uid:
			t.Errorf("%s: a directory of the run owned by %d, want the runner user %d", path, ownerOf(info), uid)
		case !info.IsDir() && installed == nil && (ownerOf(info) != 0 || info.Mode().Perm()&0o022 != 0):
			t.Errorf("%s: an installed file owned by %d with mode %s, want root's and writable by root only", path, ownerOf(info), info.Mode())
		}
	})
	if info, err := os.Stat(filepath.Join(runDir, ".runner")); err != nil || ownerOf(info) != uid {
		t.Errorf("the run's registration %s/.runner: %v; want it written by the runner user", runDir, err)
	}

	groups, _ := runner.GroupIds()
	if uid == 0 || len(groups) != 1 {
		t.Errorf("runner user uid %d in groups %v; want an unprivileged user in its own group only", uid, groups)
	}
	mounts, err := inst.Command("cat", "/proc/self/mountinfo").Output()
	if err != nil || !procHidesPIDs(string(mounts)) {
		t.Errorf("/proc inside the instance is not mounted with hidepid (%v):\n%s", err, mounts)
	}
	for _, rules := range [][]string{{"iptables", "-S", "OUTPUT"}, {"ip6tables", "-S", "OUTPUT"}} {
		out, err := inst.Command(rules[0], rules[1:]...).Output()
		if err != nil || !strings.Contains(string(out), "--uid-owner "+runner.Uid+" -j REJECT") {
			t.Errorf("%s: %v; no rule rejecting the runner user:\n%s", strings.Join(rules, " "), err, out)
		}
	}
	_ = f
}

// A hostile job tries everything a job must not do and records what it
// got; a job of the next claim of the same instance then looks for anything
// the first left behind. Every attempt must fail.
func TestInstance_hostileJobGetsNothing(t *testing.T) {
	f, inst := startServing(t, "run-1")
	checkHostileJob(t, f, "run-1")

	release(t, f, "run-1")
	claimAgain(t, f, "run-2")
	second := runJob(t, f, "run-2", leftoversJob)
	if second.ExitCode != 0 || strings.Contains(second.Output, "LEFT") || !strings.Contains(second.Output, "clean") {
		t.Errorf("the next run's job found what the first left (exit code %d):\n%s", second.ExitCode, second.Output)
	}
	if r := f.env.GitHub.Runners()[f.instanceID]; r.Labels != f.label("run-2") {
		t.Errorf("the second run's runner = %+v: the first job's change to its runner copy outlived the run", r)
	}
	if strings.Contains(inst.Output(), "differs from what was installed") {
		t.Errorf("the runner installation changed:\n%s", inst.Output())
	}
}

// checkHostileJob runs hostileJob on the runner of runID: every attempt
// must fail, and nothing it could read may hold a secret.
func checkHostileJob(t *testing.T, f *fixture, runID string) {
	t.Helper()
	o := f.inst.Options
	paths := strings.NewReplacer("@STATE@", o.Paths.StateDir, "@AGENT@", o.AgentPath, "@INSTALL@", installation(t, f.inst),
		"@JOBTOOL@", f.inst.Root+"/"+scripttest.JobToolPath)
	job := runJob(t, f, runID, paths.Replace(hostileJob))
	for _, line := range attempts(job.Output) {
		if !strings.HasSuffix(line, ": blocked") {
			t.Errorf("the job got what it must not: %s", line)
		}
	}
	if n := len(attempts(job.Output)); n != strings.Count(hostileJob, "\nattempt ") {
		t.Errorf("the job reported %d attempts, want %d; its output:\n%s", n, strings.Count(hostileJob, "\nattempt "), job.Output)
	}
	for _, secret := range secrets(f) {
		if strings.Contains(job.Output, secret) {
			t.Errorf("the job read a secret (%.12s...) from the instance: /proc, files or the environment", secret)
		}
	}
}

// hostileJob runs as the runner user. Each attempt prints "NAME: blocked"
// when the command fails, "NAME: REACHED ..." when it succeeds; then it
// leaves what it can for the next run and prints everything it could read
// that might hold a secret.
const hostileJob = `set +e
attempt() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		printf '%s: REACHED %s\n' "$name" "$(printf %s "$out" | head -c 300 | tr '\n' ' ')"
	else
		printf '%s: blocked\n' "$name"
	fi
}
imds_token() { curl -gsSf --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "http://$1/latest/api/token"; }
attempt imds-ipv4 imds_token 169.254.169.254
attempt imds-ipv6 imds_token '[fd00:ec2::254]'
attempt list-agent-state ls -la @STATE@
attempt read-agent-state sh -c 'cat @STATE@/* @STATE@/.* 2>/dev/null | head -c 1 | grep -q .'
attempt read-agent sh -c 'head -c 1 @AGENT@ | grep -q .'
attempt write-runner-install sh -c 'echo pwned >>@INSTALL@/config.sh'
attempt add-to-runner-install touch @INSTALL@/pwned
attempt chmod-runner-install chmod o+w @INSTALL@/config.sh
attempt write-installed-file-in-run-copy sh -c 'echo pwned >>"$HOME/runner/run.sh"'
attempt see-root-processes sh -c 'ps -eo user= | grep -qx root'
attempt sudo sudo -n true
# Tamper with this run's copy of the runner (allowed: it is the job's), and
# leave things for the next run.
rm -f "$HOME/runner/config.sh" && printf '#!/bin/sh\necho pwned; exit 1\n' >"$HOME/runner/config.sh" && chmod +x "$HOME/runner/config.sh"
setsid nohup sleep 3001 >/dev/null 2>&1 &
( sleep 3002 & ) &
nohup bash -c 'while :; do sleep 1; done' >/dev/null 2>&1 &
echo LEFT-home >"$HOME/.left-behind"
echo 'echo LEFT-bashrc' >>"$HOME/.bashrc"
for d in /tmp /var/tmp /dev/shm; do echo LEFT-tmp >"$d/left-behind-$(id -un)"; done
command -v ipcmk >/dev/null && ipcmk -M 4096 >/dev/null
echo '--- what the job could read'
cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'
env
grep -rs . /tmp /var/tmp /dev/shm "$HOME" 2>/dev/null | head -c 200000
exit 0
`

// leftoversJob runs as the runner user on the next claim: it prints LEFT for
// anything of the first run it finds, "clean" otherwise.
const leftoversJob = `set +e
found=0
left() { echo "LEFT: $*"; found=1; }
ps -u "$(id -un)" -o pid=,args= | grep -v -e 'ps -u' -e grep | grep -e 'sleep 300' -e 'while :' && left processes
[ -e "$HOME/.left-behind" ] && left home file
grep -q LEFT "$HOME/.bashrc" 2>/dev/null && left bashrc
ls /tmp/left-behind-* /var/tmp/left-behind-* /dev/shm/left-behind-* 2>/dev/null && left temporary files
ipcs -m 2>/dev/null | grep -q "$(id -un)" && left shared memory
env | grep -q LEFT && left environment
[ "$found" = 0 ] && echo clean
exit 0
`

// attempts are the hostile job's reports, which come before what it read.
func attempts(output string) []string {
	var out []string
	reports, _, _ := strings.Cut(output, "--- what the job could read")
	sc := bufio.NewScanner(strings.NewReader(reports))
	for sc.Scan() {
		if line := sc.Text(); strings.HasSuffix(line, ": blocked") || strings.Contains(line, ": REACHED ") {
			out = append(out, line)
		}
	}
	return out
}

// secrets are what no job may see: every GitHub token issued, and the
// instance role's credentials and metadata token.
func secrets(f *fixture) []string {
	return append(f.env.GitHub.IssuedTokens(), scripttest.SecretAccessKey, scripttest.SessionToken, scripttest.AccessKeyID(f.instanceID))
}

// startServing starts the fixture's instance in the stand-in and claims it
// for runID; it returns once the runner is online for the run. The
// instance reaches the URLs of reach beside the emulator and GitHub.
func startServing(t *testing.T, runID string, reach ...string) (*fixture, *scripttest.Instance) {
	t.Helper()
	f := newFixture(t, repo, nil)
	f.image.Reach = reach
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	inst := f.start(f.options(), nil)
	f.awaitServing()
	claimAgain(t, f, runID)
	return f, inst
}

func claimAgain(t *testing.T, f *fixture, runID string) {
	t.Helper()
	res, err := f.claim(runID)
	if err != nil {
		t.Fatalf("claim %s: %v", runID, err)
	}
	if len(res.Instances) != 1 || res.Instances[0].ID != f.instanceID {
		t.Fatalf("claim %s = %+v, want the instance %s", runID, res, f.instanceID)
	}
	await.True(t, "the runner online with the label of "+runID, func() error {
		if r, ok := f.env.GitHub.Runners()[f.instanceID]; !ok || r.Labels != f.label(runID) || !r.Running {
			return fmt.Errorf("runner %+v (registered: %t)", r, ok)
		}
		return nil
	})
}

func release(t *testing.T, f *fixture, runID string) {
	t.Helper()
	if outcomes, err := f.claimer.Release(t.Context(), f.pool, runID); err != nil {
		t.Fatalf("release %s: %v (%v)", runID, err, outcomes)
	}
	f.waitSignal(protocol.SignalReleased, runID)
}

// runJob runs script as a job for the runners of runID, by their label.
func runJob(t *testing.T, f *fixture, runID, script string) scripttest.Job {
	t.Helper()
	id := f.env.GitHub.QueueJob(f.label(runID), script)
	await.True(t, "the job of "+runID, func() error { return await.Bool(f.env.GitHub.JobResult(id).Done) })
	return f.env.GitHub.JobResult(id)
}

func walk(t *testing.T, root string, check func(string, fs.FileInfo)) {
	t.Helper()
	err := filepath.Walk(root, func(path string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		check(path, info)
		return nil
	})
	if err != nil {
		t.Errorf("walking %s: %v", root, err)
	}
}

func checkMode(t *testing.T, path string, uid int, mode fs.FileMode) {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if ownerOf(info) != uid || info.Mode()&(fs.ModeDir|fs.ModePerm) != mode {
		t.Errorf("%s: owner %d, mode %s; want owner %d, mode %s", path, ownerOf(info), info.Mode(), uid, mode)
	}
}

// installation is the directory of the runner installation the agent
// registers with.
func installation(t *testing.T, inst *scripttest.Instance) string {
	t.Helper()
	current, err := os.ReadFile(filepath.Join(inst.Options.Paths.StateDir, "runner.current"))
	if err != nil {
		t.Fatalf("the installed runner: %v", err)
	}
	return filepath.Join(inst.Options.Paths.RunnerDir, strings.TrimSpace(string(current)))
}

func ownerOf(info fs.FileInfo) int { return int(info.Sys().(*syscall.Stat_t).Uid) }

// procHidesPIDs tells whether /proc is mounted with hidepid, from a
// mountinfo listing.
func procHidesPIDs(mountinfo string) bool {
	for _, line := range strings.Split(mountinfo, "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && fields[4] == "/proc" &&
			(strings.Contains(line, "hidepid=invisible") || strings.Contains(line, "hidepid=2")) {
			return true
		}
	}
	return false
}
