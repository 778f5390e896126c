package agentscript_test

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
)

// cgroupPidsJob prints every pid the cgroup file systems it can reach
// list (/sys/fs/cgroup, and every cgroup mount mountinfo lists), in lines
// "SEEN <pid> <file>", then its own pid, "SELF <pid>".
const cgroupPidsJob = `points=$(awk '{ split($0, s, " - "); split(s[1], f, " "); split(s[2], t, " ") } t[1] ~ /^cgroup2?$/ { print f[5] }' /proc/self/mountinfo)
{ find /sys/fs/cgroup $points \( -name cgroup.procs -o -name cgroup.threads -o -name tasks \) 2>/dev/null || true; } | sort -u |
while read -r file; do
	for pid in $(cat "$file" 2>/dev/null); do echo "SEEN $pid $file"; done
done
echo "SELF $$"
`

// A job lists through cgroupfs only the processes of the jobs' cgroup (its
// own, the runner's and those of the jobs), as /proc shows it only its
// user's: none of the agent's, nor any other process outside the jobs'
// cgroup.
func TestInstance_cgroupfsShowsJobsOnlyTheirs(t *testing.T) {
	f, inst := startServing(t, "run-1")
	job := runJob(t, f, "run-1", cgroupPidsJob)
	if job.ExitCode != 0 {
		t.Fatalf("the job failed (exit code %d):\n%s", job.ExitCode, job.Output)
	}
	seen := map[string][]string{} // pid: the files that list it
	self := ""
	sc := bufio.NewScanner(strings.NewReader(job.Output))
	for sc.Scan() {
		switch fields := strings.Fields(sc.Text()); {
		case len(fields) == 3 && fields[0] == "SEEN" && fields[1] != "0":
			seen[fields[1]] = append(seen[fields[1]], fields[2])
		case len(fields) == 2 && fields[0] == "SELF":
			self = fields[1]
		}
	}
	if _, ok := seen[self]; self == "" || !ok {
		t.Errorf("the job did not see itself (pid %q) in its own cgroup: cgroupfs is not mounted as it sees it:\n%s", self, job.Output)
	}

	outside := outsideJobsCgroup(t, inst.Command("sh", "-c", `for t in /proc/[0-9]*/task/[0-9]*; do echo "${t##*/} $(grep '^0::' "$t/cgroup")"; done`))
	agent, err := inst.Command("pgrep", "-f", "ec2runners-agent run").Output()
	if err != nil {
		t.Fatalf("pgrep: %v", err)
	}
	for _, pid := range strings.Fields(string(agent)) {
		if _, ok := outside[pid]; !ok {
			t.Errorf("the agent (pid %s) is not outside the jobs' cgroup: %v", pid, outside)
		}
		if files, ok := seen[pid]; ok {
			t.Errorf("the job saw the agent's pid %s in %v", pid, files)
		}
	}
	for pid, cgroup := range outside {
		if files, ok := seen[pid]; ok {
			t.Errorf("the job saw pid %s of cgroup %s, outside the jobs' cgroup, in %v", pid, cgroup, files)
		}
	}
}

// outsideJobsCgroup runs list, which prints a line "<id> 0::<cgroup>" for
// each thread of the instance (a process's first thread has its pid), and
// returns the ids whose cgroup is not the jobs' (ec2runners-jobs, below the
// agent's), with their cgroups.
func outsideJobsCgroup(t *testing.T, list *exec.Cmd) map[string]string {
	t.Helper()
	out, err := list.Output()
	if err != nil {
		t.Fatalf("listing the instance's processes: %v", err)
	}
	outside := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pid, cgroup, _ := strings.Cut(line, " ")
		if cgroup == "" { // the thread ended meanwhile
			continue
		}
		if !strings.HasSuffix(cgroup, "/ec2runners-jobs") {
			outside[pid] = cgroup
		}
	}
	return outside
}
