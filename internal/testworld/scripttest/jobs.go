package scripttest

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Jobs, as a workflow's runs-on queues them: a test queues a shell script
// for a repository with a runs-on; the stub run.sh of a runner GitHub would
// send the job to takes it, runs it as the user the runner runs as, and
// posts the output and exit code back.
//
// GitHub's routing, which the stub enforces (GitHub's "Choosing the runner
// for a job",
// https://docs.github.com/en/actions/using-jobs/choosing-the-runner-for-a-job,
// and "Managing access to self-hosted runners using groups"): a
// repository's runner takes only the jobs of its repository; an
// organization's runner only those of the organization's repositories its
// runner group lets in (GroupAccess: the selected ones or all, and public
// ones only if the group allows them); runs-on's group, which names one of
// the organization's runner groups (case-insensitively; a repository's
// runners are in none), restricts the job to the runners of that group;
// and a runner must have every label of runs-on's labels (compared
// case-insensitively). A runner registered with --no-default-labels has
// only its own labels, so runs-on: self-hosted does not reach it.

// RunsOn is a job's runs-on: labels (a string or a list: a runner must
// have all of them), group: NAME, or both (group: with labels:).
type RunsOn struct {
	Group  string
	Labels []string
}

// Job is a queued job and, once a runner has run it, its result.
type Job struct {
	ID, Script string
	// Repository ("owner/name") queued the job; "" for QueueJob's, which
	// take the repository of the runner that takes them.
	Repository string
	RunsOn     RunsOn
	QueuedAt   time.Time
	Runner     string // the runner that took it; "" while queued
	Output     string // stdout and stderr, as the job wrote them
	ExitCode   int
	Done       bool
	// Canceled: no runner took the job within github.MaxJobQueueTime, so
	// GitHub cancels it (Done, never run; GitHub may take up to 48 hours to).
	Canceled bool
}

type jobQueue struct {
	list []*Job
	// queued is closed, and replaced, whenever a job is queued: it wakes the
	// runners' long polls.
	queued chan struct{}
}

func newJobQueue() jobQueue { return jobQueue{queued: make(chan struct{})} }

// jobPollWait is how long a runner's poll waits for a job before the stub
// answers 204; short, so that a stopped test's server closes soon.
const jobPollWait = 5 * time.Second

// QueueJob queues script for the next runner with label, as a job of the
// repository the runner serves (its repository, or the private repository
// "<organization>/job" of its organization), for tests where which
// repository queued the job does not matter; it returns the job's id for
// JobResult.
func (g *GitHub) QueueJob(label, script string) string {
	return g.QueueJobAt(label, script, time.Now())
}

// QueueJobAt queues a job as if queued at at: one queued more than
// github.MaxJobQueueTime ago is canceled, as GitHub cancels it.
func (g *GitHub) QueueJobAt(label, script string, at time.Time) string {
	return g.queue(&Job{RunsOn: RunsOn{Labels: []string{label}}, Script: script, QueuedAt: at})
}

// QueueJobFor queues script as a job of repository ("owner/name") with
// runsOn, for the runner GitHub would send it to, and returns the job's id.
// A runs-on with neither group nor labels is no workflow GitHub runs.
func (g *GitHub) QueueJobFor(repository string, runsOn RunsOn, script string) string {
	if runsOn.Group == "" && len(runsOn.Labels) == 0 {
		panic("QueueJobFor: runs-on names neither a group nor labels")
	}
	return g.queue(&Job{Repository: repository, RunsOn: runsOn, Script: script, QueuedAt: time.Now()})
}

func (g *GitHub) queue(job *Job) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	job.ID = "job-" + randomHex(6)
	g.jobs.list = append(g.jobs.list, job)
	close(g.jobs.queued)
	g.jobs.queued = make(chan struct{})
	return job.ID
}

// JobResult is the job with id as it stands: Done once a runner posted its
// output and exit code (the zero Job for an unknown id).
func (g *GitHub) JobResult(id string) Job {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireJobs()
	for _, job := range g.jobs.list {
		if job.ID == id {
			return *job
		}
	}
	return Job{}
}

// expireJobs cancels the jobs no runner took within github.MaxJobQueueTime,
// as GitHub does; the caller holds g.mu.
func (g *GitHub) expireJobs() {
	for _, job := range g.jobs.list {
		if job.Runner == "" && !job.Done && g.now().Sub(job.QueuedAt) > github.MaxJobQueueTime {
			job.Canceled, job.Done = true, true
		}
	}
}

// nextJob hands the runner ?name= the oldest queued job GitHub would send
// it, waiting up to jobPollWait for one as the real runner's long poll
// does: 200 with a line "<id> <repository>" and the script, or 204; and 403
// with GitHub's message to a runner whose ?version= GitHub's policy no
// longer accepts.
func (g *GitHub) nextJob(w http.ResponseWriter, r *http.Request) {
	name, version := r.FormValue("name"), r.FormValue("version")
	if policy := g.Policy(); !policy.Accepts(version) {
		g.mu.Lock()
		g.events = append(g.events, "deprecated "+name+" "+version)
		g.mu.Unlock()
		http.Error(w, "An error occured: Runner version v"+version+" is deprecated and cannot receive messages.", http.StatusForbidden)
		return
	}
	g.mu.Lock()
	timeout := time.NewTimer(g.pollWait)
	g.mu.Unlock()
	defer timeout.Stop()
	for {
		g.mu.Lock()
		runner, ok := g.runners[name]
		var job *Job
		if ok {
			job = g.takeJob(runner)
		}
		wake := g.jobs.queued
		g.mu.Unlock()
		switch {
		case !ok:
			http.Error(w, "no runner "+name, http.StatusNotFound)
			return
		case job != nil:
			fmt.Fprintf(w, "%s %s\n%s", job.ID, job.Repository, job.Script)
			return
		}
		select {
		case <-wake:
		case <-timeout.C:
			w.WriteHeader(http.StatusNoContent)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// takeJob assigns the oldest queued job GitHub would send runner to it;
// the caller holds g.mu. An ephemeral runner takes one job alone: "The
// service will make sure to only ever send one job to this runner"
// (https://github.com/actions/runner/pull/660).
func (g *GitHub) takeJob(runner *Runner) *Job {
	g.expireJobs()
	if runner.Ephemeral && runner.tookJob {
		return nil
	}
	for _, job := range g.jobs.list {
		if job.Runner == "" && !job.Done && g.routes(job, runner) {
			job.Runner, runner.tookJob = runner.Name, true
			if job.Repository == "" {
				job.Repository = defaultRepository(runner.Target)
			}
			return job
		}
	}
	return nil
}

// Routes tells whether GitHub would send a job of repository ("owner/name")
// with runsOn to the registered runner named runner, by the rules a queued
// job follows, without queuing one: false for a runner not registered.
func (g *GitHub) Routes(repository string, runsOn RunsOn, runner string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.runners[runner]
	return ok && g.routes(&Job{Repository: repository, RunsOn: runsOn}, r)
}

// routes tells whether GitHub would send job to runner (see the rules
// above); the caller holds g.mu.
func (g *GitHub) routes(job *Job, runner *Runner) bool {
	repository := cmp.Or(job.Repository, defaultRepository(runner.Target))
	owner, _, _ := strings.Cut(repository, "/")
	organizationRunner := !strings.Contains(runner.Target, "/")
	switch {
	case !organizationRunner && !strings.EqualFold(repository, runner.Target):
		return false
	case organizationRunner && (!strings.EqualFold(owner, runner.Target) || !g.admits(runner, repository)):
		return false
	case job.RunsOn.Group != "" && (!organizationRunner || !protocol.SameRunnerGroup(job.RunsOn.Group, runner.Group)):
		return false
	}
	labels := strings.Split(runner.Labels, ",")
	for _, want := range job.RunsOn.Labels {
		if !slices.ContainsFunc(labels, func(l string) bool { return github.SameLabel(l, want) }) {
			return false
		}
	}
	return true
}

// admits tells whether the runner group of the organization's runner lets
// repository send it jobs; the caller holds g.mu.
func (g *GitHub) admits(runner *Runner, repository string) bool {
	access := g.groupAccess(runner.Target, runner.Group)
	if g.public[strings.ToLower(repository)] && !access.AllowPublicRepositories {
		return false
	}
	return len(access.SelectedRepositories) == 0 ||
		slices.ContainsFunc(access.SelectedRepositories, func(r string) bool { return strings.EqualFold(r, repository) })
}

// defaultRepository is the repository QueueJob's jobs run for on a runner
// of target: the target, or a repository "job" of an organization target.
func defaultRepository(target string) string {
	if strings.Contains(target, "/") {
		return target
	}
	return target + "/job"
}

// jobResult is where run.sh posts a job's id, exit_code and output. Once
// an ephemeral runner's job is done, GitHub removes the runner: "After a
// job is run, ephemeral runners are automatically unregistered from the
// service" (https://github.blog/changelog/2021-09-20-github-actions-ephemeral-self-hosted-runners-new-webhooks-for-auto-scaling).
func (g *GitHub) jobResult(w http.ResponseWriter, r *http.Request) {
	code, err := strconv.Atoi(r.FormValue("exit_code"))
	if err != nil {
		http.Error(w, "exit_code: "+err.Error(), http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, job := range g.jobs.list {
		if job.ID == r.FormValue("id") && job.Runner != "" {
			g.finish(job, r.FormValue("output"), code)
			return
		}
	}
	http.Error(w, "no job "+r.FormValue("id")+" taken by a runner", http.StatusNotFound)
}

// finish records the result of the job a runner took, and removes the
// runner when it is ephemeral; the caller holds g.mu.
func (g *GitHub) finish(job *Job, output string, exitCode int) {
	job.Output, job.ExitCode, job.Done = output, exitCode, true
	if runner := g.runners[job.Runner]; runner != nil && runner.Ephemeral {
		delete(g.runners, job.Runner)
		g.events = append(g.events, "remove "+job.Runner)
	}
}

// RunJob is the registered runner named runner taking the oldest queued
// job GitHub would send it and finishing it at once, exit code 0 and no
// output, as its listener would on a machine that runs nothing: for
// agents whose machine registers nowhere (agentsim's), whose runners a
// test runs here. An ephemeral runner is then removed. ok is false when
// GitHub sends the runner no job: none queued for it, or no such runner
// (never registered, or removed after its one job).
func (g *GitHub) RunJob(runner string) (job Job, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, registered := g.runners[runner]
	if !registered {
		return Job{}, false
	}
	taken := g.takeJob(r)
	if taken == nil {
		return Job{}, false
	}
	g.finish(taken, "", 0)
	return *taken, true
}
