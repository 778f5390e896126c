package table_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// A reap is recorded at most once per interval.
func TestTakeReaperLease(t *testing.T) {
	db := newTable()
	for _, tc := range []struct {
		at    time.Time
		taken bool
	}{{now, true}, {now.Add(4 * time.Minute), false}, {now.Add(6 * time.Minute), true}} {
		_, err := db.UpdateItem(ctx, table.TakeReaperLease(pool, tc.at, 5*time.Minute))
		if tc.taken != (err == nil) {
			t.Errorf("reaper lease at %s: %v, want taken %t", tc.at, err, tc.taken)
		}
	}
}

// The maintenance lease is one owner's until it ends; its owner alone
// gives it back.
func TestMaintenanceLease(t *testing.T) {
	db := newTable()
	if _, err := db.UpdateItem(ctx, table.TakeMaintenanceLease(pool, "a", now, now.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	refused(t, "taking a held lease", sdkErr(db.UpdateItem(ctx, table.TakeMaintenanceLease(pool, "b", now.Add(time.Second), now.Add(time.Minute)))))
	refused(t, "ending another's lease", sdkErr(db.UpdateItem(ctx, table.EndMaintenanceLease(pool, "b", now))))
	if _, err := db.UpdateItem(ctx, table.EndMaintenanceLease(pool, "a", now.Add(2*time.Second))); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateItem(ctx, table.TakeMaintenanceLease(pool, "b", now.Add(3*time.Second), now.Add(time.Minute))); err != nil {
		t.Errorf("taking a lease given back: %v", err)
	}
	lease := db.Get(protocol.TypeLease, protocol.MaintenanceLeaseID)
	if protocol.StringAttr(lease, table.AttrNonce) != "b" {
		t.Errorf("lease %v, want b's", lease)
	}
	if _, err := db.UpdateItem(ctx, table.TakeMaintenanceLease(pool, "c", now.Add(2*time.Minute), now.Add(3*time.Minute))); err != nil {
		t.Errorf("taking a lease that ran out: %v", err)
	}
}

// A tier's slots are written over the value they had, or where there are
// none.
func TestPutSlots(t *testing.T) {
	slots := func(value string) table.Item {
		it := protocol.Key(protocol.TypeLease, "slots-large")
		it[protocol.AttrValue] = &types.AttributeValueMemberS{Value: value}
		return it
	}
	db := newTable()
	if _, err := db.PutItem(ctx, table.PutSlots(pool, slots("1"), "")); err != nil {
		t.Fatal(err)
	}
	refused(t, "writing slots where there are some", sdkErr(db.PutItem(ctx, table.PutSlots(pool, slots("2"), ""))))
	refused(t, "writing slots over another value", sdkErr(db.PutItem(ctx, table.PutSlots(pool, slots("2"), "0"))))
	if _, err := db.PutItem(ctx, table.PutSlots(pool, slots("2"), "1")); err != nil {
		t.Errorf("writing slots over their value: %v", err)
	}
}

// A released claim's marker is revived at most once per attempt, never
// for an earlier one, and not where it is gone.
func TestMarkRevived(t *testing.T) {
	marker := protocol.Key(protocol.TypeReleased, "run-1")
	marker[protocol.AttrValue] = &types.AttributeValueMemberS{Value: "{}"}
	db := newTable(marker)
	for _, tc := range []struct {
		attempt int
		revived bool
	}{{2, true}, {2, false}, {1, false}, {3, true}} {
		_, err := db.UpdateItem(ctx, table.MarkRevived(pool, "run-1", tc.attempt))
		var c *types.ConditionalCheckFailedException
		if tc.revived != (err == nil) || err != nil && !errors.As(err, &c) {
			t.Errorf("reviving for attempt %d: %v, want revived %t", tc.attempt, err, tc.revived)
		}
	}
	refused(t, "reviving a marker that is gone", sdkErr(db.UpdateItem(ctx, table.MarkRevived(pool, "run-2", 1))))
	if db.Get(protocol.TypeReleased, "run-2") != nil {
		t.Error("MarkRevived wrote a marker that was gone")
	}
}
