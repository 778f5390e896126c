package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// A cancelled or failed run releases its claims in a job of its own,
// which GitHub may end before it finishes (it forcibly ends a cancelled
// run's jobs after 5 minutes), or never run. Its runners would be held
// until the claim's max_runtime, and then terminated: the pool's
// maintenance asks GitHub instead whether the run attempt of each claim
// ended, and releases the claims of those that did.

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
	// release waits for its agents as a destroy does, until settleMargin
	// before its deadline, and returns as soon as they confirm.
	endedReleaseBudget = 3 * time.Minute
)

// releaseEndedRuns releases the complete claims of poolName whose GitHub
// Actions workflow run attempt ended without releasing them, as their
// destroy would (releaseRecord), and returns their run ids. It asks
// GitHub, with the credentials that mint the pool's runner tokens, about
// each claim that records its run attempt and is older than endedRunAge,
// once, in run id order: an attempt GitHub says is completed, or whose run
// was deleted, has ended. A claim of a repository the credentials do not
// serve, or that GitHub cannot tell about, is left alone and logged; once
// GitHub is rate limited, fails or does not answer, the rest of the pass
// is left alone too (the next pass asks again). Without credentials that
// read runs it does nothing. cfg is the pool's config when the caller
// read it, else nil.
func (c *Claimer) releaseEndedRuns(ctx context.Context, poolName string, cfg *protocol.PoolConfig) ([]string, error) {
	if cfg == nil {
		read, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
		if err != nil {
			return nil, ignoreMissingPool(err)
		}
		cfg = &read
	}
	g, err := c.githubAccess(ctx, *cfg)
	if err != nil {
		c.log("cannot ask GitHub whether the claims' runs ended", "pool", poolName, "error", err.Error())
		return nil, nil
	}
	if g == nil || g.Runs == nil {
		return nil, nil
	}
	s := c.store(poolName)
	asked, err := s.claimsOfRuns(ctx, poolName, c.now().Add(-endedRunAge))
	if err != nil {
		return nil, err
	}
	var ended []Record
	for _, rec := range asked {
		attempt, _ := rec.Request.runAttempt()
		if !g.serves(attempt.Repository) {
			c.log("claim left alone: its run's repository is not one its pool's GitHub credentials serve", "run", rec.Request.RunID, "repository", rec.Request.Repository)
			continue
		}
		done, err := g.Runs.RunAttemptEnded(ctx, attempt)
		if err != nil {
			c.log("claim left alone: cannot tell whether its run ended", "run", rec.Request.RunID, "error", err.Error())
			if github.Temporary(err) {
				break // the others' questions would fail alike
			}
			continue
		}
		if done {
			ended = append(ended, rec)
		}
	}
	var (
		mu       sync.Mutex
		released []string
		errs     []error
	)
	parallel(len(ended), func(i int) {
		rec := ended[i]
		outcomes, err := c.releaseRecord(ctx, s, rec)
		c.log("released the claim of an ended run", "run", rec.Request.RunID, "repository", rec.Request.Repository,
			"workflow_run", rec.Request.WorkflowRun.ID, "attempt", rec.Request.WorkflowRun.Attempt, "outcomes", outcomes)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("releasing the claim of run %s, whose workflow run ended: %w", rec.Request.RunID, err))
			return
		}
		released = append(released, rec.Request.RunID)
	})
	slices.Sort(released)
	return released, errors.Join(errs...)
}

// claimsOfRuns reads the complete claim records that name their workflow
// run attempt and completed before cutoff, in run id order. Records that
// cannot be read are skipped: the reap names them.
func (s *store) claimsOfRuns(ctx context.Context, poolName string, cutoff time.Time) ([]Record, error) {
	var out []Record
	err := s.queryType(ctx, protocol.TypeClaim, func(item map[string]types.AttributeValue) {
		r, err := recordFromItem(poolName, item)
		if err != nil || r.State != recordComplete {
			return
		}
		completed, err := protocol.ParseTime(r.UpdatedAt)
		if _, known := r.Request.runAttempt(); known && err == nil && completed.Before(cutoff) {
			out = append(out, r)
		}
	})
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Request.RunID, b.Request.RunID) })
	return out, err
}
