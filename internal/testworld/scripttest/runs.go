package scripttest

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
)

// Workflow runs, as the REST API tells of them: an attempt is in progress
// from StartRunAttempt until CompleteRunAttempt; a run the stub never
// heard of, or one DeleteRun deleted, is not found. A repository is known
// once a run of it started, or AddRepository added it; GitHub answers 404
// for the others, as for a repository the credentials do not see. An
// attempt's jobs are listed as QueueRunJob, StartJob and CompleteJob leave
// them; a job in progress for more than github.MaxJobExecutionTime has
// ended, failed, as GitHub ends it. A repository's runs are listed with
// their latest attempt, whose status is queued while it has queued jobs
// and none in progress.

// runAttempt names one attempt of a workflow run of a repository (lower
// case "owner/name").
type runAttempt struct {
	repository string
	run        int64
	attempt    int
}

// GitHub's statuses of a run attempt that this stub gives.
const (
	runInProgress = "in_progress"
	runCompleted  = "completed"
)

// runJob is one job of a run attempt, queued for runners with its labels
// or run by a runner.
type runJob struct {
	id        int64
	labels    []string
	runner    string // the runner's name; "" while queued
	startedAt time.Time
	completed bool
}

// QueueRunJob queues a job of attempt of workflow run run of repository for
// a runner with labels, and returns its id for CompleteJob: listed as
// queued until completed.
func (g *GitHub) QueueRunJob(repository string, run int64, attempt int, labels ...string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.jobIDs++
	key := runAttempt{strings.ToLower(repository), run, attempt}
	g.runJobs[key] = append(g.runJobs[key], &runJob{id: g.jobIDs, labels: labels})
	return g.jobIDs
}

// StartJob starts a job of attempt of workflow run run of repository on
// the runner named runner (a claim's runners are named after their
// instance), started at startedAt, and returns its id for CompleteJob.
func (g *GitHub) StartJob(repository string, run int64, attempt int, runner string, startedAt time.Time) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.jobIDs++
	key := runAttempt{strings.ToLower(repository), run, attempt}
	g.runJobs[key] = append(g.runJobs[key], &runJob{id: g.jobIDs, runner: runner, startedAt: startedAt})
	return g.jobIDs
}

// CompleteJob ends the job with id.
func (g *GitHub) CompleteJob(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, jobs := range g.runJobs {
		for _, job := range jobs {
			if job.id == id {
				job.completed = true
			}
		}
	}
}

// StartRunAttempt starts attempt of workflow run run of repository
// ("owner/name"): in progress.
func (g *GitHub) StartRunAttempt(repository string, run int64, attempt int) {
	g.setRunAttempt(repository, run, attempt, runInProgress)
}

// CompleteRunAttempt completes the attempt, as GitHub does once all its
// jobs ended (succeeded, failed, or cancelled and forcibly ended).
func (g *GitHub) CompleteRunAttempt(repository string, run int64, attempt int) {
	g.setRunAttempt(repository, run, attempt, runCompleted)
}

// DeleteRun deletes every attempt of the run.
func (g *GitHub) DeleteRun(repository string, run int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.runs {
		if k.repository == strings.ToLower(repository) && k.run == run {
			delete(g.runs, k)
		}
	}
}

func (g *GitHub) setRunAttempt(repository string, run int64, attempt int, status string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	repository = strings.ToLower(repository)
	g.runs[runAttempt{repository, run, attempt}] = status
	if _, known := g.public[repository]; !known {
		g.public[repository] = false
	}
}

// runAttemptOf is the repository and the run attempt a request's path
// names; valid is false when its run or attempt is not a number.
func runAttemptOf(r *http.Request) (repository string, key runAttempt, valid bool) {
	repository = r.PathValue("owner") + "/" + r.PathValue("repo")
	run, rerr := strconv.ParseInt(r.PathValue("run"), 10, 64)
	attempt, aerr := strconv.Atoi(r.PathValue("attempt"))
	return repository, runAttempt{strings.ToLower(repository), run, attempt}, rerr == nil && aerr == nil
}

// getRunAttempt is GET /repos/{owner}/{repo}/actions/runs/{run}/attempts/{attempt}.
func (g *GitHub) getRunAttempt(w http.ResponseWriter, r *http.Request) {
	if !g.authorized(w, r) {
		return
	}
	repository, key, valid := runAttemptOf(r)
	g.mu.Lock()
	g.apiCalls = append(g.apiCalls, "run-attempt "+repository)
	status, ok := g.runs[key]
	g.mu.Unlock()
	if !valid || !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	answer := map[string]any{"id": key.run, "run_attempt": key.attempt, "status": status, "conclusion": nil}
	if status == runCompleted {
		answer["conclusion"] = "cancelled"
	}
	writeJSON(w, http.StatusOK, answer)
}

// listRunAttemptJobs is GET
// /repos/{owner}/{repo}/actions/runs/{run}/attempts/{attempt}/jobs.
func (g *GitHub) listRunAttemptJobs(w http.ResponseWriter, r *http.Request) {
	if !g.authorized(w, r) {
		return
	}
	repository, key, valid := runAttemptOf(r)
	g.mu.Lock()
	g.apiCalls = append(g.apiCalls, "run-attempt-jobs "+repository)
	_, known := g.runs[key]
	var list []map[string]any
	for _, job := range g.runJobs[key] {
		status, conclusion := g.jobStatus(job)
		listed := map[string]any{"id": job.id, "run_id": key.run, "run_attempt": key.attempt, "status": status,
			"conclusion": conclusion, "labels": append([]string{}, job.labels...), "runner_name": nil, "started_at": nil}
		if job.runner != "" {
			listed["runner_name"], listed["started_at"] = job.runner, job.startedAt.UTC().Format(time.RFC3339)
		}
		list = append(list, listed)
	}
	g.mu.Unlock()
	if !valid || !known {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writePage(w, r, "jobs", list)
}

// jobStatus is a job's status and conclusion, as GitHub tells them.
// g.mu is held.
func (g *GitHub) jobStatus(job *runJob) (status string, conclusion any) {
	switch {
	case job.completed:
		return "completed", "success"
	case job.runner == "":
		return "queued", nil
	case g.now().Sub(job.startedAt) > github.MaxJobExecutionTime:
		return "completed", "failure"
	}
	return "in_progress", nil
}

// listRuns is GET /repos/{owner}/{repo}/actions/runs, with its status
// filter: each run with its latest attempt.
func (g *GitHub) listRuns(w http.ResponseWriter, r *http.Request) {
	if !g.authorized(w, r) {
		return
	}
	repository := r.PathValue("owner") + "/" + r.PathValue("repo")
	want := r.FormValue("status")
	g.mu.Lock()
	g.apiCalls = append(g.apiCalls, "runs "+repository)
	_, known := g.public[strings.ToLower(repository)]
	latest := map[int64]runAttempt{}
	for k := range g.runs {
		if k.repository == strings.ToLower(repository) && k.attempt > latest[k.run].attempt {
			latest[k.run] = k
		}
	}
	var list []map[string]any
	for _, run := range slices.Sorted(maps.Keys(latest)) {
		key := latest[run]
		status := g.runs[key]
		if status == runInProgress {
			queued := slices.ContainsFunc(g.runJobs[key], func(j *runJob) bool { s, _ := g.jobStatus(j); return s == "queued" })
			running := slices.ContainsFunc(g.runJobs[key], func(j *runJob) bool { s, _ := g.jobStatus(j); return s == "in_progress" })
			if queued && !running {
				status = "queued"
			}
		}
		if want == "" || want == status {
			list = append(list, map[string]any{"id": run, "run_attempt": key.attempt, "status": status})
		}
	}
	g.mu.Unlock()
	if !known {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writePage(w, r, "workflow_runs", list)
}

// getRepository is GET /repos/{owner}/{repo}.
func (g *GitHub) getRepository(w http.ResponseWriter, r *http.Request) {
	if !g.authorized(w, r) {
		return
	}
	repository := r.PathValue("owner") + "/" + r.PathValue("repo")
	g.mu.Lock()
	g.apiCalls = append(g.apiCalls, "repository "+repository)
	public, known := g.public[strings.ToLower(repository)]
	g.mu.Unlock()
	if !known {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	visibility := map[bool]string{true: "public", false: "private"}[public]
	writeJSON(w, http.StatusOK, map[string]any{"full_name": repository, "private": !public, "visibility": visibility})
}
