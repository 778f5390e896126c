package linux

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// StartRunnerCommand is the agent's hidden command that starts the runner
// in the jobs' namespaces (StartRunner). A cgroup namespace's root is the
// cgroup of the process that makes it, and Go runs no code of the caller's
// in a child between its clone into the jobs' cgroup and its exec: the
// agent executes itself to make it.
const StartRunnerCommand = "start-runner"

// runnerCommand starts script with args as acct, in dir with env, in the
// jobs' cgroup, in a session of its own and in mount, IPC and cgroup
// namespaces of its own: self (the agent's executable) starts as root with
// StartRunnerCommand, sets the namespaces up, becomes acct and executes
// script.
func runnerCommand(self, script, dir string, env []string, acct account, cgroup *os.File, args ...string) *exec.Cmd {
	cmd := exec.Command(self, append([]string{StartRunnerCommand,
		"--uid", strconv.FormatUint(uint64(acct.uid), 10), "--gid", strconv.FormatUint(uint64(acct.gid), 10), "--", script}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid:      true,
		Cloneflags:  syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC,
		UseCgroupFD: true,
		CgroupFD:    int(cgroup.Fd()),
	}
	return cmd
}

// StartRunner is StartRunnerCommand, run as root by runnerCommand with
// args "--uid UID --gid GID -- SCRIPT [ARG...]" in a mount namespace of its
// own and in the jobs' cgroup: it makes the jobs' cgroup the root of a
// cgroup namespace, mounts cgroupfs as that namespace sees it, drops root
// for good and executes SCRIPT with its arguments and its environment. It returns only when a step
// failed, and then the runner does not start.
func StartRunner(args []string) error {
	flags := flag.NewFlagSet(StartRunnerCommand, flag.ContinueOnError)
	uid := flags.String("uid", "", "the runner user's id")
	gid := flags.String("gid", "", "the runner user's group id")
	if err := flags.Parse(args); err != nil {
		return err
	}
	u, errU := strconv.ParseUint(*uid, 10, 32)
	g, errG := strconv.ParseUint(*gid, 10, 32)
	if errU != nil || errG != nil || u == 0 || flags.NArg() < 1 {
		return errors.New("usage: ec2runners-agent " + StartRunnerCommand + " --uid UID --gid GID -- SCRIPT [ARG...] (UID not 0)")
	}
	// A namespace entered with unshare is the calling thread's: this
	// thread does every step and executes the script.
	runtime.LockOSThread()
	if err := enterJobsNamespaces(); err != nil {
		return fmt.Errorf("the runner's namespaces: %w", err)
	}
	if err := becomeUser(int(u), int(g)); err != nil {
		return fmt.Errorf("becoming the runner user: %w", err)
	}
	script := flags.Arg(0)
	err := syscall.Exec(script, flags.Args(), os.Environ())
	return fmt.Errorf("executing %s: %w", script, err)
}

// cgroupFSDir is where distributions mount the cgroup hierarchies: cgroup2
// itself, or on a hybrid host the v1 hierarchies and cgroup2 at unified.
const cgroupFSDir = "/sys/fs/cgroup"

// enterJobsNamespaces makes the process's cgroup (the jobs') the root of a
// new cgroup namespace and mounts cgroup2 as it sees it at the hierarchy's
// mount point, so that no cgroup.procs lists a process outside the jobs'
// cgroup, and /dev/mqueue as the runner's IPC namespace has it. An empty read-only tmpfs covers the cgroup file systems first:
// on a hybrid host, the v1 hierarchies (their pid lists too); and Linux
// mounts no file system over the root of a mount of the same one.
func enterJobsNamespaces() error {
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("a cgroup namespace: %w", err)
	}
	// The mounts stay in this namespace (systemd makes / shared).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mounts: %w", err)
	}
	mount, err := Cgroup2Mount()
	if err != nil {
		return err
	}
	cover := mount
	if strings.HasPrefix(mount, cgroupFSDir+"/") {
		cover = cgroupFSDir
	}
	const mountFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("tmpfs", cover, "tmpfs", mountFlags, "mode=0755,size=4k"); err != nil {
		return fmt.Errorf("covering %s: %w", cover, err)
	}
	if err := os.MkdirAll(mount, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("", cover, "", unix.MS_REMOUNT|unix.MS_RDONLY|mountFlags, ""); err != nil {
		return fmt.Errorf("covering %s: %w", cover, err)
	}
	if err := unix.Mount("cgroup2", mount, "cgroup2", mountFlags, ""); err != nil {
		return fmt.Errorf("mounting cgroup2 at %s: %w", mount, err)
	}
	// /dev/mqueue shows the queues of the IPC namespace that mounted it:
	// the agent's, until mounted again from the runner's own.
	if info, err := os.Stat(mqueueDir); err == nil && info.IsDir() {
		if err := unix.Mount("mqueue", mqueueDir, "mqueue", mountFlags, ""); err != nil {
			return fmt.Errorf("mounting the runner's POSIX message queues at %s: %w", mqueueDir, err)
		}
	}
	return nil
}

const mqueueDir = "/dev/mqueue"

// becomeUser drops root for good: the user's groups (its own alone), then
// its real, effective and saved ids, in every thread.
func becomeUser(uid, gid int) error {
	if err := syscall.Setgroups([]int{gid}); err != nil {
		return err
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return err
	}
	return syscall.Setresuid(uid, uid, uid)
}
