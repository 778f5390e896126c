package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// The pool's scheduled maintenance is what the ec2runners_reap and
// ec2runners_warm actions run, in that order, run by the pool's broker on
// the pool stack's schedule. Claims and releases reap along the way, but
// only it releases the claims of ended runs and revives released claims
// for re-runs when the pool is busy (a claim's reap leaves them to it) and
// fills the hot tier when a schedule window opens.

const (
	// MaintainBudget bounds one Maintain. Its reap takes what the pool
	// apply's takes (ReapBudget, then endedReleaseBudget for the claims
	// of ended runs and the revivals, and up to cleanupBudget more for a
	// revival that gives back what it took): 6.5 minutes at the very
	// most, seconds as a rule. Its fill gets the rest, as a rule enough
	// for a launch (launchBudget) and the hot runners' validation wait (3
	// minutes by default), and terminates at once the hot runners not
	// ready by then. So a Maintain ends within seconds of this, well
	// before Lambda ends a function (15 minutes at most; the broker of
	// examples/complete has that timeout).
	MaintainBudget = 10 * time.Minute
	// maintenanceHold is how long the lease of a Maintain that never gave
	// it back (its process was ended) keeps others out: as long as any
	// caller runs one, Lambda's longest timeout.
	maintenanceHold = 15 * time.Minute
	// maintenanceGap: a Maintain that ended less than this ago keeps the
	// lease, so that a second delivery of the same scheduled invocation
	// finds nothing to do.
	maintenanceGap = DefaultReapInterval
)

// MaintainResult says what a Maintain did, and what went wrong in each
// part (each went on past its errors, as Reap and Warm do).
type MaintainResult struct {
	Reap    ReapResult
	ReapErr error
	// Warm is the fill's; zero when the pool has no warm targets.
	Warm    WarmResult
	WarmErr error
}

// Maintain reaps the pool as Reap does (each part within the budget the
// pool apply's reap gives it) and then fills its warm targets as Warm
// does, all within MaintainBudget, unless another Maintain of the pool
// runs or ended less than maintenanceGap ago: then ran is false, and it
// did nothing. err is why it could not run.
//
// It holds the pool's maintenance lease (TYPE#LEASE, ID#maintenance)
// while it runs, not the reaper's: the reaps of claims and releases keep
// the reaper's lease taken in a busy pool, and leave the claims of ended
// runs and the revivals to this one.
func (c *Claimer) Maintain(ctx context.Context, poolName string, t Timings) (res MaintainResult, ran bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, MaintainBudget)
	defer cancel()
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
	if errors.Is(err, pool.ErrNotFound) {
		err = fmt.Errorf("pool %s does not exist", poolName)
	}
	if err != nil {
		return res, false, err
	}
	s := c.store(poolName)
	owner := newNonce()
	if taken, err := s.takeMaintenanceLease(ctx, owner); err != nil || !taken {
		return res, false, err
	}
	defer s.endMaintenanceLease(context.WithoutCancel(ctx), owner)
	budget, cancelReap := context.WithTimeout(ctx, ReapBudget)
	defer cancelReap()
	res.Reap, res.ReapErr = c.boundedReap(ctx, budget, poolName, &cfg, followAll)
	if len(cfg.Warm) > 0 {
		res.Warm, res.WarmErr = c.Warm(ctx, poolName, WarmOptions{Timings: t})
	}
	return res, true, nil
}

// takeMaintenanceLease takes the pool's maintenance lease for owner,
// unless another holds it.
func (s *store) takeMaintenanceLease(ctx context.Context, owner string) (bool, error) {
	now := s.now()
	_, err := s.db.UpdateItem(ctx, table.TakeMaintenanceLease(s.table, owner, now, now.Add(maintenanceHold)))
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("taking the maintenance lease of pool table %s: %w", s.table, err)
	}
	return true, nil
}

// endMaintenanceLease gives owner's lease back, to be taken again
// maintenanceGap from now. A lease another took meanwhile (owner's
// lapsed) stays theirs; one that cannot be written lapses by itself.
func (s *store) endMaintenanceLease(ctx context.Context, owner string) {
	_, err := s.db.UpdateItem(ctx, table.EndMaintenanceLease(s.table, owner, s.now().Add(maintenanceGap)))
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		s.log("giving the maintenance lease back failed; it lapses by itself", "table", s.table, "error", err.Error())
	}
}
