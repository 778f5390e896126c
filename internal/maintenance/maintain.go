package maintenance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
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
	// apply's takes (ReapBudget, then 3 minutes for the claims of
	// ended runs and the revivals, and up to 3 minutes more for a revival
	// that gives back what it took): 6.5 minutes at the very most, seconds
	// as a rule. Its fill gets the rest, as a rule enough for a launch and
	// the hot runners' validation wait (3 minutes by default), and
	// terminates at once the hot runners not ready by then. So a Maintain
	// ends within seconds of this, well before Lambda ends a function (15
	// minutes at most; the broker of examples/complete has that timeout).
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

// Maintain reaps the pool as the pool's apply does (BoundedReap) and then fills its warm targets as Warm does, all within
// MaintainBudget, unless another Maintain of the pool runs or ended less
// than maintenanceGap ago: then ran is false, and it did nothing. err is
// why it could not run.
//
// It holds the pool's maintenance lease (TYPE#LEASE, ID#maintenance)
// while it runs, not the reaper's: the reaps of claims and releases keep
// the reaper's lease taken in a busy pool, and leave the claims of ended
// runs and the revivals to this one.
func Maintain(ctx context.Context, c *claim.Claimer, poolName string, t claim.Timings) (res MaintainResult, ran bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, MaintainBudget)
	defer cancel()
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
	if errors.Is(err, pool.ErrNotFound) {
		err = fmt.Errorf("pool %s does not exist", poolName)
	}
	if err != nil {
		return res, false, err
	}
	l := lease{c: c, table: protocol.TableName(poolName), owner: newOwner()}
	if taken, err := l.take(ctx); err != nil || !taken {
		return res, false, err
	}
	defer l.end(context.WithoutCancel(ctx))
	res.Reap, res.ReapErr = BoundedReap(ctx, c, poolName, &cfg)
	if len(cfg.Warm) > 0 {
		res.Warm, res.WarmErr = Warm(ctx, c, poolName, WarmOptions{Timings: t})
	}
	return res, true, nil
}

// lease is the pool's maintenance lease, as owner takes it.
type lease struct {
	c     *claim.Claimer
	table string
	owner string
}

// take takes the lease, unless another holds it.
func (l lease) take(ctx context.Context) (bool, error) {
	now := nowOf(l.c)
	_, err := l.c.DynamoDB.UpdateItem(ctx, table.TakeMaintenanceLease(l.table, l.owner, now, now.Add(maintenanceHold)))
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("taking the maintenance lease of pool table %s: %w", l.table, err)
	}
	return true, nil
}

// end gives the lease back, to be taken again maintenanceGap from now. A
// lease another took meanwhile (owner's lapsed) stays theirs; one that
// cannot be written lapses by itself.
func (l lease) end(ctx context.Context) {
	_, err := l.c.DynamoDB.UpdateItem(ctx, table.EndMaintenanceLease(l.table, l.owner, nowOf(l.c).Add(maintenanceGap)))
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		log(l.c, "giving the maintenance lease back failed; it lapses by itself", "table", l.table, "error", err.Error())
	}
}

// newOwner names one Maintain, the holder of the lease.
func newOwner() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}
