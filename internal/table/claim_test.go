package table_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// claimRecord is runID's claim record, owned by the attempt with nonce.
func claimRecord(runID, nonce, updatedAt string) table.Item {
	it := protocol.Key(protocol.TypeClaim, runID)
	it[table.AttrNonce] = &types.AttributeValueMemberS{Value: nonce}
	it[protocol.AttrUpdatedAt] = &types.AttributeValueMemberS{Value: updatedAt}
	it[protocol.AttrValue] = &types.AttributeValueMemberS{Value: "{}"}
	return it
}

// conditionFailed tells whether err is a failed condition, alone or in a
// transaction.
func conditionFailed(err error) bool {
	var c *types.ConditionalCheckFailedException
	var tx *types.TransactionCanceledException
	return errors.As(err, &c) || errors.As(err, &tx) && slices.ContainsFunc(tx.CancellationReasons, func(r types.CancellationReason) bool {
		return aws.ToString(r.Code) == "ConditionalCheckFailed"
	})
}

func owned(db interface {
	Get(typ, id string) table.Item
}, runID string) []string {
	set, _ := db.Get(protocol.TypeClaim, runID)[table.AttrInstanceIDs].(*types.AttributeValueMemberSS)
	if set == nil {
		return nil
	}
	return slices.Sorted(slices.Values(set.Value))
}

// Every write of an attempt to its claim record holds only while the
// record is the attempt's: a stalled attempt cannot change its
// successor's.
func TestClaimRecord_ownedByItsAttempt(t *testing.T) {
	at := protocol.FormatTime(now)
	db := newTable(claimRecord("run-1", "n-1", at))
	for name, write := range map[string]func(nonce string) error{
		"AddOwned": func(nonce string) error {
			return sdkErr(db.UpdateItem(ctx, table.AddOwned(pool, "run-1", nonce, []string{"i-1", "i-2"})))
		},
		"DropOwned": func(nonce string) error {
			return sdkErr(db.UpdateItem(ctx, table.DropOwned(pool, "run-1", nonce, []string{"i-2"})))
		},
		"TouchRecord": func(nonce string) error {
			return sdkErr(db.UpdateItem(ctx, table.TouchRecord(pool, "run-1", nonce, at)))
		},
		"ReplaceRecord": func(nonce string) error {
			return sdkErr(db.PutItem(ctx, table.ReplaceRecord(pool, claimRecord("run-1", nonce, at), nonce, "")))
		},
		"PutRecord": func(nonce string) error {
			return sdkErr(db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: table.PutRecord(pool, claimRecord("run-1", nonce, at), nonce)},
			}}))
		},
	} {
		if err := write("n-0"); !conditionFailed(err) {
			t.Errorf("%s by another attempt: %v, want its condition to fail", name, err)
		}
		if err := write("n-1"); err != nil {
			t.Errorf("%s by the record's attempt: %v", name, err)
		}
	}
	refused(t, "DeleteRecord by another attempt", sdkErr(db.DeleteItem(ctx, table.DeleteRecord(pool, "run-1", "n-0"))))
	if _, err := db.DeleteItem(ctx, table.DeleteRecord(pool, "run-1", "n-1")); err != nil || db.Get(protocol.TypeClaim, "run-1") != nil {
		t.Errorf("DeleteRecord by the record's attempt: %v", err)
	}
}

// The record's set of instances grows and shrinks; a replacement holds
// only over the record as it was refreshed.
func TestClaimRecord_instancesAndRefresh(t *testing.T) {
	db := newTable(claimRecord("run-1", "n-1", protocol.FormatTime(now)))
	for _, ids := range [][]string{{"i-1", "i-2"}, {"i-2", "i-3"}} {
		if _, err := db.UpdateItem(ctx, table.AddOwned(pool, "run-1", "n-1", ids)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.UpdateItem(ctx, table.DropOwned(pool, "run-1", "n-1", []string{"i-1"})); err != nil {
		t.Fatal(err)
	}
	if got := owned(db, "run-1"); !slices.Equal(got, []string{"i-2", "i-3"}) {
		t.Errorf("instances %q, want i-2 and i-3", got)
	}

	refreshed := protocol.FormatTime(now.Add(time.Minute))
	if _, err := db.UpdateItem(ctx, table.TouchRecord(pool, "run-1", "n-1", refreshed)); err != nil {
		t.Fatal(err)
	}
	stale := table.ReplaceRecord(pool, claimRecord("run-1", "n-1", refreshed), "n-1", protocol.FormatTime(now))
	refused(t, "replacing a record refreshed since", sdkErr(db.PutItem(ctx, stale)))
	if _, err := db.PutItem(ctx, table.ReplaceRecord(pool, claimRecord("run-1", "n-1", refreshed), "n-1", refreshed)); err != nil {
		t.Errorf("replacing the record as refreshed: %v", err)
	}
}
