package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// RunAttempt names one attempt of a GitHub Actions workflow run: the
// repository's numeric run id (GITHUB_RUN_ID) and the attempt
// (GITHUB_RUN_ATTEMPT, from 1; each re-run is a new attempt of the same
// run).
type RunAttempt struct {
	Repository Target // a repository: Owner and Repository
	RunID      int64
	Attempt    int
}

func (a RunAttempt) String() string {
	return fmt.Sprintf("attempt %d of workflow run %d of %s", a.Attempt, a.RunID, a.Repository)
}

// runStatusCompleted is a run attempt's status once all its jobs ended:
// succeeded, failed, or cancelled (GitHub forcibly ends a cancelled run's
// jobs after 5 minutes). A re-run is a new attempt, so an earlier attempt
// stays completed.
const runStatusCompleted = "completed"

// RunAttemptEnded tells whether a workflow run attempt has ended: GitHub
// says it is completed, or the run is gone (deleted) from a repository
// the credentials see. GitHub answers 404 also for a repository the
// credentials do not see, or when a permission is missing: that is an
// error, never an end, since a run that still goes on must not be taken
// for ended. Reading a run needs the repository permission "Actions"
// (read) of a GitHub App or fine-grained token.
func (c *Client) RunAttemptEnded(ctx context.Context, a RunAttempt) (bool, error) {
	t := a.Repository
	hint := func(status int) string { return runHint(t, status) }
	op := operation{what: "read " + a.String(), hint: hint}
	if t.Owner == "" || t.Repository == "" || a.RunID <= 0 || a.Attempt <= 0 {
		return false, fmt.Errorf("%s: not a repository's run attempt", op.what)
	}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op.what, err)
	}
	repo := "/repos/" + url.PathEscape(t.Owner) + "/" + url.PathEscape(t.Repository)
	body, status, err := c.call(ctx, op, http.MethodGet, repo+"/actions/runs/"+strconv.FormatInt(a.RunID, 10)+"/attempts/"+strconv.Itoa(a.Attempt), bearer)
	c.forgetRevoked(bearer, err)
	if statusOf(err) == http.StatusNotFound {
		seen := operation{what: fmt.Sprintf("read repository %s, which has no %s", t, a), hint: hint}
		if _, _, rerr := c.call(ctx, seen, http.MethodGet, repo, bearer); rerr != nil {
			return false, rerr
		}
		return true, nil // deleted
	}
	if err != nil {
		return false, err
	}
	var run struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &run); err != nil || run.Status == "" {
		return false, fmt.Errorf("%s: HTTP %d response has no status", op.what, status)
	}
	return run.Status == runStatusCompleted, nil
}

// Job is one job of a workflow run attempt, as GitHub lists it.
type Job struct {
	ID     int64
	Status string // queued, in_progress, completed, waiting, ...
	// Labels are its runs-on labels.
	Labels []string
	// RunnerName is the runner GitHub assigned the job to ("" before one
	// took it); StartedAt when it started.
	RunnerName string
	StartedAt  time.Time
}

// GitHub's statuses of a job: waiting for a runner, and run by one.
const (
	jobStatusQueued     = "queued"
	jobStatusInProgress = "in_progress"
)

// InProgress tells whether a runner is running the job.
func (j Job) InProgress() bool { return j.Status == jobStatusInProgress }

// WaitsFor tells whether the job waits in the queue for a runner with
// label among its labels (GitHub compares labels ignoring case).
func (j Job) WaitsFor(label string) bool {
	return j.Status == jobStatusQueued && slices.ContainsFunc(j.Labels, func(l string) bool { return SameLabel(l, label) })
}

// RunAttemptJobs lists the jobs of a workflow run attempt, all pages of
// them. It needs the repository permission "Actions" (read), as
// RunAttemptEnded.
func (c *Client) RunAttemptJobs(ctx context.Context, a RunAttempt) ([]Job, error) {
	t := a.Repository
	op := operation{what: "list the jobs of " + a.String(), hint: func(status int) string { return runHint(t, status) }}
	if t.Owner == "" || t.Repository == "" || a.RunID <= 0 || a.Attempt <= 0 {
		return nil, fmt.Errorf("%s: not a repository's run attempt", op.what)
	}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.what, err)
	}
	path := "/repos/" + url.PathEscape(t.Owner) + "/" + url.PathEscape(t.Repository) +
		"/actions/runs/" + strconv.FormatInt(a.RunID, 10) + "/attempts/" + strconv.Itoa(a.Attempt) + "/jobs"
	listed, err := listAll[struct {
		ID         int64      `json:"id"`
		Status     string     `json:"status"`
		Labels     []string   `json:"labels"`
		RunnerName *string    `json:"runner_name"`
		StartedAt  *time.Time `json:"started_at"`
	}](ctx, c, op, path, "jobs", bearer)
	if err != nil {
		return nil, err
	}
	jobs := make([]Job, len(listed))
	for i, j := range listed {
		jobs[i] = Job{ID: j.ID, Status: j.Status, Labels: j.Labels}
		if j.RunnerName != nil {
			jobs[i].RunnerName = *j.RunnerName
		}
		if j.StartedAt != nil {
			jobs[i].StartedAt = *j.StartedAt
		}
	}
	return jobs, nil
}

// Run is a workflow run as GitHub lists it: its latest attempt, and that
// attempt's status.
type Run struct {
	ID      int64
	Attempt int
	Status  string
}

// activeRunStatuses are the statuses of a run whose latest attempt has a
// job waiting for a runner: queued while none of its jobs runs yet,
// in_progress once one does.
var activeRunStatuses = []string{"queued", jobStatusInProgress}

// ActiveRuns lists the workflow runs of repository t whose latest attempt
// is queued or in progress (GET /repos/{owner}/{repo}/actions/runs, by
// status, every page): the runs that can have a job waiting for a runner.
// A re-run is a new attempt of its run, which GitHub lists again as
// queued or in progress. It needs the repository permission "Actions"
// (read), as RunAttemptEnded.
func (c *Client) ActiveRuns(ctx context.Context, t Target) ([]Run, error) {
	op := operation{what: "list the queued and in-progress workflow runs of " + t.String(), hint: func(status int) string { return runHint(t, status) }}
	if t.Owner == "" || t.Repository == "" {
		return nil, fmt.Errorf("%s: not a repository", op.what)
	}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.what, err)
	}
	var runs []Run
	for _, status := range activeRunStatuses {
		path := "/repos/" + url.PathEscape(t.Owner) + "/" + url.PathEscape(t.Repository) + "/actions/runs?status=" + status
		listed, err := listAll[struct {
			ID         int64  `json:"id"`
			RunAttempt int    `json:"run_attempt"`
			Status     string `json:"status"`
		}](ctx, c, op, path, "workflow_runs", bearer)
		if err != nil {
			return nil, err
		}
		for _, r := range listed {
			runs = append(runs, Run{ID: r.ID, Attempt: r.RunAttempt, Status: r.Status})
		}
	}
	return runs, nil
}

// runHint advises on a 4xx answer to the read of a run or its repository.
func runHint(t Target, status int) string {
	if status == http.StatusForbidden {
		return `the credentials lack permission: a GitHub App or fine-grained token needs the repository permission "Actions" (read); a classic token needs the "repo" scope`
	}
	return targetHint(t, status)
}

// Temporary tells whether err says GitHub could not serve the request
// now: it did not answer, answered with a server error, or rate limited
// the credentials. Other requests with the same credentials would fail
// alike for a while.
func Temporary(err error) bool {
	var apiErr *apiError
	if errors.As(err, &apiErr) {
		return apiErr.rateLimited || apiErr.status >= 500
	}
	var unreachable *url.Error
	return errors.As(err, &unreachable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
