package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

const (
	// DefaultReapInterval: a pool is reaped at most this often, by whichever
	// claim, release or apply of the pool comes first (never by a read).
	DefaultReapInterval = time.Minute
	// ReapBudget bounds one reap, and again the following of the claims'
	// runs after it on a claim's or a release's way (followHolds).
	ReapBudget = 20 * time.Second
	// orphanGrace: an instance may run this long without a live record. A
	// claim writes the record right after CreateFleet returns; the created
	// state lives as long.
	orphanGrace = claim.CreatedLifetime
	// staleClaimAge: a pending claim record this old belongs to an attempt
	// that crashed and was never retried.
	staleClaimAge = time.Hour
)

// ReapResult says what a reap did.
type ReapResult struct {
	Expired       []string // records past their threshold, now terminated
	Orphans       []string // instances without a live record, terminated
	Vanished      []string // live records whose instance is gone from EC2
	StaleClaims   []string // pending claim records of crashed attempts, deleted
	EndedRuns     []string // claims whose workflow run ended without releasing them, released
	HeldRuns      []string // claims near their deadline with a job of their run still on their runners, held longer
	RevivedRuns   []string // released claims whose label a job of their run's re-run waits for, claimed again
	CorruptItems  []string // records that could not be read, skipped
	TerminateFail error    // instances marked terminated whose termination failed (the next reap retries them as orphans)
}

// Empty tells whether the reap found nothing to do.
func (r ReapResult) Empty() bool {
	return len(r.Expired)+len(r.Orphans)+len(r.Vanished)+len(r.StaleClaims)+len(r.EndedRuns)+len(r.HeldRuns)+len(r.RevivedRuns)+len(r.CorruptItems) == 0 && r.TerminateFail == nil
}

// ReapIfDue reaps the pool unless another caller did within interval
// (a lease item in the table decides), bounded by ReapBudget, and then
// follows the claims' workflow runs (followRuns), bounded by
// endedReleaseBudget. ran is false when it was not due.
func ReapIfDue(ctx context.Context, c *claim.Claimer, poolName string, interval time.Duration) (res ReapResult, ran bool, err error) {
	return reapIfDue(ctx, c, poolName, interval, followAll)
}

// ReapAlongside is the reap that runs alongside a claim or a release
// (Alongside): ReapIfDue at c.ReapInterval, following the
// claims' runs only as far as holding the runners a job still runs on
// (followHolds), which the caller does not wait long for.
func ReapAlongside(ctx context.Context, c *claim.Claimer, poolName string) (ran bool, err error) {
	_, ran, err = reapIfDue(ctx, c, poolName, c.ReapInterval, followHolds)
	return ran, err
}

// reapIfDue is ReapIfDue, following the claims' runs as far as scope
// says.
func reapIfDue(ctx context.Context, c *claim.Claimer, poolName string, interval time.Duration, scope followScope) (res ReapResult, ran bool, err error) {
	if interval < 0 {
		return ReapResult{}, false, nil
	}
	if interval == 0 {
		interval = DefaultReapInterval
	}
	budget, cancel := context.WithTimeout(ctx, ReapBudget)
	defer cancel()
	due, err := takeReaperLease(budget, c, poolName, interval)
	if err != nil || !due {
		return ReapResult{}, false, claim.IgnoreMissingPool(err)
	}
	res, err = boundedReap(ctx, budget, c, poolName, nil, scope)
	return res, true, err
}

// BoundedReap reaps the pool and follows the claims' runs, each part
// within its budget, as the pool's apply does when a reap is due
// (ReapIfDue): the pool's scheduled maintenance (Maintain).
// cfg is the pool's config, for the reap's metrics.
func BoundedReap(ctx context.Context, c *claim.Claimer, poolName string, cfg *protocol.PoolConfig) (ReapResult, error) {
	budget, cancel := context.WithTimeout(ctx, ReapBudget)
	defer cancel()
	return boundedReap(ctx, budget, c, poolName, cfg, followAll)
}

// boundedReap reaps the pool within budget (a context bounded by
// ReapBudget), then follows the claims' runs as far as scope says, within
// ReapBudget again, or endedReleaseBudget when it releases the claims of
// ended runs and revives (followAll).
func boundedReap(ctx, budget context.Context, c *claim.Claimer, poolName string, cfg *protocol.PoolConfig, scope followScope) (ReapResult, error) {
	res, err := reap(budget, c, poolName, cfg)
	following, cancelFollowing := context.WithTimeout(ctx, ReapBudget)
	if scope == followAll {
		following, cancelFollowing = context.WithTimeout(ctx, endedReleaseBudget)
	}
	defer cancelFollowing()
	followed, runsErr := followRuns(following, c, poolName, cfg, scope)
	res.EndedRuns, res.HeldRuns, res.RevivedRuns = followed.Ended, followed.Held, followed.Revived
	return res, errors.Join(err, runsErr)
}

// takeReaperLease records this reap, unless one ran within interval.
func takeReaperLease(ctx context.Context, c *claim.Claimer, poolName string, interval time.Duration) (bool, error) {
	_, err := c.DynamoDB.UpdateItem(ctx, table.TakeReaperLease(protocol.TableName(poolName), nowOf(c), interval))
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	return err == nil, err
}

// Reap cleans the pool up, as the pool protocol's reaper: records past their
// threshold (a stopped runner's: past its stopped time), in any state but
// terminated, move to terminated (state, run id and threshold < now in one
// conditional write) and their instances are terminated in batches; instances tagged for the pool without a live
// record are terminated after a grace period; live records whose instance
// EC2 no longer runs are expired and terminated; pending claim records of
// attempts that crashed long ago are deleted once nothing they list is
// alive. Corrupt items are skipped and reported. A pool with metrics
// settings gets its runners by class and state, as the reap left them.
// Then the claims whose workflow run ended without releasing them are
// released, and those whose job still runs on their runners near their
// deadline held longer (followRuns).
func Reap(ctx context.Context, c *claim.Claimer, poolName string) (ReapResult, error) {
	res, err := reap(ctx, c, poolName, nil)
	followed, runsErr := followRuns(ctx, c, poolName, nil, followAll)
	res.EndedRuns, res.HeldRuns, res.RevivedRuns = followed.Ended, followed.Held, followed.Revived
	return res, errors.Join(err, runsErr)
}

func reap(ctx context.Context, c *claim.Claimer, poolName string, cfg *protocol.PoolConfig) (ReapResult, error) {
	s := c.PoolTable(poolName)
	var res ReapResult
	records, corrupt, err := s.Instances(ctx)
	if err != nil {
		return res, err
	}
	res.CorruptItems = corrupt
	now := nowOf(c)
	var doomed []string
	live := map[string]protocol.Instance{}
	for _, r := range records {
		if r.State == protocol.StateTerminated {
			continue
		}
		end, err := protocol.ParseTime(r.End()) // a stopped runner's stopped time too
		if err != nil || end.After(now) || end.Equal(now) {
			live[r.ID] = r
			continue
		}
		err = s.Apply(ctx, r.ID, table.Transition{FromState: r.State, FromRunID: r.RunID, ToState: protocol.StateTerminated, ToRunID: r.RunID, Threshold: now, Deadline: table.DeadlinePassed})
		switch {
		case err == nil:
			res.Expired = append(res.Expired, r.ID)
			doomed = append(doomed, r.ID)
		case errors.Is(err, claim.ErrRecordChanged):
			// Revived meanwhile (claimed, or its agent renewed it): live,
			// and so not an orphan either.
			live[r.ID] = r
		default:
			return res, fmt.Errorf("reaping %s: %w", r.ID, err)
		}
	}
	running, err := pool.LiveInstances(ctx, c.EC2, poolName)
	if err != nil {
		return res, err
	}
	for id, launched := range running {
		if _, ok := live[id]; !ok && !slices.Contains(res.Expired, id) && now.Sub(launched) > orphanGrace {
			res.Orphans = append(res.Orphans, id)
			doomed = append(doomed, id)
		}
	}
	for id, r := range live {
		updated, err := protocol.ParseTime(r.UpdatedAt)
		if _, runs := running[id]; runs || err != nil || now.Sub(updated) <= orphanGrace {
			continue
		}
		// Reclaimed spot capacity, or terminated outside the pool.
		terminated, err := s.Discard(ctx, id, r.State, r.RunID)
		if err != nil {
			return res, fmt.Errorf("recording that %s is gone: %w", id, err)
		}
		if terminated {
			res.Vanished = append(res.Vanished, id)
		}
	}
	sort.Strings(doomed)
	res.TerminateFail = pool.TerminateInstances(ctx, c.EC2, doomed, false)
	if cfg := scanConfig(ctx, c, poolName, cfg); cfg != nil {
		gone := map[string]bool{}
		for _, id := range slices.Concat(res.Expired, res.Vanished) {
			gone[id] = true
		}
		c.Publish(ctx, *cfg, runnerStates(*cfg, records, gone, now).Events(nowOf(c)))
	}
	res.StaleClaims, err = reapStaleClaims(ctx, c, s, live, running, now)
	if !res.Empty() {
		log(c, "reaped pool", "pool", poolName, "expired", res.Expired, "orphans", res.Orphans, "vanished", res.Vanished,
			"stale_claims", res.StaleClaims, "corrupt", res.CorruptItems, "terminate_error", fmt.Sprint(res.TerminateFail))
	}
	return res, err
}

// reapStaleClaims deletes pending claim records whose attempt stopped
// refreshing them long ago and whose instances are all gone.
func reapStaleClaims(ctx context.Context, c *claim.Claimer, s *claim.PoolTable, live map[string]protocol.Instance, running map[string]time.Time, now time.Time) ([]string, error) {
	claims, err := s.Claims(ctx)
	if err != nil {
		return nil, err
	}
	var stale []claim.Record
	for _, r := range claims {
		if updated, err := protocol.ParseTime(r.UpdatedAt); err != nil || r.State != claim.StatePending || now.Sub(updated) < staleClaimAge || anyAlive(r.OwnedIDs, live, running) {
			continue
		}
		stale = append(stale, r)
	}
	runIDs := make([]string, len(stale))
	for i, r := range stale {
		if err := s.DeleteRecord(ctx, r.Request.RunID, r.Nonce); err != nil {
			return nil, err
		}
		runIDs[i] = r.Request.RunID
	}
	return runIDs, nil
}

// anyAlive tells whether any of ids has a live record or a running
// instance.
func anyAlive(ids []string, live map[string]protocol.Instance, running map[string]time.Time) bool {
	for _, id := range ids {
		_, recorded := live[id]
		_, runs := running[id]
		if recorded || runs {
			return true
		}
	}
	return false
}
