// Package maintenance keeps a pool in order around the claims made of
// it (package claim): the reap (reap.go), the claims of ended runs and the
// runners a job still runs on (ended.go), the revivals of released claims
// for re-runs (released.go), the warm tiers' fill (fill.go) and the scans'
// metrics (scan.go). Its callers call it explicitly: Alongside beside
// every claim and release, Maintain on the pool's schedule, the pool
// resource's apply, and the reap and warm actions.
package maintenance

import (
	"context"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

const (
	// TopUpBudget bounds the top-up of the stopped tier after a due reap.
	TopUpBudget = 30 * time.Second
	// AlongsideBudget is the most Alongside makes its caller wait beyond
	// its own work: a due reap (ReapBudget, and as much again to
	// follow the claims' runs) runs beside the caller's work, and the
	// top-up after both.
	AlongsideBudget = 2*ReapBudget + TopUpBudget
	// TopUpMost: a top-up launches at most this many stopped runners per
	// class.
	TopUpMost = 2
)

// Alongside starts an opportunistic reap of poolName, at most once per
// c.ReapInterval (ReapAlongside), and returns the func that
// waits for it and then, when the reap was due, tops the pool's stopped
// tier up: a claim may just have started stopped runners, and a stopped
// runner launched now costs no waiting (it stops itself once prepared).
// Releases top up too, on purpose: between bursts only releases run, and
// the tier they refill is what the next burst starts (replayed without
// them, the simulation guide's office-hours policies serve the p95 job in
// their window cold). Both are bounded (AlongsideBudget); failures are
// only logged. Claims and releases call it around their work, so that the
// reap overlaps their waits; reads never do.
func Alongside(ctx context.Context, c *claim.Claimer, poolName string) (wait func()) {
	done := make(chan bool, 1)
	go func() {
		ran, err := ReapAlongside(context.WithoutCancel(ctx), c, poolName)
		if err != nil {
			log(c, "reaping failed", "pool", poolName, "error", err.Error())
		}
		done <- ran
	}()
	return func() {
		if !<-done {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TopUpBudget)
		defer cancel()
		res, err := Warm(ctx, c, poolName, WarmOptions{Tiers: []protocol.Tier{protocol.TierStopped}, Most: TopUpMost, Timings: claim.DefaultTimings()})
		if err != nil {
			log(c, "topping the stopped tier up failed", "pool", poolName, "error", err.Error())
		} else if len(res.Launched) > 0 {
			log(c, "topped the stopped tier up", "pool", poolName, "launched", res.Launched)
		}
	}
}
