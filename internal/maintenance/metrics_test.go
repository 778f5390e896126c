package maintenance

import (
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

// A reap counts the pool's runners by class and state as it leaves them,
// zeros included, and the classes with warm targets even when empty.
func TestReapPublishesRunnerStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"xlarge": {Stopped: 1}}
	logs := e.Metrics(&e.cfg)
	e.c.Metrics = &metrics.Publisher{Logs: logs}
	now := time.Now()
	for _, r := range []protocol.Instance{
		{ID: "i-1", State: protocol.StateIdle, Threshold: protocol.FormatTime(now.Add(time.Hour))},
		{ID: "i-2", State: protocol.StateRunning, RunID: "run-9", Threshold: protocol.FormatTime(now.Add(time.Hour))},
		{ID: "i-3", State: protocol.StateIdle, Threshold: protocol.FormatTime(now.Add(-time.Hour))}, // past its deadline: reaped
		{ID: "i-4", State: protocol.StateIdle, Threshold: protocol.FormatTime(now.Add(-time.Hour)), StopUntil: protocol.FormatTime(now.Add(time.Hour))},
	} {
		e.EC2.Launch(r.ID, now)
		e.SeedRecord(r, poolworld.Healthy)
	}
	if _, err := Reap(t.Context(), e.c, poolworld.Pool); err != nil {
		t.Fatal(err)
	}
	poolworld.WantPublished(t, logs,
		"Class=large State=idle Runners=1", "Class=large State=stopped Runners=1", "Class=large State=claimed Runners=1",
		"Class=xlarge State=idle Runners=0", "Class=xlarge State=stopped Runners=0", "Class=xlarge State=claimed Runners=0",
	)
}

// Without metrics settings nothing is published, and no call is made.
func TestNoMetricsWithoutSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs := awsfake.NewLogs(poolworld.MetricsLogGroup)
	e.c.Metrics = &metrics.Publisher{Logs: logs}
	e.SeedIdle("i-1", poolworld.Healthy)
	if _, err := e.create(1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Release(t.Context(), poolworld.Pool, poolworld.Run); err != nil {
		t.Fatal(err)
	}
	if _, err := Reap(t.Context(), e.c, poolworld.Pool); err != nil {
		t.Fatal(err)
	}
	if n := logs.Calls("PutLogEvents"); n != 0 {
		t.Errorf("%d PutLogEvents for a pool without metrics settings", n)
	}
}
