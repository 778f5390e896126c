package faultproxy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

// DynamoDB throttles with two codes, both of which the SDK retries as
// throttling, and cancels a throttled transaction (which it does not
// retry); the proxy answers with both codes, drawn, and cancels.
func TestDynamoDBThrottleCodes(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	table := newTable(t, direct)
	p := startProxy(t, endpoint, 1)
	p.SetRules(faultproxy.Rule{Service: "dynamodb", Kind: faultproxy.Throttle, Rate: 1})
	c := newClients(p.URL, 1)
	throttles := retry.IsErrorThrottles(retry.DefaultThrottles)
	codes := map[string]int{}
	for range 20 {
		err := putItem(ctx, c, table, "k")
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) {
			t.Fatalf("PutItem: %v, want an API error", err)
		}
		codes[apiErr.ErrorCode()]++
		if _, listed := retry.DefaultThrottleErrorCodes[apiErr.ErrorCode()]; !listed || throttles.IsErrorThrottle(err) != aws.TrueTernary {
			t.Errorf("%v: not in retry.DefaultThrottleErrorCodes, the SDK would not retry it as throttling", err)
		}
	}
	if len(codes) != 2 || codes["ProvisionedThroughputExceededException"] == 0 || codes["ThrottlingException"] == 0 {
		t.Errorf("throttle codes %v, want both ProvisionedThroughputExceededException and ThrottlingException", codes)
	}

	put := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(table),
		Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "t"}}}}
	_, err := c.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{put, put}})
	var canceled *ddbtypes.TransactionCanceledException
	if !errors.As(err, &canceled) || len(canceled.CancellationReasons) != 2 ||
		aws.ToString(canceled.CancellationReasons[0].Code) != "ThrottlingError" || aws.ToString(canceled.CancellationReasons[1].Code) != "None" {
		t.Errorf("TransactWriteItems: %v (reasons %+v), want cancelled for a ThrottlingError", err, canceled)
	}

	// The SDK's own retries get through a throttle of either code.
	p.SetRules(faultproxy.Rule{Service: "dynamodb", Action: "PutItem", Kind: faultproxy.Throttle, Rate: 0.5})
	retrying := newClients(p.URL, 10)
	for i := range 10 {
		if err := putItem(ctx, retrying, table, "r"); err != nil {
			t.Fatalf("put %d with retries: %v", i, err)
		}
	}
	if hasItem(t, direct, table, "t") {
		t.Error("the throttled transaction took effect")
	}
}
