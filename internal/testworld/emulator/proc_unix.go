//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package emulator

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// haveLocks: flock lets the last user, whoever it is, stop the server.
const haveLocks = true

// setProcessGroup puts the server in its own process group, so it neither
// gets the test's terminal signals nor dies with it, and stop can end the
// whole group.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func terminateGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGTERM) }

func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }

// tryLock takes (or converts to) a shared or exclusive flock without
// blocking; false means someone else holds a conflicting lock.
func tryLock(f *os.File, exclusive bool) (bool, error) {
	how := syscall.LOCK_SH | syscall.LOCK_NB
	if exclusive {
		how = syscall.LOCK_EX | syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		default:
			return false, err
		}
	}
}

func unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
