package table_test

// The table's requests, run against awsfake's table, which evaluates
// DynamoDB's expressions as DynamoDB does: each write happens when its
// condition holds and is refused when it does not.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

const pool = "pool"

var (
	ctx = context.Background()
	now = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
)

// newTable is the pool's table holding items.
func newTable(items ...table.Item) *awsfake.Table {
	db := awsfake.NewTable(pool)
	for _, it := range items {
		db.Put(it)
	}
	return db
}

// refused checks err is a failed condition and returns the item it
// carries (the item as it was, when asked for).
func refused(t *testing.T, what string, err error) table.Item {
	t.Helper()
	var c *types.ConditionalCheckFailedException
	if !errors.As(err, &c) {
		t.Fatalf("%s: %v, want its condition to fail", what, err)
	}
	return c.Item
}

func instance(id, state, runID string, threshold time.Time) protocol.Instance {
	return protocol.Instance{ID: id, State: state, RunID: runID, Threshold: protocol.FormatTime(threshold),
		ResourceClass: "large", InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, UpdatedAt: protocol.FormatTime(now.Add(-time.Hour))}
}

func record(t *testing.T, db *awsfake.Table, id string) protocol.Instance {
	t.Helper()
	inst, err := protocol.InstanceFromItem(db.Get(protocol.TypeInstance, id))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// A claim takes an idle runner whose idle time is not over, and only that.
func TestTransition_claim(t *testing.T) {
	claim := table.Transition{FromState: protocol.StateIdle, ToState: protocol.StateClaimed, ToRunID: "run-1",
		Threshold: now.Add(time.Hour), Deadline: table.DeadlineLive}
	idle := instance("i-1", protocol.StateIdle, "", now.Add(time.Minute))
	idle.StopUntil = protocol.FormatTime(now.Add(2 * time.Hour))
	db := newTable(idle.Item())
	if _, err := db.UpdateItem(ctx, table.Alone(claim.Update(pool, "i-1", now))); err != nil {
		t.Fatalf("claiming an idle runner: %v", err)
	}
	got := record(t, db, "i-1")
	if got.State != protocol.StateClaimed || got.RunID != "run-1" || got.Threshold != protocol.FormatTime(now.Add(time.Hour)) ||
		got.UpdatedAt != protocol.FormatTime(now) || got.StopUntil != "" {
		t.Errorf("claimed record %+v: want claimed by run-1 until %s, updated now, no stopped time", got, now.Add(time.Hour))
	}
	if !claim.AppliedTo(db.Get(protocol.TypeInstance, "i-1")) {
		t.Error("AppliedTo does not see the claim in the record it wrote")
	}

	for name, rec := range map[string]protocol.Instance{
		"claimed by another run": instance("i-1", protocol.StateClaimed, "run-2", now.Add(time.Hour)),
		"running":                instance("i-1", protocol.StateRunning, "", now.Add(time.Hour)),
		"idle time over":         instance("i-1", protocol.StateIdle, "", now.Add(-time.Second)),
	} {
		t.Run(name, func(t *testing.T) {
			db := newTable(rec.Item())
			old := refused(t, "claiming", sdkErr(db.UpdateItem(ctx, table.Alone(claim.Update(pool, "i-1", now)))))
			if protocol.StringAttr(old, protocol.AttrState) != rec.State || protocol.StringAttr(old, protocol.AttrRunID) != rec.RunID {
				t.Errorf("the refusal carries %v, want the record as it was", old)
			}
			if got := record(t, db, "i-1"); got != rec {
				t.Errorf("a refused claim changed the record: %+v", got)
			}
			if claim.AppliedTo(old) {
				t.Error("AppliedTo takes another's record for our write")
			}
		})
	}
	_, err := newTable().UpdateItem(ctx, table.Alone(claim.Update(pool, "i-1", now)))
	refused(t, "claiming a runner without a record", err)
}

// A runner goes back to the pool (release) only from the run that holds
// it, with a stopped time when it has one; a reap ends a runner whose
// deadline passed; one in its stopped time is started from it.
func TestTransition_releaseReapStart(t *testing.T) {
	release := table.Transition{FromState: protocol.StateRunning, FromRunID: "run-1", ToState: protocol.StateIdle,
		Threshold: now.Add(10 * time.Minute), StopUntil: now.Add(time.Hour)}
	db := newTable(instance("i-1", protocol.StateRunning, "run-1", now.Add(time.Hour)).Item(), instance("i-2", protocol.StateRunning, "run-2", now.Add(time.Hour)).Item())
	if _, err := db.UpdateItem(ctx, table.Alone(release.Update(pool, "i-1", now))); err != nil {
		t.Fatal(err)
	}
	if got := record(t, db, "i-1"); got.State != protocol.StateIdle || got.RunID != "" || got.StopUntil != protocol.FormatTime(now.Add(time.Hour)) {
		t.Errorf("released record %+v: want idle, no run, stopped until %s", got, now.Add(time.Hour))
	}
	refused(t, "releasing another run's runner", sdkErr(db.UpdateItem(ctx, table.Alone(release.Update(pool, "i-2", now)))))

	reap := table.Transition{FromState: protocol.StateRunning, FromRunID: "run-2", ToState: protocol.StateTerminated, Threshold: now, Deadline: table.DeadlinePassed}
	refused(t, "reaping before the deadline", sdkErr(db.UpdateItem(ctx, table.Alone(reap.Update(pool, "i-2", now)))))
	later := now.Add(2 * time.Hour)
	if _, err := db.UpdateItem(ctx, table.Alone(reap.Update(pool, "i-2", later))); err != nil {
		t.Fatalf("reaping after the deadline: %v", err)
	}
	if it := db.Get(protocol.TypeInstance, "i-2"); protocol.StringAttr(it, protocol.AttrState) != protocol.StateTerminated || it[protocol.AttrExpiresAt] == nil {
		t.Errorf("reaped record %v: want terminated, with an expiry", it)
	}

	start := table.Transition{FromState: protocol.StateIdle, ToState: protocol.StateClaimed, ToRunID: "run-3", Threshold: later.Add(time.Hour), Deadline: table.InStoppedTime}
	inStoppedTime := now.Add(20 * time.Minute) // i-1: idle until now+10m, stopped until now+1h
	for at, ok := range map[time.Time]bool{now: false, inStoppedTime: true} {
		db := newTable(db.Get(protocol.TypeInstance, "i-1"))
		_, err := db.UpdateItem(ctx, table.Alone(start.Update(pool, "i-1", at)))
		if ok && err != nil {
			t.Errorf("taking a runner in its stopped time: %v", err)
		}
		if !ok {
			refused(t, "taking a hot runner as a stopped one", err)
		}
	}
	db = newTable(db.Get(protocol.TypeInstance, "i-1"))
	refused(t, "taking a runner whose stopped time is over", sdkErr(db.UpdateItem(ctx, table.Alone(start.Update(pool, "i-1", now.Add(2*time.Hour))))))
}

// A transition in a transaction: a failed condition cancels it all, with
// the record as it was.
func TestTransition_inTransaction(t *testing.T) {
	heartbeat := table.Transition{FromState: protocol.StateRunning, FromRunID: "run-1", ToState: protocol.StateRunning, ToRunID: "run-1",
		Threshold: now.Add(time.Hour), Deadline: table.DeadlineLive}
	db := newTable(instance("i-1", protocol.StateRunning, "run-1", now.Add(time.Minute)).Item(), instance("i-2", protocol.StateRunning, "run-1", now.Add(-time.Minute)).Item())
	_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: heartbeat.Update(pool, "i-1", now)}, {Update: heartbeat.Update(pool, "i-2", now)},
	}})
	var canceled *types.TransactionCanceledException
	if !errors.As(err, &canceled) || aws.ToString(canceled.CancellationReasons[1].Code) != "ConditionalCheckFailed" ||
		protocol.StringAttr(canceled.CancellationReasons[1].Item, protocol.AttrRunID) != "run-1" {
		t.Fatalf("a transaction with a runner past its deadline: %v, want it cancelled for that runner, with its record", err)
	}
	if got := record(t, db, "i-1"); got.Threshold != protocol.FormatTime(now.Add(time.Minute)) {
		t.Errorf("a cancelled transaction moved i-1's deadline to %s", got.Threshold)
	}
}

// PutNew writes only where nothing is; MarkTerminated ends a record in any
// state, and writes no record where there is none.
func TestPutNewAndMarkTerminated(t *testing.T) {
	db := newTable()
	rec := instance("i-1", protocol.StateCreated, "run-1", now.Add(time.Hour))
	if _, err := db.PutItem(ctx, table.PutNew(pool, rec.Item())); err != nil {
		t.Fatal(err)
	}
	other := rec
	other.RunID = "run-2"
	old := refused(t, "putting over a record", sdkErr(db.PutItem(ctx, table.PutNew(pool, other.Item()))))
	if protocol.StringAttr(old, protocol.AttrRunID) != "run-1" {
		t.Errorf("the refusal carries %v, want the record there", old)
	}
	if _, err := db.UpdateItem(ctx, table.MarkTerminated(pool, "i-1", now)); err != nil {
		t.Fatal(err)
	}
	if got := record(t, db, "i-1"); got.State != protocol.StateTerminated || got.Threshold != protocol.FormatTime(now) {
		t.Errorf("marked record %+v: want terminated now", got)
	}
	refused(t, "marking an instance without a record", sdkErr(db.UpdateItem(ctx, table.MarkTerminated(pool, "i-9", now))))
	if db.Get(protocol.TypeInstance, "i-9") != nil {
		t.Error("MarkTerminated wrote a record for an instance that had none")
	}
}

func sdkErr[T any](_ T, err error) error { return err }
