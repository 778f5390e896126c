package claim

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

func TestRunners(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clock := time.Now().UTC().Truncate(time.Second)
	e.c.Now = func() time.Time { return clock }
	at := func(d time.Duration) string { return protocol.FormatTime(clock.Add(d)) }
	launched := clock.Add(-3 * time.Hour)
	e.seedRecord(protocol.Instance{ID: "i-idle", State: protocol.StateIdle, Threshold: at(time.Minute), LaunchedAt: protocol.FormatTime(launched)}, healthy)
	e.seedRecord(protocol.Instance{ID: "i-stopped", State: protocol.StateIdle, Threshold: at(-time.Hour), StopUntil: at(time.Hour), ResourceClass: "xlarge"}, healthy)
	e.seedRecord(protocol.Instance{ID: "i-running", State: protocol.StateRunning, RunID: "run-1", Threshold: at(time.Hour)}, healthy)
	e.seedRecord(protocol.Instance{ID: "i-created", State: protocol.StateCreated, RunID: "run-2", Threshold: at(time.Minute)}, healthy)
	// Gone, or waiting for the reaper: not the pool's runners any more.
	e.seedRecord(protocol.Instance{ID: "i-terminated", State: protocol.StateTerminated, Threshold: at(time.Hour)}, healthy)
	e.seedRecord(protocol.Instance{ID: "i-expired", State: protocol.StateRunning, RunID: "run-3", Threshold: at(-time.Minute)}, healthy)
	e.seedRecord(protocol.Instance{ID: "i-stopped-out", State: protocol.StateIdle, Threshold: at(-2 * time.Hour), StopUntil: at(-time.Hour)}, healthy)
	broken := protocol.Instance{ID: "i-broken", State: protocol.StateIdle, Threshold: at(time.Hour)}.Item()
	delete(broken, protocol.AttrState)
	e.db.Put(broken)

	got, corrupt, err := e.c.Runners(context.Background(), testPool)
	if err != nil {
		t.Fatal(err)
	}
	runner := func(id, class, state, runID string) Runner {
		return Runner{ID: id, ResourceClass: class, InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, State: state, RunID: runID}
	}
	idle := runner("i-idle", "large", RunnerIdle, "")
	idle.LaunchedAt = launched
	want := []Runner{
		runner("i-created", "large", RunnerClaimed, "run-2"),
		idle,
		runner("i-running", "large", RunnerClaimed, "run-1"),
		runner("i-stopped", "xlarge", RunnerStopped, ""),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Runners =\n%+v\nwant\n%+v", got, want)
	}
	if len(corrupt) != 1 {
		t.Errorf("corrupt records %v, want i-broken's", corrupt)
	}
	if e.db.Count("UpdateItem")+e.db.Count("PutItem")+e.db.Count("DeleteItem") != 0 {
		t.Error("Runners wrote something")
	}
}

func TestRunnersErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, _, err := e.c.Runners(context.Background(), "nopool"); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("Runners of a missing pool: %v, want pool.ErrNotFound", err)
	}
	e.db.Fail("Query", e.db.Count("Query")+1, errTransient)
	if _, _, err := e.c.Runners(context.Background(), testPool); err == nil {
		t.Error("a query error was swallowed")
	}
}
