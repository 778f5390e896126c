package claim

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Runner states, as Runners reports them.
const (
	RunnerIdle    = "idle"    // waiting in the pool, running
	RunnerStopped = "stopped" // in the pool's stopped tier (its instance stopped, or stopping)
	RunnerClaimed = "claimed" // held by a run: being launched, checked, or running its jobs
)

// Runner is one runner of a pool, as its record tells it.
type Runner struct {
	ID            string
	ResourceClass string
	InstanceType  string
	UsageClass    string
	State         string // RunnerIdle, RunnerStopped or RunnerClaimed
	RunID         string // the run that holds it; "" in the pool
	// LaunchedAt is zero when the record does not say (runners recorded
	// before launch times were).
	LaunchedAt time.Time
}

// Runners returns the runners of a pool, by id: every record neither
// terminated nor past its last deadline (the reaper ends those), and the
// records it could not read (skipped). A pool that does not exist is
// pool.ErrNotFound.
func (c *Claimer) Runners(ctx context.Context, poolName string) ([]Runner, []string, error) {
	records, corrupt, err := c.store(poolName).allInstances(ctx)
	if isTableMissing(err) {
		return nil, nil, fmt.Errorf("listing the runners of pool %s: %w", poolName, pool.ErrNotFound)
	}
	if err != nil {
		return nil, nil, err
	}
	now := c.now()
	var runners []Runner
	for _, r := range records {
		if r.State == protocol.StateTerminated || protocol.IsPast(r.End(), now) {
			continue
		}
		runner := Runner{ID: r.ID, ResourceClass: r.ResourceClass, InstanceType: r.InstanceType, UsageClass: r.UsageClass,
			State: RunnerState(r, now), RunID: r.RunID}
		if launched, err := protocol.ParseTime(r.LaunchedAt); err == nil {
			runner.LaunchedAt = launched
		}
		runners = append(runners, runner)
	}
	sort.Slice(runners, func(i, j int) bool { return runners[i].ID < runners[j].ID })
	return runners, corrupt, nil
}

// RunnerState is what a live runner is doing at now, as Runners and the
// pool scans name it: stopped, idle or claimed.
func RunnerState(r protocol.Instance, now time.Time) string {
	switch {
	case r.Stopped(now):
		return RunnerStopped
	case r.State == protocol.StateIdle:
		return RunnerIdle
	default:
		return RunnerClaimed
	}
}

// allInstances reads every instance record, page by page, skipping (and
// naming) corrupt ones.
func (s *store) allInstances(ctx context.Context) ([]protocol.Instance, []string, error) {
	var out []protocol.Instance
	var corrupt []string
	err := s.queryType(ctx, protocol.TypeInstance, func(item map[string]types.AttributeValue) {
		inst, err := protocol.InstanceFromItem(item)
		if err != nil {
			corrupt = append(corrupt, fmt.Sprintf("%s: %v", protocol.StringAttr(item, protocol.AttrSK), err))
			return
		}
		out = append(out, inst)
	})
	return out, corrupt, err
}
