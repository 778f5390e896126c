package maintenance

import (
	"context"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The pool scans of the reaps and fills: the pool's runners by class and
// state, for the pools with metrics settings.

// scanConfig is the pool's config for a scan's metrics: cfg when the
// caller read it, else read now when metrics can be published at all; nil
// when there is nothing to publish to.
func scanConfig(ctx context.Context, c *claim.Claimer, poolName string, cfg *protocol.PoolConfig) *protocol.PoolConfig {
	if cfg != nil || c.Metrics == nil {
		return cfg
	}
	read, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
	if err != nil {
		log(c, "reading the pool's metrics settings failed", "pool", poolName, "error", err.Error())
		return nil
	}
	return &read
}

// runnerStates counts a pool's live runners (records not terminated nor
// past their last deadline at now) by class and state, with every class of
// cfg that has warm targets.
func runnerStates(cfg protocol.PoolConfig, records []protocol.Instance, gone map[string]bool, now time.Time) metrics.Scan {
	scan := metrics.Scan{Pool: cfg.Name, ByClass: map[string]map[metrics.State]int{}}
	for class := range cfg.Warm {
		scan.ByClass[class] = map[metrics.State]int{}
	}
	for _, r := range records {
		if gone[r.ID] || r.State == protocol.StateTerminated || protocol.IsPast(r.End(), now) {
			continue
		}
		if scan.ByClass[r.ResourceClass] == nil {
			scan.ByClass[r.ResourceClass] = map[metrics.State]int{}
		}
		scan.ByClass[r.ResourceClass][metrics.State(claim.RunnerState(r, now))]++
	}
	return scan
}
