package claim

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// What claims, releases and scans tell internal/metrics, for the pools
// whose config item has metrics settings. Publishing never fails them: an
// error is logged and handed to Warn.

// MetricsTarget is where a pool's metrics go (not enabled without
// settings).
func MetricsTarget(cfg protocol.PoolConfig) metrics.Target {
	if cfg.Metrics == nil {
		return metrics.Target{}
	}
	return metrics.Target{Namespace: cfg.Metrics.Namespace, LogGroup: cfg.Metrics.LogGroup, Stream: protocol.MetricsStream(cfg.Name)}
}

// Publish sends events to the pool's metrics; a failure is only reported.
func (c *Claimer) Publish(ctx context.Context, cfg protocol.PoolConfig, events []metrics.Event) {
	t := MetricsTarget(cfg)
	if !t.Enabled() || len(events) == 0 {
		return
	}
	if err := c.Metrics.Publish(ctx, t, events); err != nil {
		c.log("publishing metrics failed", "pool", cfg.Name, "error", err.Error())
		c.warn(fmt.Sprintf("Metrics of pool %s not published", cfg.Name),
			fmt.Sprintf("%v. What the metrics would have counted happened; only CloudWatch does not know it. See the metrics guide for the permissions publishing needs.", err))
	}
}

func (c *Claimer) warn(summary, detail string) {
	if c.Warn != nil {
		c.Warn(summary, detail)
	}
}

// checkFailure is a runner's failed check, with its reason.
type checkFailure struct {
	reason metrics.Reason
	error
}

func (e checkFailure) Unwrap() error { return e.error }

// failCheck is a failed check's error, for its reason.
func failCheck(reason metrics.Reason, format string, args ...any) error {
	return checkFailure{reason: reason, error: fmt.Errorf(format, args...)}
}

// checkReason is why a check failed, as the metrics name it.
func checkReason(err error) metrics.Reason {
	var f checkFailure
	if errors.As(err, &f) {
		return f.reason
	}
	return metrics.ReasonOther
}

// checkLog collects the checks runners failed, from concurrent waits.
type checkLog struct {
	mu     sync.Mutex
	checks []metrics.Check
}

func (l *checkLog) add(id string, err error) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checks = append(l.checks, metrics.Check{Instance: id, Reason: checkReason(err)})
}

func (l *checkLog) list() []metrics.Check {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]metrics.Check(nil), l.checks...)
}

// releaseTally counts what a release did with each runner it settled.
type releaseTally struct {
	checkLog
	outcomes map[metrics.Outcome]int
}

func (t *releaseTally) count(o metrics.Outcome) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.outcomes == nil {
		t.outcomes = map[metrics.Outcome]int{}
	}
	t.outcomes[o]++
}

// failed records a runner's failed check of the release.
func (t *releaseTally) failed(id string, err error) {
	if t != nil {
		t.add(id, err)
	}
}

// keptOutcome is what a plan does with a runner released to the pool.
func keptOutcome(p plan) metrics.Outcome {
	switch p.tier {
	case protocol.TierHot:
		return metrics.OutcomeHot
	case protocol.TierStopped:
		return metrics.OutcomeStopped
	}
	return metrics.OutcomeIdle
}

// publishClaim reports an attempt that completed (res) or failed.
func (a *attempt) publishClaim(ctx context.Context, res *Result) {
	m := metrics.Claim{Pool: a.req.Pool, Class: a.req.ResourceClass, RunID: a.req.RunID, Checks: a.checks.list(), Failed: res == nil}
	if res != nil {
		m.Sources = map[metrics.Source]int{metrics.SourceHot: res.Reused, metrics.SourceStopped: res.Started, metrics.SourceFleet: res.Created}
		m.TimeToRunner = a.registered.Sub(a.started)
	}
	a.c.Publish(ctx, a.cfg, m.Events(a.c.now()))
}
