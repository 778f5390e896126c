package scripttest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// The instance's boots: each one's network namespace and init, started in
// the namespaces, what they report, and their end.

// boot is one run of the instance, from power-on to power-off.
type boot struct {
	netns    *netns
	closers  []io.Closer   // the metadata service and the forwarders in netns
	cmd      *exec.Cmd     // ip netns exec <netns> unshare ... <init>
	initPID  int           // in the host's PID namespace
	exited   chan struct{} // every process of the boot is gone
	done     chan struct{} // the agent's unit exited, or the boot ended
	doneOnce sync.Once
}

func (b *boot) finish() { b.doneOnce.Do(func() { close(b.done) }) }

// env is the environment of the instance's init: nothing of the test's.
func (i *Instance) env() []string {
	return []string{"PATH=" + i.path("bin") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

// powerOn boots the instance, unless the test is over: a network namespace
// of its own with the metadata service and the forwarders in it, and its
// init. Whatever it made before failing is the boot's, which end removes.
func (i *Instance) powerOn() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	select {
	case <-i.ended:
		return errors.New("the test is over")
	default:
	}
	b := &boot{exited: make(chan struct{}), done: make(chan struct{})}
	i.up = b
	i.boots++
	var err error
	if b.netns, err = newNetns(); err != nil {
		return err
	}
	if err := b.serveMetadata(i.Metadata.Handler()); err != nil {
		return err
	}
	urls := append([]string{i.Options.Endpoints.AWS, i.Options.Endpoints.Lambda, i.Options.GitHubURL, i.Options.RunnerDownloadURL, i.Options.AgentDownloadURL,
		i.Options.RunnerReleasesURL, i.Options.RunnerDownloadBase}, i.reach...)
	for _, addr := range loopbackAddrs(urls...) {
		f, err := b.netns.forward(addr)
		if err != nil {
			return err
		}
		b.closers = append(b.closers, f)
	}
	return b.startInit(i)
}

// serveMetadata serves the instance metadata at EC2's addresses, in the
// namespace.
func (b *boot) serveMetadata(h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	b.closers = append(b.closers, srv)
	for _, addr := range []struct{ network, addr string }{{"tcp4", imdsIPv4 + ":80"}, {"tcp6", "[" + imdsIPv6 + "]:80"}} {
		l, err := b.netns.listen(addr.network, addr.addr)
		if err != nil {
			return err
		}
		go func() { _ = srv.Serve(l) }()
	}
	return nil
}

// startInit starts the instance's init in the boot's namespaces: unshare
// forks it as PID 1 of a new PID namespace with a new mount namespace and
// /proc, and kills it (and so every process of the namespace) if unshare
// dies. It starts in the instance's cgroup, which a cgroup namespace makes
// the root of the instance's cgroup hierarchy, as a machine's own is.
func (b *boot) startInit(i *Instance) error {
	cg, err := i.cgroup()
	if err != nil {
		return err
	}
	defer cg.Close()
	b.cmd = exec.Command("ip", "netns", "exec", b.netns.name,
		"unshare", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--cgroup", "--", "/bin/bash", i.path("run/init"))
	b.cmd.Env = i.env()
	b.cmd.Stdout, b.cmd.Stderr = i.bootLog, i.bootLog
	b.cmd.WaitDelay = 10 * time.Second
	b.cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	if err := b.cmd.Start(); err != nil {
		return err
	}
	go func() {
		_ = b.cmd.Wait()
		close(b.exited)
		b.finish()
	}()
	// unshare's only child is the instance's init.
	pid := b.cmd.Process.Pid
	err = await.Poll(await.Patience, func() error {
		select {
		case <-b.exited:
			return nil
		default:
		}
		c, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if err != nil {
			return err
		}
		if b.initPID, err = strconv.Atoi(strings.TrimSpace(string(c))); err != nil {
			return fmt.Errorf("the instance's init has not started: %q", c)
		}
		return nil
	})
	if err == nil && b.initPID == 0 {
		err = errors.New("the instance's init ended at once")
	}
	return err
}

// halt ends every process of the boot, then its network namespace, and
// returns once they are gone.
func (b *boot) halt() error {
	if b.cmd != nil && b.cmd.Process != nil {
		// The kernel kills every process of a PID namespace whose init dies,
		// and unshare exits only once it has reaped that init, after them.
		if b.initPID > 0 {
			_ = syscall.Kill(b.initPID, syscall.SIGKILL)
		} else {
			_ = b.cmd.Process.Kill()
		}
		select {
		case <-b.exited:
		case <-time.After(await.Patience):
			_ = b.cmd.Process.Kill()
		}
	}
	b.finish()
	for _, c := range b.closers {
		_ = c.Close()
	}
	if b.netns == nil {
		return nil
	}
	return b.netns.delete()
}

// readEvents follows what the instance's init and systemctl report, over
// all its boots: lines "<user-data|unit> <started|exited> <pid|status>".
func (i *Instance) readEvents() {
	sc := bufio.NewScanner(i.events)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		fmt.Fprintf(i.bootLog, "instance stand-in: %s\n", sc.Text())
		i.mu.Lock()
		switch {
		case fields[0] == "user-data" && fields[1] == "exited":
			status, _ := strconv.Atoi(fields[2])
			i.userData = &status
		case fields[0] == AgentUnit && fields[1] == "exited" && i.up != nil:
			i.up.finish()
		}
		i.mu.Unlock()
	}
}

// Output is what the agent's unit wrote (its journal) so far, over all the
// instance's boots.
func (i *Instance) Output() string {
	b, _ := os.ReadFile(i.path("var/log/journal/" + AgentUnit + ".log"))
	return string(b)
}

// BootLog is the output of the instance's init and of the user data (as
// cloud-init-output.log has it), and the units' starts and exits.
func (i *Instance) BootLog() string { return i.bootLog.String() }

// SystemctlCalls are the arguments of every systemctl call, in order.
func (i *Instance) SystemctlCalls() []string {
	b, _ := os.ReadFile(i.path("run/systemctl.calls"))
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// UserDataExit is the user data's exit status, once it has exited.
func (i *Instance) UserDataExit() (status int, exited bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.userData == nil {
		return 0, false
	}
	return *i.userData, true
}

// Boots counts the instance's boots so far: 1 once StartInstance returns,
// and one more each time it is started after a stop.
func (i *Instance) Boots() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.boots
}

// Running tells whether the instance is up: booted, and not stopped since.
func (i *Instance) Running() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.up != nil
}

// Done is closed when the agent's unit has exited (the stand-in does not
// restart it), or the current boot ended (the instance stopped); it is
// closed while the instance is stopped.
func (i *Instance) Done() <-chan struct{} {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.up == nil {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	return i.up.done
}

// Command runs a command in the running instance, as root, in its
// namespaces, with its init's environment: the instance's ps, iptables or
// files. It fails while the instance is stopped.
func (i *Instance) Command(name string, args ...string) *exec.Cmd {
	i.mu.Lock()
	pid := 0
	if i.up != nil {
		pid = i.up.initPID
	}
	i.mu.Unlock()
	cmd := exec.Command("nsenter", append([]string{"--target", strconv.Itoa(pid), "--net", "--pid", "--mount", "--", name}, args...)...)
	cmd.Env = i.env()
	return cmd
}

// end ends the instance for good, at the test's end: it never boots again,
// and its current boot, if any, is halted.
func (i *Instance) end() error {
	i.endOnce.Do(func() { close(i.ended) })
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.up == nil {
		return nil
	}
	err := i.up.halt()
	i.up = nil
	return err
}

// cleanup ends the instance and removes all it made: its user and the
// user's home, and its files.
func (i *Instance) cleanup(t testing.TB) {
	errs := []error{i.end(), i.removeCgroup()}
	if t.Failed() {
		t.Logf("instance %s (user %s) boot log:\n%s\nagent output:\n%s", i.ID, i.RunnerUser, i.BootLog(), i.Output())
	}
	if i.events != nil {
		_ = i.events.Close()
	}
	errs = append(errs, removeUser(i.RunnerUser))
	if i.Root != "" {
		errs = append(errs, os.RemoveAll(i.Root))
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("cleaning up the instance stand-in: %v", err)
	}
}
