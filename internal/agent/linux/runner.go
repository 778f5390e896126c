package linux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
)

// Runner is the agent's agent.Runner on a Linux instance: the GitHub
// Actions runner installed below RunnerDir (a directory per version, root's
// alone), registered for each run from a root-only copy in the state
// directory (or just in time for each job), and run as the runner user
// from a copy in its home.
type Runner struct {
	cfg  agent.Config
	logf func(string, ...any)
	jobs *jobs

	installing sync.Mutex // one install at a time
	lifecycle  sync.Mutex // one start, restart or stop of the run's runner at a time

	mu      sync.Mutex
	current string // the installed version registrations use
	run     *runProcess
	runDir  string // the run's runner directory, "" when no run is registered
}

// runProcess is the run's runner, started once or again.
type runProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // how it exited, once exited is closed
}

// registrationFiles are what config.sh writes: the runner's settings,
// credentials and environment.
var registrationFiles = []string{".runner", ".credentials", ".credentials_rsaparams", ".env", ".path"}

func newRunner(cfg agent.Config, logf func(string, ...any), j *jobs) *Runner {
	r := &Runner{cfg: cfg, logf: logf, jobs: j}
	if b, err := os.ReadFile(r.currentFile()); err == nil {
		r.current = strings.TrimSpace(string(b))
	}
	return r
}

func (r *Runner) currentFile() string { return filepath.Join(r.cfg.Paths.StateDir, "runner.current") }
func (r *Runner) manifestFile(version string) string {
	return filepath.Join(r.cfg.Paths.StateDir, "runner-"+version+".manifest.json")
}
func (r *Runner) registrationDir() string { return filepath.Join(r.cfg.Paths.StateDir, "registration") }

// Installed is the version registrations use.
func (r *Runner) Installed() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

// Install installs the archive and makes it the one the next registration
// uses; the previous installation stays (a run may still use its files)
// until the one after.
func (r *Runner) Install(ctx context.Context, a agent.Archive) error {
	r.installing.Lock()
	defer r.installing.Unlock()
	previous := r.Installed()
	if a.Version == previous {
		return nil
	}
	if err := r.install(ctx, a); err != nil {
		return err
	}
	if err := writeAtomic(r.currentFile(), []byte(a.Version)); err != nil {
		return err
	}
	r.mu.Lock()
	r.current = a.Version
	r.mu.Unlock()
	r.prune(a.Version, previous)
	return nil
}

// prune removes the installations (and manifests) but keep.
func (r *Runner) prune(keep ...string) {
	entries, _ := os.ReadDir(r.cfg.Paths.RunnerDir)
	for _, e := range entries {
		v := e.Name()
		if !e.IsDir() || slices.Contains(keep, v) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(r.cfg.Paths.RunnerDir, v)); err != nil {
			r.logf("removing runner %s: %v", v, err)
		}
		_ = os.Remove(r.manifestFile(v))
	}
}

// installation is the directory of the version registrations use.
func (r *Runner) installation() (string, error) {
	v := r.Installed()
	if v == "" {
		return "", errors.New("no runner is installed")
	}
	return filepath.Join(r.cfg.Paths.RunnerDir, v), nil
}

// Check fails unless the installation is what was installed: every file
// with its digest, root's and writable by root only.
func (r *Runner) Check(context.Context) error {
	dir, err := r.installation()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(r.manifestFile(r.Installed()))
	if err != nil {
		return fmt.Errorf("the runner installation's manifest: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("the runner installation's manifest: %w", err)
	}
	return m.verify(dir)
}

// Register configures the runner for one run as root, in a copy of the
// installation only root can reach (config.sh reads the token from its
// environment, which no process of the runner user can read), keeps that
// registration, and starts the runner as the runner user from a fresh copy
// in its home: the installation's files, root's and read-only, with the
// registration's files the runner's.
func (r *Runner) Register(ctx context.Context, reg agent.Registration) error {
	if _, _, err := r.jobs.get(); err != nil {
		return err
	}
	install, err := r.installation()
	if err != nil {
		return err
	}
	regDir := r.registrationDir()
	if err := copyInstallation(install, "", regDir, rootOnly); err != nil {
		return fmt.Errorf("preparing the registration: %w", err)
	}
	args := []string{"--unattended", "--url", reg.URL, "--name", reg.Name, "--labels", reg.Label,
		"--no-default-labels", "--replace", "--disableupdate", "--work", "_work"}
	if reg.RunnerGroup != "" {
		args = append(args, "--runnergroup", reg.RunnerGroup)
	}
	if err := r.configure(ctx, regDir, reg.Token, args...); err != nil {
		return err
	}
	return r.startFrom(install, regDir)
}

// startFrom makes the run's runner directory a fresh copy of install with
// the registration's files of regDir, and starts the runner from it.
func (r *Runner) startFrom(install, regDir string) error {
	acct, _, err := r.jobs.get()
	if err != nil {
		return err
	}
	runDir, err := prepareRunDir(install, regDir, acct)
	if err != nil {
		return fmt.Errorf("preparing the run's runner directory: %w", err)
	}
	r.mu.Lock()
	r.runDir = runDir
	r.mu.Unlock()
	return r.start()
}

// StartJIT starts the run's runner for one job from a fresh copy of the
// installation registrations use now, with a just-in-time configuration:
// run.sh --jitconfig, which writes the registration's files into the
// runner's own directory. The configuration reaches the runner in its
// arguments alone, never in a file of root's on a path the runner user
// controls; the job it runs may read it, as it may any runner's
// credentials, and GitHub removes the registration after that one job.
func (r *Runner) StartJIT(_ context.Context, encodedConfig string) error {
	r.lifecycle.Lock()
	defer r.lifecycle.Unlock()
	install, err := r.installation()
	if err != nil {
		return err
	}
	acct, _, err := r.jobs.get()
	if err != nil {
		return err
	}
	runDir, err := prepareRunDir(install, "", acct)
	if err != nil {
		return fmt.Errorf("preparing the job's runner directory: %w", err)
	}
	r.mu.Lock()
	r.runDir = runDir
	r.mu.Unlock()
	return r.start("--jitconfig", encodedConfig)
}

// Exited is closed once the runner process started last exits; nil
// before one started.
func (r *Runner) Exited() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.run == nil {
		return nil
	}
	return r.run.exited
}

// Running tells whether the run's runner process runs (true when none
// was started).
func (r *Runner) Running() bool {
	r.mu.Lock()
	p := r.run
	r.mu.Unlock()
	if p == nil {
		return true
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Restart ends every process of the run (the jobs' cgroup, and any
// process of the runner user outside it) and starts the run's runner again
// from a fresh copy of the installation registrations use now, checked
// first, with the agent's copy of the run's registration. A run released
// meanwhile is left alone.
func (r *Runner) Restart(ctx context.Context) error {
	r.lifecycle.Lock()
	defer r.lifecycle.Unlock()
	r.mu.Lock()
	p, runDir := r.run, r.runDir
	r.mu.Unlock()
	if runDir == "" {
		return nil
	}
	acct, cg, err := r.jobs.get()
	if err != nil {
		return err
	}
	if err := endJobs(cg, acct.uid, r.logf); err != nil {
		return err
	}
	if p != nil {
		<-p.exited // killed with the cgroup
		r.logf("the runner had exited (%v)", p.err)
	}
	install, err := r.installation()
	if err != nil {
		return err
	}
	if err := r.Check(ctx); err != nil {
		return err
	}
	return r.startFrom(install, r.registrationDir())
}

// configure runs config.sh in dir as root with args, the token in its
// environment (ACTIONS_RUNNER_INPUT_TOKEN, which the runner reads like
// --token): never in a process's arguments.
func (r *Runner) configure(ctx context.Context, dir, token string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "config.sh"), args...)
	cmd.Dir = dir
	cmd.Env = append(rootEnv(), "ACTIONS_RUNNER_INPUT_TOKEN="+token, "RUNNER_ALLOW_RUNASROOT=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		what := "config.sh"
		if len(args) > 0 && args[0] == "remove" {
			what = "config.sh remove"
		}
		return fmt.Errorf("%s failed: %v: %s", what, err, tail(out))
	}
	return nil
}

// start starts run.sh with args as the runner user, in the jobs' cgroup,
// in a session of its own and in mount, cgroup and IPC namespaces of its
// own (runnerCommand): System V IPC and POSIX message queues end with its
// last process, and its cgroupfs shows its own processes alone.
func (r *Runner) start(args ...string) error {
	acct, cg, err := r.jobs.get()
	if err != nil {
		return err
	}
	r.mu.Lock()
	runDir := r.runDir
	r.mu.Unlock()
	fd, err := cg.open()
	if err != nil {
		return err
	}
	defer fd.Close()
	cmd := runnerCommand(r.jobs.self, filepath.Join(runDir, "run.sh"), runDir,
		[]string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin", "HOME=" + acct.home, "USER=" + acct.name,
			"LOGNAME=" + acct.name, "SHELL=/bin/bash", "LANG=C.UTF-8"}, acct, fd, args...)
	out := &lineLog{logf: r.logf, prefix: "runner: "}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the runner: %w", err)
	}
	p := &runProcess{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	r.mu.Lock()
	r.run = p
	r.mu.Unlock()
	return nil
}

// Stop asks the run's runner to stop (SIGTERM to its session) and waits up
// to 30 s; its processes are then killed with the jobs' cgroup.
func (r *Runner) Stop(context.Context) error {
	r.lifecycle.Lock()
	defer r.lifecycle.Unlock()
	r.mu.Lock()
	p := r.run
	r.run, r.runDir = nil, ""
	r.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		r.logf("the runner did not stop within 30s")
	}
	return nil
}

// Remove deregisters the run's runner from a fresh root-only copy of the
// installation with the agent's own copy of the registration: the run's
// copy was the jobs' to change, and nothing the runner user wrote decides
// where the removal token goes.
func (r *Runner) Remove(ctx context.Context, token string) error {
	install, err := r.installation()
	if err != nil {
		return err
	}
	regDir := r.registrationDir()
	if !exists(filepath.Join(regDir, ".runner")) {
		return errors.New("the agent kept no registration of the run's runner")
	}
	removal := filepath.Join(r.cfg.Paths.StateDir, "removal")
	if err := copyInstallation(install, regDir, removal, rootOnly); err != nil {
		return fmt.Errorf("preparing the removal: %w", err)
	}
	defer os.RemoveAll(removal)
	if err := r.configure(ctx, removal, token, "remove"); err != nil {
		return err
	}
	return os.RemoveAll(regDir)
}

// lineLog writes each line of the runner's output to logf with a prefix.
// The lines are the jobs' to write (a job can write to its runner's
// output), so each is quoted (no control character reaches the log) and cut
// to maxLogLine bytes, and no more than that is ever held.
type lineLog struct {
	mu     sync.Mutex
	logf   func(string, ...any)
	prefix string
	line   []byte // the current line, up to maxLogLine bytes
	cut    bool   // the current line was longer
}

const maxLogLine = 1024

func (w *lineLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		end := bytes.IndexByte(p, '\n')
		part := p
		if end >= 0 {
			part = p[:end]
		}
		if room := maxLogLine - len(w.line); len(part) > room {
			part, w.cut = part[:room], true
		}
		w.line = append(w.line, part...)
		if end < 0 {
			break
		}
		w.flush()
		p = p[end+1:]
	}
	return n, nil
}

// flush logs the current line and starts the next.
func (w *lineLog) flush() {
	cut := ""
	if w.cut {
		cut = " (cut)"
	}
	w.logf("%s%q%s", w.prefix, w.line, cut)
	w.line, w.cut = w.line[:0], false
}

var _ io.Writer = (*lineLog)(nil)
