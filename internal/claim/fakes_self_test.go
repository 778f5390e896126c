package claim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// The fake table must reject what DynamoDB rejects, or the claim tests
// would pass against a table that always says yes.
func TestFakeTableEvaluatesConditions(t *testing.T) {
	db := newFakeTable("pool")
	st := &store{db: db, table: "pool", now: time.Now, log: func(string, ...any) {}}
	ctx := context.Background()
	inst := protocol.Instance{ID: "i-1", State: protocol.StateIdle, Threshold: protocol.FormatTime(time.Now().Add(time.Minute))}
	db.Put(inst.Item())

	claim := table.Transition{FromState: protocol.StateIdle, ToState: protocol.StateClaimed, ToRunID: "r", Threshold: time.Now().Add(time.Minute), Deadline: table.DeadlineLive}
	if err := st.apply(ctx, "i-1", claim); err != nil {
		t.Fatal(err)
	}
	other := claim
	other.ToRunID = "r2"
	if err := st.apply(ctx, "i-1", other); !errors.Is(err, ErrRecordChanged) {
		t.Errorf("second claim: %v, want the condition to fail", err)
	}
	// A retry of a write that went through (its response lost) is no lost race.
	if err := st.apply(ctx, "i-1", claim); err != nil {
		t.Errorf("retried claim: %v, want it recognised as already applied", err)
	}
	if err := st.apply(ctx, "i-missing", claim); !errors.Is(err, ErrRecordChanged) {
		t.Errorf("claim of a missing record: %v, want the condition to fail", err)
	}
	if db.Get(protocol.TypeInstance, "i-missing") != nil {
		t.Error("a failed conditional update created an item")
	}
	// The reaper's condition: threshold < now.
	reap := table.Transition{FromState: protocol.StateClaimed, FromRunID: "r", ToState: protocol.StateTerminated, ToRunID: "r", Threshold: time.Now(), Deadline: table.DeadlinePassed}
	if err := st.apply(ctx, "i-1", reap); !errors.Is(err, ErrRecordChanged) {
		t.Errorf("reaping a live claim: %v, want the condition to fail", err)
	}
	if err := st.putCreated(ctx, protocol.Instance{ID: "i-1", State: protocol.StateCreated}); err == nil {
		t.Error("putCreated over an existing record succeeded")
	}

	for name, in := range map[string]*dynamodb.UpdateItemInput{
		"condition not parsed": {TableName: aws.String("pool"), Key: protocol.Key(protocol.TypeInstance, "i-1"),
			UpdateExpression: aws.String("ADD #ids :ids"), ConditionExpression: aws.String("attribute_exists(PK) AND"),
			ExpressionAttributeNames: map[string]string{"#ids": "x"}, ExpressionAttributeValues: map[string]types.AttributeValue{":ids": &types.AttributeValueMemberSS{Value: []string{"a"}}}},
		"update of a key": {TableName: aws.String("pool"), Key: protocol.Key(protocol.TypeInstance, "i-1"), UpdateExpression: aws.String("REMOVE #ids"),
			ExpressionAttributeNames: map[string]string{"#ids": "SK"}},
		"unused value": {TableName: aws.String("pool"), Key: protocol.Key(protocol.TypeClaim, "r"), UpdateExpression: aws.String("ADD #ids :ids"),
			ExpressionAttributeNames: map[string]string{"#ids": "x"}, ExpressionAttributeValues: map[string]types.AttributeValue{":ids": &types.AttributeValueMemberSS{Value: []string{"a"}}, ":extra": str("b")}},
		"other table": {TableName: aws.String("other"), Key: protocol.Key(protocol.TypeClaim, "r"), UpdateExpression: aws.String("ADD #ids :ids"),
			ExpressionAttributeNames: map[string]string{"#ids": "x"}, ExpressionAttributeValues: map[string]types.AttributeValue{":ids": &types.AttributeValueMemberSS{Value: []string{"a"}}}},
	} {
		var ccfErr *types.ConditionalCheckFailedException
		if _, err := db.UpdateItem(ctx, in); err == nil || errors.As(err, &ccfErr) {
			t.Errorf("%s: %v, want a hard error", name, err)
		}
	}

	// ADD grows a string set; its owner's condition keeps it from
	// recreating a deleted record.
	if err := st.addOwned(ctx, "r", "n1", "i-1"); !errors.Is(err, errLeaseLost) {
		t.Errorf("ADD to a missing record: %v, want errLeaseLost", err)
	}
	record := protocol.Key(protocol.TypeClaim, "r")
	record[table.AttrNonce] = str("n1")
	db.Put(record)
	if err := st.addOwned(ctx, "r", "n1", "i-1", "i-2"); err != nil {
		t.Fatal(err)
	}
	if err := st.addOwned(ctx, "r", "n1", "i-2", "i-3"); err != nil {
		t.Fatal(err)
	}
	if got := render(db.Get(protocol.TypeClaim, "r")); !strings.Contains(got, `instanceIds=SS:["i-1" "i-2" "i-3"]`) {
		t.Errorf("claim item %s", got)
	}
	if err := st.dropOwned(ctx, "r", "n2", "i-1"); !errors.Is(err, errLeaseLost) {
		t.Errorf("DELETE by another attempt: %v, want errLeaseLost", err)
	}
	if err := st.deleteRecord(ctx, "r", "n2"); err != nil || db.Get(protocol.TypeClaim, "r") == nil {
		t.Errorf("another attempt's delete: %v, and the record is gone", err)
	}

	db.Fail("GetItem", 1, errTransient)
	if _, _, err := st.instance(ctx, "i-1"); !errors.Is(err, errTransient) {
		t.Errorf("injected error: %v", err)
	}
	if _, ok, err := st.instance(ctx, "i-1"); !ok || err != nil {
		t.Errorf("second GetItem: %v %v", ok, err)
	}
}
