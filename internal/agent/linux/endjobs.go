package linux

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// endJobsPatience bounds how long ending the jobs may take before the agent
// gives the instance up.
const endJobsPatience = 20 * time.Second

// endJobs kills the jobs' cgroup, then every process of uid outside it (a
// cron or at job started by its daemon), until /proc shows none: only then
// may a token be used.
func endJobs(cg *jobsCgroup, uid uint32, logf func(string, ...any)) error {
	if err := cg.kill(endJobsPatience); err != nil {
		return err
	}
	deadline := time.Now().Add(endJobsPatience)
	for round := 1; ; round++ {
		left := processesOf(uid)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of the runner user survive: %v", left)
		}
		for _, pid := range left {
			// The command line is the job's to write: quoted and cut.
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			logf("killing process %d of the runner user outside the jobs' cgroup: %.200q", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(time.Duration(min(round, 10)) * 10 * time.Millisecond)
	}
}

// processesOf lists the live processes (zombies are not: they run nothing
// and hold nothing) whose real, effective, saved or file system user id is
// uid.
func processesOf(uid uint32) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ownedBy(pid, uid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func ownedBy(pid int, uid uint32) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false // gone meanwhile
	}
	defer f.Close()
	want := strconv.FormatUint(uint64(uid), 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if state, ok := strings.CutPrefix(line, "State:"); ok && strings.HasPrefix(strings.TrimSpace(state), "Z") {
			return false
		}
		if ids, ok := strings.CutPrefix(line, "Uid:"); ok {
			for _, id := range strings.Fields(ids) {
				if id == want {
					return true
				}
			}
			return false
		}
	}
	return false
}
