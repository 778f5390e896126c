package linux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
)

// Host is the agent's agent.Host on a Linux instance.
type Host struct {
	cfg  agent.Config
	logf func(string, ...any)
	jobs *jobs
	scan *writableScan
}

// jobs is what Host and Runner share: the agent's executable, and the
// runner user and the jobs' cgroup, set up by RaiseWalls.
type jobs struct {
	self string // run to clear the runner user's keyrings and to start the runner (StartRunnerCommand)

	mu     sync.Mutex
	acct   account
	cgroup *jobsCgroup
}

func (j *jobs) get() (account, *jobsCgroup, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cgroup == nil {
		return account{}, nil, errors.New("the walls are not up: no runner user or jobs' cgroup yet")
	}
	return j.acct, j.cgroup, nil
}

// New is the Host and Runner of an instance with configuration cfg
// (defaults filled in); self is the agent's executable.
func New(cfg agent.Config, self string, logf func(string, ...any)) (*Host, *Runner) {
	j := &jobs{self: self}
	h := &Host{cfg: cfg, logf: logf, jobs: j, scan: newWritableScan(filepath.Join(cfg.Paths.StateDir, "writable-dirs.json"))}
	return h, newRunner(cfg, logf, j)
}

// RaiseWalls sets the wall up at this boot: mount options and firewall
// rules do not survive a stop and start of the instance.
func (h *Host) RaiseWalls(ctx context.Context) error {
	if err := os.MkdirAll(h.cfg.Paths.StateDir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(h.cfg.Paths.StateDir, 0o700); err != nil {
		return err
	}
	if err := mkdirAll(h.cfg.Paths.RunnerDir, 0o755); err != nil {
		return err
	}
	// Root works by path in these, before any job runs and after.
	for _, dir := range []string{h.cfg.Paths.StateDir, h.cfg.Paths.RunnerDir} {
		if err := rootsAlone(dir); err != nil {
			return err
		}
	}
	hideProcesses(h.logf)
	acct, err := ensureAccount(ctx, h.cfg.RunnerUser, h.logf)
	if err != nil {
		return err
	}
	cg, err := openJobsCgroup()
	if err != nil {
		return err
	}
	h.jobs.mu.Lock()
	h.jobs.acct, h.jobs.cgroup = acct, cg
	h.jobs.mu.Unlock()
	if h.cfg.JobsMetadataAccess {
		h.logf("jobs may reach the instance metadata service, and with it the instance role (jobs_metadata_access)")
	} else if err := blockMetadata(ctx, acct.uid, h.logf); err != nil {
		return err
	}
	return h.EndJobs(ctx)
}

// EndJobs kills every process of the runner user and proves none is left.
func (h *Host) EndJobs(context.Context) error {
	acct, cg, err := h.jobs.get()
	if err != nil {
		return err
	}
	return endJobs(cg, acct.uid, h.logf)
}

// Prepare runs the pre-runner script once per instance, then starts looking
// for the directories the runner user can write: after the script, which
// may make some.
func (h *Host) Prepare(ctx context.Context) error {
	acct, _, err := h.jobs.get()
	if err != nil {
		return err
	}
	if err := h.runPreRunnerScript(ctx); err != nil {
		return err
	}
	h.scan.start(acct, []string{acct.home, h.cfg.Paths.StateDir, h.cfg.Paths.RunnerDir}, h.logf)
	return nil
}

// runPreRunnerScript runs the pre-runner script, unless it ran on this
// instance.
func (h *Host) runPreRunnerScript(ctx context.Context) error {
	done := filepath.Join(h.cfg.Paths.StateDir, "pre-runner.done")
	if h.cfg.PreRunnerScript == "" || exists(done) {
		return nil
	}
	script := filepath.Join(h.cfg.Paths.StateDir, "pre-runner")
	if err := os.WriteFile(script, []byte(h.cfg.PreRunnerScript), 0o700); err != nil {
		return err
	}
	h.logf("running the pre-runner script")
	cmd := exec.CommandContext(ctx, "bash", script)
	if strings.HasPrefix(h.cfg.PreRunnerScript, "#!") {
		cmd = exec.CommandContext(ctx, script)
	}
	cmd.Dir, cmd.Env = "/", rootEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("the pre-runner script failed: %v: %s", err, tail(out))
	}
	return os.WriteFile(done, nil, 0o600)
}

// Wipe removes everything the runner user can have left for the next run:
// its cron and at jobs (then its processes again: one may have started
// meanwhile), the containers of a Docker daemon, its System V IPC objects,
// its keyrings, its files in every directory it can write, and its home,
// made again from /etc/skel.
func (h *Host) Wipe(ctx context.Context) error {
	acct, cg, err := h.jobs.get()
	if err != nil {
		return err
	}
	removeSchedules(ctx, acct.name)
	if err := endJobs(cg, acct.uid, h.logf); err != nil {
		return err
	}
	removeContainers(ctx, h.logf)
	var errs []error
	errs = append(errs, removeIPC(acct.uid), h.clearKeyrings(ctx, acct))
	for _, dir := range h.scan.result() {
		errs = append(errs, removeOwned(dir, acct.uid))
	}
	errs = append(errs, resetHome(acct, "/etc/skel"))
	return errors.Join(errs...)
}

// clearKeyrings runs the agent's clear-keyrings command as the runner user:
// a user's keyrings can be cleared only by the user.
func (h *Host) clearKeyrings(ctx context.Context, acct account) error {
	cmd := exec.CommandContext(ctx, h.jobs.self, "clear-keyrings")
	cmd.Dir, cmd.Env = "/", nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: acct.uid, Gid: acct.gid, Groups: []uint32{acct.gid}}}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("clearing the runner user's keyrings: %v: %s", err, tail(out))
	}
	return nil
}

// removeSchedules removes the user's crontab and at jobs.
func removeSchedules(ctx context.Context, user string) {
	if _, err := exec.LookPath("crontab"); err == nil {
		_ = exec.CommandContext(ctx, "crontab", "-r", "-u", user).Run()
	}
	if _, err := exec.LookPath("atq"); err != nil {
		return
	}
	out, _ := exec.CommandContext(ctx, "atq").Output()
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 1 && fields[len(fields)-1] == user {
			_ = exec.CommandContext(ctx, "atrm", fields[0]).Run()
		}
	}
}

// removeContainers removes every container of a running Docker daemon
// (jobs in the docker group are root anyway; this only clears the next
// run's view).
func removeContainers(ctx context.Context, logf func(string, ...any)) {
	if _, err := exec.LookPath("docker"); err != nil || exec.CommandContext(ctx, "docker", "info").Run() != nil {
		return
	}
	out, _ := exec.CommandContext(ctx, "docker", "ps", "--all", "--quiet").Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		if out, err := exec.CommandContext(ctx, "docker", append([]string{"rm", "--force", "--volumes"}, ids...)...).CombinedOutput(); err != nil {
			logf("removing containers: %v: %s", err, tail(out))
		}
	}
}

// resetHome makes the runner user's home again from skel: empty, its own,
// mode 0700, with skel's files and directories, its own. It is filled
// while still root's alone, through descriptors, and handed over last: no
// process of the runner user can reach it before.
func resetHome(acct account, skel string) error {
	parent, err := openDir(filepath.Dir(acct.home))
	if err != nil {
		return err
	}
	defer parent.Close()
	name := filepath.Base(acct.home)
	if err := removeAllAt(parent, name); err != nil {
		return err
	}
	home, err := mkdirAt(parent, name)
	if err != nil {
		return err
	}
	defer home.Close()
	uid, gid := int(acct.uid), int(acct.gid)
	src, err := openDir(skel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		defer src.Close()
		copyOwn := func(src, dst *os.File, name string, perm uint32) error {
			return copyFileAt(src, name, dst, perm, uid, gid)
		}
		if err := copyTree(src, home, treeOwner{uid: uid, gid: gid}, copyOwn); err != nil {
			return err
		}
	}
	return handOver(home, uid, gid, 0o700)
}

// rootEnv is the environment of what the agent runs as root: nothing of
// its own.
func rootEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// tail is the end of a command's output, for an error.
func tail(out []byte) string {
	out = bytes.TrimSpace(out)
	if len(out) > 2000 {
		out = out[len(out)-2000:]
	}
	return string(out)
}
