package claim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// GitHub's "Re-run failed jobs", and a re-run of one job, re-run the jobs
// that need the claim job, not the claim job: they keep its outputs from
// the attempt that claimed, its label among them, and wait in the queue
// for runners with that label, which that attempt's release gave back.
// So a release leaves a marker of each claim of a workflow run it
// releases, and the pool's maintenance revives the claim (Revive: runners
// claimed again for its run id and label) once a newer attempt of the run
// has a job queued for its label. The revived claim serves that attempt:
// the re-run's release job releases it by its run id, as it releases its
// run's claims, and if it does not, the maintenance does once the attempt
// ended.

const (
	// reviveBudget bounds one revival, a claim: it picks runners for up
	// to claimedLifetime, and runners it launches register within the
	// claim's fleet_validation_wait (3 minutes by default).
	reviveBudget = 10 * time.Minute
)

// releasedClaim is a released claim's marker: the claim as its record
// held it (WorkflowRun: the attempt that claimed or revived it), and the
// attempt it was last revived for (0: none since its release).
type releasedClaim struct {
	Request    Request
	RevivedFor int
}

// putReleased writes the marker of the released claim req, which lives
// as long as GitHub lets its run be re-run. It replaces the marker of an
// earlier release of the same run id: the claim it revived was released.
func (s *store) putReleased(ctx context.Context, req Request) error {
	doc, _ := json.Marshal(requestDoc(req)) // cannot fail: plain data
	now := s.now()
	item := protocol.BaseItem(protocol.TypeReleased, req.RunID, protocol.FormatTime(now))
	item[protocol.AttrValue] = str(string(doc))
	item[protocol.AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(github.RerunWindow).Unix(), 10)}
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	if err != nil {
		return fmt.Errorf("writing the released-claim marker of run %s: %w", req.RunID, err)
	}
	return nil
}

// releasedClaims reads the markers of released claims not yet expired, in
// run id order. Markers that cannot be read are skipped and logged.
func (s *store) releasedClaims(ctx context.Context, poolName string) ([]releasedClaim, error) {
	var out []releasedClaim
	now := s.now().Unix()
	err := s.queryType(ctx, protocol.TypeReleased, func(item map[string]types.AttributeValue) {
		runID := protocol.IdentifierOf(item)
		expires, _ := strconv.ParseInt(numberAttr(item, protocol.AttrExpiresAt), 10, 64)
		if expires <= now { // DynamoDB deletes expired items within days, not at once
			return
		}
		var d recordDoc
		err := json.Unmarshal([]byte(protocol.StringAttr(item, protocol.AttrValue)), &d)
		req, rerr := d.request(poolName, runID)
		if err = errors.Join(err, rerr); err != nil {
			s.log("released-claim marker skipped: not valid", "run", runID, "error", err.Error())
			return
		}
		revived, _ := strconv.Atoi(numberAttr(item, table.AttrRevivedFor))
		out = append(out, releasedClaim{Request: req, RevivedFor: revived})
	})
	slices.SortFunc(out, func(a, b releasedClaim) int { return strings.Compare(a.Request.RunID, b.Request.RunID) })
	return out, err
}

// markRevived records that the marker of runID's claim is revived for
// attempt, unless it was revived for it (or a later one) already; ok says
// whether this call did. (AND binds before OR: a marker gone, its TTL
// passed, is not written again.)
func (s *store) markRevived(ctx context.Context, runID string, attempt int) (ok bool, err error) {
	_, err = s.db.UpdateItem(ctx, table.MarkRevived(s.table, runID, attempt))
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("marking the released claim of run %s revived: %w", runID, err)
	}
	return true, nil
}

func numberAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

// revival is a released claim to revive for a newer attempt of its run.
type revival struct {
	claim   releasedClaim
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
func (c *Claimer) rerunsWaiting(ctx context.Context, s *store, under *runsUnderWay, poolName string) ([]revival, error) {
	g := under.g
	markers, err := s.releasedClaims(ctx, poolName)
	if err != nil {
		return nil, err
	}
	byRepository := map[github.Target][]releasedClaim{}
	for _, m := range markers {
		attempt, known := m.Request.runAttempt()
		if !known {
			continue
		}
		if !g.serves(attempt.Repository) {
			c.log("released claim left alone: its run's repository is not one its pool's GitHub credentials serve", "run", m.Request.RunID, "repository", m.Request.Repository)
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
			c.log("released claims left alone: cannot tell whether their runs were re-run", "repository", repo.String(), "error", err.Error())
			if github.Temporary(err) {
				return due, nil
			}
			continue
		}
		jobsOf := map[github.RunAttempt][]github.Job{}
		for _, m := range byRepository[repo] {
			claimed, _ := m.Request.runAttempt()
			rerun := claimed
			rerun.Attempt = latest[claimed.RunID]
			if rerun.Attempt <= claimed.Attempt || rerun.Attempt <= m.RevivedFor {
				continue
			}
			jobs, asked := jobsOf[rerun]
			if !asked {
				jobs, err = g.Runs.RunAttemptJobs(ctx, rerun)
				if err != nil {
					c.log("released claim left alone: cannot tell whether a job of its run's re-run waits for its label", "run", m.Request.RunID, "error", err.Error())
					if github.Temporary(err) {
						return due, nil
					}
					continue
				}
				jobsOf[rerun] = jobs
			}
			if slices.ContainsFunc(jobs, func(j github.Job) bool { return j.WaitsFor(m.Request.Label) }) {
				due = append(due, revival{claim: m, attempt: rerun.Attempt})
			}
		}
	}
	return due, nil
}

// revive revives the released claims of due, concurrently, each once for
// its attempt (the marker says so before the claim begins, so that no
// other maintenance pass revives it again), each within reviveBudget. It
// returns the run ids of the claims revived.
func (c *Claimer) revive(ctx context.Context, s *store, due []revival) ([]string, error) {
	var (
		mu      sync.Mutex
		revived []string
		errs    []error
	)
	parallel(len(due), func(i int) {
		req, attempt := due[i].claim.Request, due[i].attempt
		first, err := s.markRevived(ctx, req.RunID, attempt)
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
			c.log("cannot revive a released claim whose label a re-run's job waits for", "run", req.RunID, "attempt", attempt, "error", err.Error())
			errs = append(errs, fmt.Errorf("reviving the claim of run %s for attempt %d of its workflow run: %w", req.RunID, attempt, err))
			return
		}
		c.log("revived a released claim whose label a re-run's job waits for", "run", req.RunID, "repository", req.Repository,
			"workflow_run", req.WorkflowRun.ID, "attempt", attempt, "instances", instanceIDs(res.Instances))
		revived = append(revived, req.RunID)
	})
	slices.Sort(revived)
	return revived, errors.Join(errs...)
}
