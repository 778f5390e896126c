//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package emulator

import (
	"os"
	"os/exec"
)

// Without flock or process groups, only the stop of the user that started
// the server ends it.
const haveLocks = false

func setProcessGroup(*exec.Cmd) {}

func terminateGroup(pid int) { killGroup(pid) }

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func tryLock(*os.File, bool) (bool, error) { return true, nil }

func unlock(*os.File) {}
