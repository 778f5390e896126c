package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// A cancelled or failed run releases its claims in a job of its own,
// which GitHub may end before it finishes (it forcibly ends a cancelled
// run's jobs after 5 minutes), or never run. Its runners would be held
// until the claim's max_runtime, and then terminated: the pool's
// maintenance asks GitHub instead whether the run attempt of each claim
// ended, and releases the claims of those that did. The other way round,
// a job may still run on a claim's runners when max_runtime ends: the
// maintenance asks GitHub which jobs of the attempt run where, and holds
// the runners longer while one of them runs a job, within GitHub's own
// limit of a job's time.

const (
	// endedRunAge: a claim is asked about once its record is this old. A
	// claim is made by a job of its run, so its run is under way when it
	// completes, and most runs release their claims themselves within
	// minutes: asking sooner would spend the credential's rate limit on
	// runs that end well. It is not a pool setting: nothing about a pool
	// changes that trade, and a run's runners come back warm this long
	// after the claim at the earliest.
	endedRunAge = 5 * time.Minute
	// endedReleaseBudget bounds a pass's questions and releases: a
	// release waits for its agents as a destroy does, until shortly
	// before its deadline, and returns as soon as they confirm.
	endedReleaseBudget = 3 * time.Minute
	// heldRunWindow: a claim whose runners' deadline is this near is
	// asked about, whatever its age, and while its attempt goes on, which
	// of its jobs run on its runners. The new deadline must be written
	// before the old one passes: the reap of the same pass ends the
	// records past theirs, and the agents terminate their instances a
	// minute after it. The maintenance runs at most once a minute, and
	// only when something of the pool runs (a claim, a release, an apply,
	// the broker's scheduled maintenance: every 5 minutes in
	// examples/complete); 10 minutes give a reap every 5 minutes two
	// chances.
	heldRunWindow = 10 * time.Minute
	// heldRunExtension: a claim whose job still runs on its runners holds
	// them until this long from now. Longer would keep them longer after
	// the job, should the run never end and the maintenance stop; shorter
	// would ask GitHub more often (once per claim every
	// heldRunExtension - heldRunWindow).
	heldRunExtension = 30 * time.Minute
)

// runsFollowed says what the pool's maintenance did with the claims of
// workflow runs: the run ids of the claims it released, their attempt
// having ended, of those whose runners it held past their deadline, a
// job of the attempt still running on them, and of the released claims
// it revived for a re-run whose job waits for their label.
type runsFollowed struct {
	Ended   []string
	Held    []string
	Revived []string
}

// followScope is how much of following the claims' runs a pass does.
type followScope int

const (
	// followHolds asks GitHub only about claims near their deadline, and
	// holds the runners a job still runs on: conditional writes, cheap
	// enough for the path of a claim or a release, whose caller waits.
	followHolds followScope = iota
	// followAll also releases the claims of ended runs and revives the
	// released claims a re-run's job waits for, which wait for agents and
	// may launch runners: the pool's maintenance (the broker's Maintain,
	// its apply, the reap action) does it.
	followAll
)

// followRuns releases the complete claims of poolName whose GitHub Actions
// workflow run attempt ended without releasing them, as their destroy
// would (claim.PoolTable.Release), and holds the runners of those whose attempt
// goes on, with a job on one of them, past their deadline. It asks
// GitHub, with the credentials that mint the pool's runner tokens, about
// each claim that records its run attempt and is older than endedRunAge,
// or whose runners' deadline is within heldRunWindow, once, in run id
// order: an attempt GitHub says is completed, or whose run was deleted,
// has ended. For an attempt near its claim's deadline that goes on, it
// lists the attempt's jobs, and while one is in progress on a runner of
// the claim (runners are named after their instance), moves the
// deadline of every runner of the claim to heldRunExtension from now,
// never past the end GitHub gives that job (github.MaxJobExecutionTime
// after its start). A claim of a repository the credentials do not serve,
// or that GitHub cannot tell about, is left alone and logged; once GitHub
// is rate limited, fails or does not answer, the rest of the pass is left
// alone too (the next pass asks again). Then, unless GitHub could not
// answer, it revives the released claims whose label a re-run's job waits
// for (rerunsWaiting, revive). Without credentials that read runs it does
// nothing. cfg is the pool's config when the caller read it, else nil.
// scope says how much of it a pass does: followHolds on a claim's or a
// release's own path, followAll in the pool's maintenance.
func followRuns(ctx context.Context, c *claim.Claimer, poolName string, cfg *protocol.PoolConfig, scope followScope) (runsFollowed, error) {
	var followed runsFollowed
	if cfg == nil {
		read, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
		if err != nil {
			return followed, claim.IgnoreMissingPool(err)
		}
		cfg = &read
	}
	g, err := c.PoolGitHub(ctx, *cfg)
	if err != nil {
		log(c, "cannot ask GitHub about the claims' runs", "pool", poolName, "error", err.Error())
		return followed, nil
	}
	if g == nil || g.Runs == nil {
		return followed, nil
	}
	s := c.PoolTable(poolName)
	claims, err := claimsOfRuns(ctx, s)
	if err != nil {
		return followed, err
	}
	running, err := runningFor(ctx, s, claims)
	if err != nil {
		return followed, err
	}
	now := nowOf(c)
	var ended []claim.Record
	githubDown := false
	for _, rec := range claims {
		runID := rec.Request.RunID
		deadline, holds := earliestDeadline(running[runID])
		near := holds && deadline.After(now) && deadline.Sub(now) <= heldRunWindow
		completed, _ := protocol.ParseTime(rec.UpdatedAt) // claimsOfRuns read it
		if !near && (scope == followHolds || now.Sub(completed) < endedRunAge) {
			continue
		}
		attempt, _ := rec.Request.RunAttempt()
		if !g.Serves(attempt.Repository) {
			log(c, "claim left alone: its run's repository is not one its pool's GitHub credentials serve", "run", runID, "repository", rec.Request.Repository)
			continue
		}
		done, err := g.Runs.RunAttemptEnded(ctx, attempt)
		if err != nil {
			log(c, "claim left alone: cannot tell whether its run ended", "run", runID, "error", err.Error())
			if githubDown = github.Temporary(err); githubDown {
				break // the others' questions would fail alike
			}
			continue
		}
		if done {
			if scope == followAll {
				ended = append(ended, rec)
			}
			continue
		}
		if !near {
			continue
		}
		jobs, err := g.Runs.RunAttemptJobs(ctx, attempt)
		if err != nil {
			log(c, "claim's deadline left as it is: cannot tell whether a job of its run runs on its runners", "run", runID, "error", err.Error())
			if githubDown = github.Temporary(err); githubDown {
				break
			}
			continue
		}
		until := heldUntil(jobs, running[runID], now)
		if !until.After(deadline) {
			continue
		}
		held, err := holdRunners(ctx, s, runID, running[runID], until)
		if err != nil {
			log(c, "cannot hold the runners of a claim whose job still runs on them", "run", runID, "error", err.Error())
		}
		if len(held) > 0 {
			log(c, "held the runners of a claim whose job still runs on them", "run", runID, "runners", held, "until", protocol.FormatTime(until))
			followed.Held = append(followed.Held, runID)
		}
	}
	var (
		rerun []revival
		mu    sync.Mutex
		errs  []error
	)
	if scope == followHolds {
		return followed, nil
	}
	if !githubDown {
		under := newRunsUnderWay(g)
		ended = notRerun(ctx, c, under, ended)
		rerun, err = rerunsWaiting(ctx, c, s, under)
		errs = append(errs, err)
	}
	var wg sync.WaitGroup
	for _, rec := range ended {
		wg.Go(func() {
			outcomes, err := s.Release(ctx, rec)
			log(c, "released the claim of an ended run", "run", rec.Request.RunID, "repository", rec.Request.Repository,
				"workflow_run", rec.Request.WorkflowRun.ID, "attempt", rec.Request.WorkflowRun.Attempt, "outcomes", outcomes)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("releasing the claim of run %s, whose workflow run ended: %w", rec.Request.RunID, err))
				return
			}
			followed.Ended = append(followed.Ended, rec.Request.RunID)
		})
	}
	wg.Wait()
	slices.Sort(followed.Ended)
	// After the releases, whose runners the revivals may take.
	followed.Revived, err = revive(ctx, c, poolName, rerun)
	return followed, errors.Join(append(errs, err)...)
}

// runsUnderWay asks GitHub, at most once per repository and pass, which
// of a repository's workflow runs are under way (queued or in progress)
// and their latest attempts: the ended-run releases and the revivals of a
// pass ask it of the same repositories.
type runsUnderWay struct {
	g      *claim.GitHubAccess
	latest map[github.Target]map[int64]int
	errs   map[github.Target]error
}

func newRunsUnderWay(g *claim.GitHubAccess) *runsUnderWay {
	return &runsUnderWay{g: g, latest: map[github.Target]map[int64]int{}, errs: map[github.Target]error{}}
}

// latestAttempts is the latest attempt of each run of repo under way.
func (u *runsUnderWay) latestAttempts(ctx context.Context, repo github.Target) (map[int64]int, error) {
	if latest, asked := u.latest[repo]; asked {
		return latest, u.errs[repo]
	}
	runs, err := u.g.Runs.ActiveRuns(ctx, repo)
	var latest map[int64]int
	if err == nil {
		latest = map[int64]int{}
		for _, r := range runs {
			latest[r.ID] = max(latest[r.ID], r.Attempt)
		}
	}
	u.latest[repo], u.errs[repo] = latest, err
	return latest, err
}

// repositoryKey is repo as the pass keys its questions: GitHub's names
// ignore case.
func repositoryKey(repo github.Target) github.Target {
	return github.Target{Owner: strings.ToLower(repo.Owner), Repository: strings.ToLower(repo.Repository)}
}

// notRerun is ended less the claims whose workflow run has a newer attempt
// under way: a re-run of failed jobs runs them on the claim of the attempt
// that claimed (its outputs are kept), whose own attempt has completed.
// Such a claim is released once the run's newer attempt ends, by its
// release job or by a later pass. A repository GitHub cannot tell about
// keeps its claims for a later pass too.
func notRerun(ctx context.Context, c *claim.Claimer, under *runsUnderWay, ended []claim.Record) []claim.Record {
	var out []claim.Record
	for _, rec := range ended {
		attempt, _ := rec.Request.RunAttempt()
		repo := repositoryKey(attempt.Repository)
		latest, err := under.latestAttempts(ctx, repo)
		switch {
		case err != nil:
			log(c, "claims of ended runs left for a later pass: cannot tell whether their runs were re-run", "repository", repo.String(), "error", err.Error())
		case latest[attempt.RunID] > attempt.Attempt:
			log(c, "claim of an ended run attempt left to its run's newer attempt, which may run on it", "run", rec.Request.RunID, "attempt", latest[attempt.RunID])
		default:
			out = append(out, rec)
		}
	}
	return out
}

// heldUntil is the deadline that the jobs in progress on runners (a
// claim's) ask for: heldRunExtension from now, but never past the end
// GitHub gives the latest of them (github.MaxJobExecutionTime after its
// start). It is zero when none runs on them.
func heldUntil(jobs []github.Job, runners []protocol.Instance, now time.Time) time.Time {
	var end time.Time
	for _, j := range jobs {
		onClaim := slices.ContainsFunc(runners, func(r protocol.Instance) bool { return protocol.RunnerOfInstance(j.RunnerName, r.ID) })
		if j.InProgress() && onClaim && !j.StartedAt.IsZero() && j.StartedAt.Add(github.MaxJobExecutionTime).After(end) {
			end = j.StartedAt.Add(github.MaxJobExecutionTime)
		}
	}
	if end.IsZero() {
		return end
	}
	if extended := now.Add(heldRunExtension); extended.Before(end) {
		return extended
	}
	return end
}

// holdRunners moves the deadline of the runners that run for runID to
// until, while they still do and their deadline has not passed: the
// agents read it from their records. It returns those it held; a runner
// released meanwhile is left as it is.
func holdRunners(ctx context.Context, s *claim.PoolTable, runID string, runners []protocol.Instance, until time.Time) ([]string, error) {
	ids := make([]string, len(runners))
	for i, r := range runners {
		ids[i] = r.ID
	}
	results := s.ApplyEach(ctx, ids, func(string) table.Transition {
		return table.Transition{FromState: protocol.StateRunning, FromRunID: runID, ToState: protocol.StateRunning, ToRunID: runID, Threshold: until, Deadline: table.DeadlineLive}
	})
	var (
		held []string
		errs []error
	)
	for i, err := range results {
		switch {
		case err == nil:
			held = append(held, ids[i])
		case !errors.Is(err, claim.ErrRecordChanged):
			errs = append(errs, fmt.Errorf("instance %s: %w", ids[i], err))
		}
	}
	return held, errors.Join(errs...)
}

// earliestDeadline is the earliest threshold of runners; ok is false when
// there are none.
func earliestDeadline(runners []protocol.Instance) (deadline time.Time, ok bool) {
	for _, r := range runners {
		t, err := protocol.ParseTime(r.Threshold)
		if err == nil && (!ok || t.Before(deadline)) {
			deadline, ok = t, true
		}
	}
	return deadline, ok
}

// claimsOfRuns reads the complete claim records that name their workflow
// run attempt, in run id order. Records that cannot be read are skipped:
// the reap names them.
func claimsOfRuns(ctx context.Context, s *claim.PoolTable) ([]claim.Record, error) {
	claims, err := s.Claims(ctx)
	var out []claim.Record
	for _, r := range claims {
		if r.State != claim.StateComplete {
			continue
		}
		_, err := protocol.ParseTime(r.UpdatedAt)
		if _, known := r.Request.RunAttempt(); known && err == nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b claim.Record) int { return strings.Compare(a.Request.RunID, b.Request.RunID) })
	return out, err
}

// runningFor reads the instance records of the claims' runners, and
// returns those still running for each claim, by run id.
func runningFor(ctx context.Context, s *claim.PoolTable, claims []claim.Record) (map[string][]protocol.Instance, error) {
	var ids []string
	for _, rec := range claims {
		ids = append(ids, rec.OwnedIDs...)
	}
	records, err := s.InstancesOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	running := map[string][]protocol.Instance{}
	for _, rec := range claims {
		for _, id := range rec.OwnedIDs {
			if r, ok := records[id]; ok && r.State == protocol.StateRunning && r.RunID == rec.Request.RunID {
				running[rec.Request.RunID] = append(running[rec.Request.RunID], r)
			}
		}
	}
	return running, nil
}
