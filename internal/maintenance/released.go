package maintenance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// GitHub's "Re-run failed jobs", and a re-run of one job, re-run the jobs
// that need the claim job, not the claim job: they keep its outputs from
// the attempt that claimed, its label among them, and wait in the queue
// for runners with that label, which that attempt's release gave back.
// So a release leaves a marker of each claim of a workflow run it
// releases (claim.PoolTable.ReleasedClaims reads them), and the pool's
// maintenance revives the claim (claim.Claimer.Revive: runners
// claimed again for its run id and label) once a newer attempt of the run
// has a job queued for its label. The revived claim serves that attempt:
// the re-run's release job releases it by its run id, as it releases its
// run's claims, and if it does not, the maintenance does once the attempt
// ended.

const (
	// reviveBudget bounds one revival, a claim: it picks runners for up
	// to the claimed state's lifetime (5 minutes), and runners it launches register within the
	// claim's fleet_validation_wait (3 minutes by default).
	reviveBudget = 10 * time.Minute
)

// markRevived records that the marker of runID's claim is revived for
// attempt, unless it was revived for it (or a later one) already; ok says
// whether this call did. (AND binds before OR: a marker gone, its TTL
// passed, is not written again.)
func markRevived(ctx context.Context, c *claim.Claimer, poolName, runID string, attempt int) (ok bool, err error) {
	_, err = c.DynamoDB.UpdateItem(ctx, table.MarkRevived(protocol.TableName(poolName), runID, attempt))
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("marking the released claim of run %s revived: %w", runID, err)
	}
	return true, nil
}

// revival is a released claim to revive for a newer attempt of its run.
type revival struct {
	marker  claim.ReleasedClaim
	attempt int
}

// rerunsWaiting finds the released claims (markers) of poolName whose
// workflow run has a newer attempt, not yet revived for, with a job
// queued for the claim's label. It lists the queued and in-progress runs
// of each repository that has markers (two questions, however many
// markers: markers live for GitHub's whole re-run window, and most runs
// are never re-run), and the jobs of each newer attempt of a marker's
// run. A repository the credentials do not serve is left alone and
// logged. Once GitHub is rate limited, fails or does not answer, it asks
// no more, and logs it.
func rerunsWaiting(ctx context.Context, c *claim.Claimer, s *claim.PoolTable, under *runsUnderWay) ([]revival, error) {
	g := under.g
	markers, err := s.ReleasedClaims(ctx)
	if err != nil {
		return nil, err
	}
	byRepository := map[github.Target][]claim.ReleasedClaim{}
	for _, m := range markers {
		attempt, known := m.Request.RunAttempt()
		if !known {
			continue
		}
		if !g.Serves(attempt.Repository) {
			log(c, "released claim left alone: its run's repository is not one its pool's GitHub credentials serve", "run", m.Request.RunID, "repository", m.Request.Repository)
			continue
		}
		repo := repositoryKey(attempt.Repository)
		byRepository[repo] = append(byRepository[repo], m)
	}
	repos := slices.SortedFunc(maps.Keys(byRepository), func(a, b github.Target) int { return strings.Compare(a.String(), b.String()) })
	var due []revival
	for _, repo := range repos {
		latest, err := under.latestAttempts(ctx, repo)
		if err != nil {
			log(c, "released claims left alone: cannot tell whether their runs were re-run", "repository", repo.String(), "error", err.Error())
			if github.Temporary(err) {
				return due, nil
			}
			continue
		}
		jobsOf := map[github.RunAttempt][]github.Job{}
		for _, m := range byRepository[repo] {
			claimed, _ := m.Request.RunAttempt()
			rerun := claimed
			rerun.Attempt = latest[claimed.RunID]
			if rerun.Attempt <= claimed.Attempt || rerun.Attempt <= m.RevivedFor {
				continue
			}
			jobs, asked := jobsOf[rerun]
			if !asked {
				jobs, err = g.Runs.RunAttemptJobs(ctx, rerun)
				if err != nil {
					log(c, "released claim left alone: cannot tell whether a job of its run's re-run waits for its label", "run", m.Request.RunID, "error", err.Error())
					if github.Temporary(err) {
						return due, nil
					}
					continue
				}
				jobsOf[rerun] = jobs
			}
			if slices.ContainsFunc(jobs, func(j github.Job) bool { return j.WaitsFor(m.Request.Label) }) {
				due = append(due, revival{marker: m, attempt: rerun.Attempt})
			}
		}
	}
	return due, nil
}

// revive revives the released claims of due, concurrently, each once for
// its attempt (the marker says so before the claim begins, so that no
// other maintenance pass revives it again), each within reviveBudget. It
// returns the run ids of the claims revived.
func revive(ctx context.Context, c *claim.Claimer, poolName string, due []revival) ([]string, error) {
	var (
		mu      sync.Mutex
		revived []string
		errs    []error
	)
	var wg sync.WaitGroup
	for _, d := range due {
		wg.Go(func() {
			req, attempt := d.marker.Request, d.attempt
			first, err := markRevived(ctx, c, poolName, req.RunID, attempt)
			if err != nil || !first {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
				return
			}
			req.WorkflowRun.Attempt = attempt
			claiming, cancel := context.WithTimeout(ctx, reviveBudget)
			defer cancel()
			res, err := c.Revive(claiming, req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				log(c, "cannot revive a released claim whose label a re-run's job waits for", "run", req.RunID, "attempt", attempt, "error", err.Error())
				errs = append(errs, fmt.Errorf("reviving the claim of run %s for attempt %d of its workflow run: %w", req.RunID, attempt, err))
				return
			}
			var ids []string
			for _, inst := range res.Instances {
				ids = append(ids, inst.ID)
			}
			log(c, "revived a released claim whose label a re-run's job waits for", "run", req.RunID, "repository", req.Repository,
				"workflow_run", req.WorkflowRun.ID, "attempt", attempt, "instances", ids)
			revived = append(revived, req.RunID)
		})
	}
	wg.Wait()
	slices.Sort(revived)
	return revived, errors.Join(errs...)
}
