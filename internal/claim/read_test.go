package claim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

func TestRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clock := time.Now().Truncate(time.Second)
	e.c.Now = func() time.Time { return clock }
	future := protocol.FormatTime(clock.Add(time.Second))
	past := protocol.FormatTime(clock.Add(-time.Second))
	now := protocol.FormatTime(clock)
	records := []protocol.Instance{
		{ID: "i-running", State: protocol.StateRunning, RunID: testRun, Threshold: future},
		{ID: "i-claimed", State: protocol.StateClaimed, RunID: testRun, Threshold: future},
		{ID: "i-expired", State: protocol.StateRunning, RunID: testRun, Threshold: past},
		{ID: "i-deadline-now", State: protocol.StateRunning, RunID: testRun, Threshold: now},
		{ID: "i-other", State: protocol.StateRunning, RunID: "other-run", Threshold: future},
		{ID: "i-idle", State: protocol.StateIdle, RunID: "", Threshold: future},
		{ID: "i-created", State: protocol.StateCreated, RunID: testRun, Threshold: future},
		{ID: "i-terminated", State: protocol.StateTerminated, RunID: testRun, Threshold: past},
	}
	var insts []Instance
	for _, r := range records {
		e.seedRecord(r, healthy)
		insts = append(insts, Instance{ID: r.ID, InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, Source: SourcePool})
	}
	insts = append(insts, Instance{ID: "i-gone", Source: SourceFleet})
	rec := Record{Request: e.request(len(insts)), State: recordComplete, Nonce: "n1", Instances: insts, OwnedIDs: instanceIDs(insts)}
	e.db.Put(rec.Item(protocol.FormatTime(time.Now())))
	e.db.UnprocessedReads = 1 // Read must follow unprocessed keys

	got, live, ok, err := e.c.Read(context.Background(), testPool, testRun)
	if err != nil || !ok {
		t.Fatalf("Read = %v, %v", ok, err)
	}
	if ids := instanceIDs(live); !slices.Equal(ids, []string{"i-running", "i-claimed"}) {
		t.Errorf("live %v, want i-running and i-claimed", ids)
	}
	if got.State != recordComplete || got.Nonce != "n1" || len(got.Instances) != len(insts) || got.Request.RunID != testRun ||
		got.Request.Pool != testPool || got.Request.InstanceCount != len(insts) || got.Request.Timings.ReleaseWait != testTimings().ReleaseWait {
		t.Errorf("record %+v", got)
	}
	if e.db.Count("BatchGetItem") < 2 {
		t.Error("unprocessed keys were not read again")
	}
	if len(e.sqs.SentEntries()) != 0 || e.db.Count("UpdateItem") != 0 || e.db.Count("PutItem") != 0 {
		t.Error("Read wrote something")
	}
}

func TestReadMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, p := range []string{testPool, "nopool"} {
		_, live, ok, err := e.c.Read(context.Background(), p, testRun)
		if ok || err != nil || live != nil {
			t.Errorf("Read in %s = %v, %v, %v; want not found", p, live, ok, err)
		}
	}
	e.db.Fail("GetItem", e.db.Count("GetItem")+1, errTransient)
	if _, _, _, err := e.c.Read(context.Background(), testPool, testRun); err == nil {
		t.Error("a read error was swallowed")
	}
}

// A claim made by Create reads back with all its runners live.
func TestReadAfterCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	res, err := e.create(2)
	if err != nil {
		t.Fatal(err)
	}
	rec, live, ok, err := e.c.Read(context.Background(), testPool, testRun)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if !slices.Equal(ids(live), ids(res.Instances)) || !slices.Equal(ids(rec.Instances), ids(res.Instances)) {
		t.Errorf("live %v, record %v, created %v", ids(live), ids(rec.Instances), ids(res.Instances))
	}
}

// A throttled table leaves keys of a BatchGetItem unprocessed: they are
// read again after a growing wait, and a table that keeps leaving them is
// an error after a bounded number of calls, not a busy loop.
func TestBatchGetBacksOffOnUnprocessedKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRecord(protocol.Instance{ID: "i-1", State: protocol.StateIdle, Threshold: protocol.FormatTime(time.Now().Add(time.Hour))}, healthy)
	s := e.c.store(testPool)
	ctx, cancel := context.WithTimeout(context.Background(), await.Patience)
	defer cancel()

	e.db.UnprocessedReads = 2
	got, err := s.instances(ctx, []string{"i-1"})
	if err != nil || got["i-1"].State != protocol.StateIdle {
		t.Fatalf("instances: %v, %v", got, err)
	}
	if n := e.db.Count("BatchGetItem"); n != 3 {
		t.Errorf("%d BatchGetItem calls, want 3", n)
	}

	e.db.UnprocessedReads = 1 << 30
	if _, err := s.instances(ctx, []string{"i-1"}); err == nil || !strings.Contains(err.Error(), "unprocessed 8 times") {
		t.Errorf("a table that never reads: %v", err)
	}
	if n := e.db.Count("BatchGetItem") - 3; n != unprocessedAttempts {
		t.Errorf("%d BatchGetItem calls for a table that never reads, want %d", n, unprocessedAttempts)
	}
}
