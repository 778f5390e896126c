// Package emulator gives tests an AWS endpoint: a real LocalStack when
// AWS_ENDPOINT_URL is set, otherwise a local moto server (LocalStack's port and
// account id) that this package starts on demand. Either way the endpoint
// returned is a front (front.go): a small proxy that refuses what AWS
// refuses and emulators take (internal/awslimits: EC2 user data over 16 KB,
// SQS batches of 11, DynamoDB tables named "a"...), as AWS answers, and
// forwards the rest untouched, except the answers of the emulator it found
// behind it that differ from AWS's (quirks.go: MiniStack's).
//
// The started server is serialized_moto.py: moto's own WSGI app with every
// DynamoDB request serialized, because plain moto_server lets two concurrent
// conditional writes both succeed (real DynamoDB never does), every EC2
// request serialized, because two concurrent launches into one subnet can
// fail with HTTP 500 in moto (never on AWS), and without two costs of
// moto's that grow with the data (see the script).
//
// Several test binaries (`go test ./...` runs packages in parallel) may share
// one server. Every user holds a shared file lock while it uses the server; the
// last user to stop (the one that can upgrade to an exclusive lock) stops the
// server, whichever package started it.
//
// With EC2RUNNERS_TESTACC_AWS=1 (RealAWS, `make testacc-aws`) the provider's
// acceptance tests run against real AWS instead: Ensure then refuses, and
// Image finds Amazon Linux 2023 (DefaultSubnets works unchanged there).
package emulator

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultEndpoint is where Ensure looks for, or starts, the emulator.
const DefaultEndpoint = "http://127.0.0.1:4566"

// accountID is LocalStack's default account id, which tests expect in ARNs.
const accountID = "000000000000"

// listenAddr is DefaultEndpoint's host:port. A variable so this package's own
// tests can use another port.
var listenAddr = "127.0.0.1:4566"

//go:embed serialized_moto.py
var serverScript []byte

// scriptPrefix names the temporary copy of serverScript; it also identifies
// our server in a process's command line.
const scriptPrefix = "ec2runners-moto-"

const (
	// Generous: moto imports for seconds, and far longer on a busy machine.
	startTimeout = 2 * time.Minute
	stopTimeout  = 30 * time.Second
	pollEvery    = 100 * time.Millisecond
)

const installHint = "moto 5 with server extras is required: pip install 'moto[server]>=5,<6' " +
	"(set EC2RUNNERS_PYTHON to the interpreter that has it), " +
	"or set AWS_ENDPOINT_URL to a running LocalStack"

// Ensure returns the endpoint of an AWS emulator and a func to call when done
// with it (safe to call more than once). The endpoint is a front of this
// process's own (front.go) in front of the emulator, which is:
//
//   - AWS_ENDPOINT_URL, if set; stop then leaves it running;
//   - otherwise, if something already listens on 127.0.0.1:4566, that;
//   - otherwise serialized_moto.py, started there with the interpreter in
//     EC2RUNNERS_PYTHON (default python3), which must have moto 5 installed.
//
// A server started here keeps running while any other user (this or another
// process) still holds it; the last user's stop ends it. A server this package
// did not start is never stopped. ctx bounds only the startup. The front
// runs until stop. Against real AWS (RealAWS) it fails: nothing there may
// start or use the emulator.
func Ensure(ctx context.Context) (endpoint string, stop func(), err error) {
	if RealAWS() {
		return "", nil, errRealAWS
	}
	target, release := os.Getenv("AWS_ENDPOINT_URL"), func() {}
	if target == "" {
		if target, release, err = ensureLocal(ctx, listenAddr); err != nil {
			return "", nil, err
		}
	}
	emulator := detect(ctx, target)
	quirks := quirksOf(emulator)
	if len(quirks) > 0 {
		log.Printf("emulator: %s is %s; the tests' front works around its answers that are not AWS's: %s", target, emulator, names(quirks))
	}
	f, err := startFront(target, quirks)
	if err != nil {
		release()
		return "", nil, err
	}
	return f.url, sync.OnceFunc(func() { f.close(); release() }), nil
}

func ensureLocal(ctx context.Context, addr string) (string, func(), error) {
	endpoint := "http://" + addr
	base := filepath.Join(os.TempDir(), "ec2runners-emulator-"+strings.NewReplacer(":", "-", "/", "-").Replace(addr))
	st := &state{addr: addr, pidPath: base + ".pid"}

	// Take the users lock first: while we hold it, no other process's stop
	// can end the server we are about to check for or start.
	users, err := openLock(ctx, base+".users.lock", false)
	if err != nil {
		return "", nil, err
	}
	st.users = users
	stop := sync.OnceFunc(st.release)

	if answers(addr) {
		return endpoint, stop, nil
	}

	// One starter at a time; whoever waited here re-checks first.
	starter, err := openLock(ctx, base+".start.lock", true)
	if err != nil {
		stop()
		return "", nil, err
	}
	defer closeLock(starter)
	if answers(addr) {
		return endpoint, stop, nil
	}
	if err := st.start(ctx); err != nil {
		stop()
		return "", nil, err
	}
	return endpoint, stop, nil
}

// state is one user's hold on the local server.
type state struct {
	addr    string
	pidPath string // records the pid and log file of a server we started
	users   *os.File
	started bool // this user started the server
}

// start runs the server and waits until it answers. The caller holds the
// start lock and has seen nothing listening on addr.
func (st *state) start(ctx context.Context) error {
	python := os.Getenv("EC2RUNNERS_PYTHON")
	if python == "" {
		python = "python3"
	}
	if err := checkMoto(ctx, python); err != nil {
		return err
	}

	script, err := os.CreateTemp("", scriptPrefix+"*.py")
	if err != nil {
		return fmt.Errorf("emulator: %w", err)
	}
	// Python has read the script by the time the server answers (or gave up).
	defer os.Remove(script.Name())
	if _, err := script.Write(serverScript); err != nil {
		script.Close()
		return fmt.Errorf("emulator: writing %s: %w", script.Name(), err)
	}
	if err := script.Close(); err != nil {
		return fmt.Errorf("emulator: writing %s: %w", script.Name(), err)
	}

	logFile, err := os.CreateTemp("", scriptPrefix+"*.log")
	if err != nil {
		return fmt.Errorf("emulator: %w", err)
	}
	defer logFile.Close() // the child has its own copy

	host, port, err := net.SplitHostPort(st.addr)
	if err != nil {
		return fmt.Errorf("emulator: %w", err)
	}
	// Not CommandContext: the server must outlive ctx (and possibly us).
	cmd := exec.Command(python, script.Name(), "-H", host, "-p", port)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "MOTO_ACCOUNT_ID="+accountID, "MOTO_PORT="+port)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	setProcessGroup(cmd) // so stop can end the server and anything it spawned
	if err := cmd.Start(); err != nil {
		os.Remove(logFile.Name())
		return fmt.Errorf("emulator: starting %s: %w", python, err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()

	fail := func(why string) error {
		killGroup(pid)
		return fmt.Errorf("emulator: moto server on %s %s; its log is %s", st.addr, why, logFile.Name())
	}

	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			// Lost a race for the port to a server someone else started
			// meanwhile: use theirs.
			if answers(st.addr) {
				os.Remove(logFile.Name())
				return nil
			}
			return fail("exited during startup")
		case <-ctx.Done():
			return fail(fmt.Sprintf("was not ready: %v", ctx.Err()))
		case <-deadline.C:
			return fail(fmt.Sprintf("did not answer within %s", startTimeout))
		case <-tick.C:
			if !answers(st.addr) {
				continue
			}
			rec := fmt.Sprintf("%d\n%s\n", pid, logFile.Name())
			if err := os.WriteFile(st.pidPath, []byte(rec), 0o600); err != nil {
				killGroup(pid)
				return fmt.Errorf("emulator: %w", err)
			}
			st.started = true
			return nil
		}
	}
}

// release drops this user's hold; the last user stops a server we started.
func (st *state) release() {
	defer closeLock(st.users)
	if !haveLocks && !st.started {
		return // cannot tell whether others use it: leave it to its starter
	}
	if !tryExclusive(st.users) {
		return // others still use the server
	}
	data, err := os.ReadFile(st.pidPath)
	if err != nil {
		return // not ours (e.g. a moto_server started by hand), or gone
	}
	os.Remove(st.pidPath)
	lines := strings.Split(string(data), "\n")
	pid, err := strconv.Atoi(lines[0])
	if err != nil || pid <= 0 || (procAvailable() && !runsOurScript(pid)) {
		return // stale record: that server is gone
	}
	// Done when the port is free and (where /proc tells) the process gone.
	done := func() bool { return !answers(st.addr) && !(procAvailable() && runsOurScript(pid)) }
	terminateGroup(pid)
	deadline := time.Now().Add(stopTimeout)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(pollEvery)
	}
	if !done() {
		killGroup(pid)
		for i := 0; i < 20 && !done(); i++ {
			time.Sleep(pollEvery)
		}
	}
	if len(lines) > 1 && strings.HasPrefix(filepath.Base(lines[1]), scriptPrefix) {
		os.Remove(lines[1])
	}
}

// checkMoto fails with installation advice unless python can import moto 5's
// server.
func checkMoto(ctx context.Context, python string) error {
	const probe = "import sys, moto, moto.server; sys.exit(0 if moto.__version__.split('.')[0] == '5' else 3)"
	cmd := exec.CommandContext(ctx, python, "-c", probe)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("emulator: checking for moto: %w", ctx.Err())
	}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr) && exitErr.ExitCode() == 3:
		err = errors.New("installed moto is not version 5")
	case errors.As(err, &exitErr):
		if msg := lastLine(out.String()); msg != "" {
			err = errors.New(msg)
		}
	}
	return fmt.Errorf("emulator: %s cannot run moto (%v); %s", python, err, installHint)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// answers reports whether something accepts TCP connections on addr. A plain
// dial, because LocalStack has no /moto-api/.
func answers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// procAvailable reports whether /proc can tell what a pid runs (Linux).
func procAvailable() bool {
	_, err := os.Stat("/proc/self/cmdline")
	return err == nil
}

// runsOurScript reports whether pid is alive (not a zombie) and runs our
// script; it guards against a stale pid file.
func runsOurScript(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(cmdline, []byte(scriptPrefix))
}

// openLock opens path and locks it (shared or exclusive), waiting for ctx.
func openLock(ctx context.Context, path string, exclusive bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	for {
		ok, err := tryLock(f, exclusive)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("emulator: locking %s: %w", path, err)
		}
		if ok {
			return f, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("emulator: waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// tryExclusive turns a held shared lock into an exclusive one if nobody else
// holds the file.
func tryExclusive(f *os.File) bool {
	ok, err := tryLock(f, true)
	return ok && err == nil
}

func closeLock(f *os.File) {
	unlock(f)
	f.Close()
}
