package scripttest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
)

// Jobs, as a workflow's runs-on would queue them: a test queues a shell
// script for a label; the stub run.sh of a runner registered with that label
// takes it, runs it as the user the runner runs as, and posts the output and
// exit code back.

// Job is a queued job and, once a runner has run it, its result.
type Job struct {
	ID, Label, Script string
	QueuedAt          time.Time
	Runner            string // the runner that took it; "" while queued
	Output            string // stdout and stderr, as the job wrote them
	ExitCode          int
	Done              bool
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

// QueueJob queues script for the next runner with label, and returns the
// job's id for JobResult.
func (g *GitHub) QueueJob(label, script string) string {
	return g.QueueJobAt(label, script, time.Now())
}

// QueueJobAt queues a job as if queued at at: one queued more than
// github.MaxJobQueueTime ago is canceled, as GitHub cancels it.
func (g *GitHub) QueueJobAt(label, script string, at time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	job := &Job{ID: "job-" + randomHex(6), Label: label, Script: script, QueuedAt: at}
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

// nextJob hands the runner ?name= the oldest queued job for one of its
// labels, waiting up to jobPollWait for one as the real runner's long poll
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
	timeout := time.NewTimer(jobPollWait)
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
			fmt.Fprintf(w, "%s %s\n%s", job.ID, jobRepository(runner.Target), job.Script)
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

// takeJob assigns the oldest queued job for one of runner's labels,
// compared as GitHub compares them (case-insensitively), to it; the caller
// holds g.mu.
func (g *GitHub) takeJob(runner *Runner) *Job {
	g.expireJobs()
	labels := strings.Split(runner.Labels, ",")
	for _, job := range g.jobs.list {
		for _, l := range labels {
			if job.Runner == "" && !job.Done && github.SameLabel(l, job.Label) {
				job.Runner = runner.Name
				return job
			}
		}
	}
	return nil
}

// jobRepository is the repository a job of target runs for: the target, or
// a repository "job" of an organization target.
func jobRepository(target string) string {
	if strings.Contains(target, "/") {
		return target
	}
	return target + "/job"
}

// jobResult is where run.sh posts a job's id, exit_code and output.
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
			job.Output, job.ExitCode, job.Done = r.FormValue("output"), code, true
			return
		}
	}
	http.Error(w, "no job "+r.FormValue("id")+" taken by a runner", http.StatusNotFound)
}
