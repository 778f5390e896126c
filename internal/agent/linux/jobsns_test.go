package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The runner's command runs its script as the runner user, with the
// environment it was given, at the root of a cgroup namespace (the jobs'
// cgroup), whose cgroupfs lists the script's processes alone and, on a
// hybrid host, hides the v1 hierarchies; it runs nothing when a step fails.
func TestRunnerCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the runner's namespaces want root: run as root (CI does)")
	}
	mount, err := Cgroup2Mount()
	if err != nil {
		t.Fatal(err)
	}
	own, err := ownCgroup()
	if err != nil {
		t.Fatal(err)
	}
	cg := &jobsCgroup{dir: filepath.Join(mount, own, fmt.Sprintf("ec2runners-test-%d", os.Getpid()))}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(cg.dir) })
	if err := cg.readable(); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "ec2runners-runner-") // t.TempDir's parent is root's alone
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
echo "ran as $(id -u):$(id -G) with $GIVEN in $(grep '^0::' /proc/self/cgroup)"
echo "v1 hierarchies: $(find /sys/fs/cgroup -name tasks 2>/dev/null | wc -l)"
echo "queues: $(ls -A /dev/mqueue | wc -l)"
echo "self: $$"
cat $(find /sys/fs/cgroup -name cgroup.procs 2>/dev/null)
`), 0o755); err != nil {
		t.Fatal(err)
	}
	// A POSIX message queue of the agent's IPC namespace, in its
	// /dev/mqueue (mounted for the test where the machine has none).
	if _, err := os.Stat(mqueueDir); os.IsNotExist(err) {
		if err := os.Mkdir(mqueueDir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(mqueueDir) })
		if err := unix.Mount("mqueue", mqueueDir, "mqueue", 0, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(mqueueDir, 0) })
	}
	queue, err := unix.BytePtrFromString(fmt.Sprintf("ec2runners-test-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(queue)), unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644, 0, 0, 0); errno != 0 {
		t.Fatalf("mq_open: %v", errno)
	}
	t.Cleanup(func() { unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(queue)), 0, 0) })
	if entries, err := os.ReadDir(mqueueDir); err != nil || len(entries) == 0 {
		t.Fatalf("the agent's /dev/mqueue lists %d queues (%v), want its own", len(entries), err)
	}
	run := func(acct account) (string, error) {
		fd, err := cg.open()
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		out, err := runnerCommand(os.Args[0], script, dir, []string{"PATH=/usr/bin:/bin", "GIVEN=the given environment"}, acct, fd).CombinedOutput()
		return string(out), err
	}

	out, err := run(account{uid: 65534, gid: 65534})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) < 5 {
		t.Fatalf("%v:\n%s", err, out)
	}
	if want := "ran as 65534:65534 with the given environment in 0::/"; lines[0] != want {
		t.Errorf("%q, want %q", lines[0], want)
	}
	if lines[1] != "v1 hierarchies: 0" {
		t.Errorf("%s: the script could list the processes of cgroup v1's", lines[1])
	}
	if lines[2] != "queues: 0" {
		t.Errorf("%s: the script saw the agent's POSIX message queues in /dev/mqueue", lines[2])
	}
	self := strings.TrimPrefix(lines[3], "self: ")
	seen := lines[4:]
	if !strings.Contains(" "+strings.Join(seen, " ")+" ", " "+self+" ") {
		t.Errorf("the script (pid %s) did not see itself in cgroupfs: %v", self, seen)
	}
	for _, pid := range seen {
		if pid == strconv.Itoa(os.Getpid()) || pid == "1" {
			t.Errorf("the script saw pid %s, outside its cgroup: %v", pid, seen)
		}
	}

	if out, err := run(account{uid: 0, gid: 0}); err == nil || strings.Contains(out, "ran as") {
		t.Errorf("the runner ran as root (%v):\n%s", err, out)
	}
}
