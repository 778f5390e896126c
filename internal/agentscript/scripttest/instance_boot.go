package scripttest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/await"
)

// The instance's processes: its init, started in the namespaces, what it
// reports, and its end.

// env is the environment of the instance's init: nothing of the test's.
func (i *Instance) env() []string {
	return []string{"PATH=" + i.path("bin") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

// boot starts the instance's init in its namespaces: unshare forks it as
// PID 1 of a new PID namespace with a new mount namespace and /proc, and
// kills it (and so every process of the namespace) if unshare dies.
func (i *Instance) boot() error {
	var err error
	// Read-write: opening never waits for a writer, and reading never ends
	// in EOF while the instance's processes come and go.
	if i.events, err = os.OpenFile(i.path("run/events"), os.O_RDWR, 0); err != nil {
		return err
	}
	go i.readEvents()
	i.cmd = exec.Command("ip", "netns", "exec", i.netns.name,
		"unshare", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--", "/bin/bash", i.path("run/init"))
	i.cmd.Env = i.env()
	i.cmd.Stdout, i.cmd.Stderr = i.bootLog, i.bootLog
	i.cmd.WaitDelay = 10 * time.Second
	if err := i.cmd.Start(); err != nil {
		return err
	}
	go func() {
		_ = i.cmd.Wait()
		close(i.exited)
		i.finish()
	}()
	// unshare's only child is the instance's init.
	pid := i.cmd.Process.Pid
	err = await.Poll(await.Patience, func() error {
		select {
		case <-i.exited:
			return nil
		default:
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if err != nil {
			return err
		}
		if i.initPID, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("the instance's init has not started: %q", b)
		}
		return nil
	})
	if err == nil && i.initPID == 0 {
		err = errors.New("the instance's init ended at once")
	}
	return err
}

// readEvents follows what the instance's init and systemctl report: lines
// "<user-data|unit> <started|exited> <pid|status>".
func (i *Instance) readEvents() {
	sc := bufio.NewScanner(i.events)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		fmt.Fprintf(i.bootLog, "instance stand-in: %s\n", sc.Text())
		switch {
		case fields[0] == "user-data" && fields[1] == "exited":
			status, _ := strconv.Atoi(fields[2])
			i.mu.Lock()
			i.userData = &status
			i.mu.Unlock()
		case fields[0] == AgentUnit && fields[1] == "exited":
			i.finish()
		}
	}
}

func (i *Instance) finish() { i.doneOnce.Do(func() { close(i.done) }) }

// Output is what the agent's unit wrote (its journal) so far.
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

// Done is closed when the agent's unit has exited (the stand-in does not
// restart it), or the instance stopped.
func (i *Instance) Done() <-chan struct{} { return i.done }

// Command runs a command in the instance, as root, in its namespaces, with
// its init's environment: the instance's ps, iptables or files.
func (i *Instance) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"--target", strconv.Itoa(i.initPID), "--net", "--pid", "--mount", "--", name}, args...)...)
	cmd.Env = i.env()
	return cmd
}

// Stop kills every process of the instance and returns once they are gone.
func (i *Instance) Stop() {
	i.stopOnce.Do(func() {
		if i.cmd == nil || i.cmd.Process == nil {
			return
		}
		select {
		case <-i.exited:
			return
		default:
		}
		// The kernel kills every process of a PID namespace whose init dies,
		// and unshare exits only once it has reaped that init, after them.
		if i.initPID > 0 {
			_ = syscall.Kill(i.initPID, syscall.SIGKILL)
		} else {
			_ = i.cmd.Process.Kill()
		}
		select {
		case <-i.exited:
		case <-time.After(await.Patience):
			_ = i.cmd.Process.Kill()
		}
	})
	i.finish()
}

// cleanup ends the instance and removes all it made: its namespace, its
// user and the user's home, and its files.
func (i *Instance) cleanup(t testing.TB) {
	i.Stop()
	if t.Failed() {
		t.Logf("instance %s (user %s) boot log:\n%s\nagent output:\n%s", i.ID, i.RunnerUser, i.BootLog(), i.Output())
	}
	var errs []error
	for _, c := range i.closers {
		_ = c.Close()
	}
	if i.events != nil {
		_ = i.events.Close()
	}
	if i.netns != nil {
		errs = append(errs, i.netns.delete())
	}
	errs = append(errs, removeUser(i.RunnerUser))
	if i.Root != "" {
		errs = append(errs, os.RemoveAll(i.Root))
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("cleaning up the instance stand-in: %v", err)
	}
}
