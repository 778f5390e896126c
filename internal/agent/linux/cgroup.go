package linux

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// jobsCgroup is the cgroup (v2) the runner and every process it starts
// run in: the kernel keeps a process's descendants in it, and none of
// them can move out (the cgroup files are root's), so killing it ends them
// all, however they forked or detached.
type jobsCgroup struct {
	dir string
}

// jobsCgroupName is the jobs' cgroup below the agent's own. The agent's
// systemd unit delegates its subtree (Delegate=yes), so systemd leaves it
// to the agent.
const jobsCgroupName = "ec2runners-jobs"

// openJobsCgroup creates the jobs' cgroup below the agent's own, in the
// cgroup2 hierarchy (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid
// hosts).
func openJobsCgroup() (*jobsCgroup, error) {
	mount, err := Cgroup2Mount()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroup()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(mount, own, jobsCgroupName)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating the jobs' cgroup: %w", err)
	}
	c := &jobsCgroup{dir: dir}
	return c, c.readable()
}

// readable lets the runner user read the cgroup, whatever the agent's
// umask: the jobs' cgroupfs is this cgroup (its processes, its limits).
// It works on the cgroup's descriptor, as root does everywhere a job
// might reach.
func (c *jobsCgroup) readable() error {
	f, err := c.open()
	if err != nil {
		return fmt.Errorf("the jobs' cgroup: %w", err)
	}
	defer f.Close()
	if err := f.Chmod(0o755); err != nil {
		return fmt.Errorf("the jobs' cgroup: %w", err)
	}
	return nil
}

// Cgroup2Mount is where the cgroup2 hierarchy is mounted.
func Cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	return visibleCgroup2Mount(f)
}

// visibleCgroup2Mount is the mount point of the cgroup2 file system that
// its path reaches, as mountinfo describes the mounts. mountinfo may list
// one a later mount hides (a namespace that mounted its own cgroup2 over
// the copy it got: a container, the runner's namespaces), and lists a moved
// mount (an initramfs's /sys) before the root it was moved to: so the path
// is followed from the root mount down, mount by mount, as the kernel
// follows it.
func visibleCgroup2Mount(mountinfo io.Reader) (string, error) {
	type mount struct{ id, parent, point, fstype string }
	var mounts []mount
	ids := map[string]bool{}
	sc := bufio.NewScanner(mountinfo)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, fsFields := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(fsFields) >= 1 {
			mounts = append(mounts, mount{fields[0], fields[1], unescapeMount(fields[4]), fsFields[0]})
			ids[fields[0]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	// reached is the mount a path leads to: at each mount, the path enters
	// the child mounted nearest the mount's root on the path (the one
	// mounted last, of two at the same point).
	reached := func(path string) int {
		// The root mount's parent is outside the process's root, or itself.
		at := slices.IndexFunc(mounts, func(m mount) bool { return m.point == "/" && (!ids[m.parent] || m.parent == m.id) })
		for range mounts {
			if at < 0 {
				return -1
			}
			next := -1
			for i, m := range mounts {
				onPath := m.point == path || m.point == "/" || strings.HasPrefix(path, m.point+"/")
				if i != at && m.parent == mounts[at].id && onPath && (next < 0 || len(m.point) <= len(mounts[next].point)) {
					next = i
				}
			}
			if next < 0 {
				return at
			}
			at = next
		}
		return -1 // a loop of parents: no mountinfo of Linux's
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if mounts[i].fstype == "cgroup2" && reached(mounts[i].point) == i {
			return mounts[i].point, nil
		}
	}
	return "", errors.New("no cgroup2 hierarchy is mounted: the agent needs cgroup v2 to end every process of a job")
}

// ownCgroup is the agent's cgroup in the cgroup2 hierarchy.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return path, nil
		}
	}
	return "", errors.New("the agent is in no cgroup2 cgroup")
}

// open is a descriptor of the cgroup, to start a process in it
// (SysProcAttr.CgroupFD).
func (c *jobsCgroup) open() (*os.File, error) {
	return os.OpenFile(c.dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
}

// procs are the processes in the cgroup.
func (c *jobsCgroup) procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// kill kills every process in the cgroup and waits until none is left:
// cgroup.kill (Linux 5.14) in one step, else the cgroup frozen (no process
// can fork meanwhile) and each process killed. A cgroup that was killed is
// made anew: Linux (seen on 6.18) also kills the processes later started
// into a killed cgroup with clone3's CLONE_INTO_CGROUP, as the runner is.
func (c *jobsCgroup) kill(patience time.Duration) error {
	deadline := time.Now().Add(patience)
	killed := false
	for {
		pids, err := c.procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			if killed {
				return c.renew()
			}
			return nil
		}
		killed = true
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v are still in the jobs' cgroup %s", pids, c.dir)
		}
		if err := os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0); err != nil {
			c.freezeAndKill(pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *jobsCgroup) freezeAndKill(pids []int) {
	freeze := filepath.Join(c.dir, "cgroup.freeze")
	_ = os.WriteFile(freeze, []byte("1"), 0)
	for _, pid := range pids {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	_ = os.WriteFile(freeze, []byte("0"), 0)
}

// renew replaces the empty cgroup with a new one of the same name.
func (c *jobsCgroup) renew() error {
	if err := os.Remove(c.dir); err != nil {
		return fmt.Errorf("renewing the jobs' cgroup: %w", err)
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return fmt.Errorf("renewing the jobs' cgroup: %w", err)
	}
	return c.readable()
}
