package faultproxy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

// Conflict answers DynamoDB's writes as AWS does when another transaction
// touches the same items, in the shapes the SDK parses; reads and other
// services are not touched.
func TestConflict(t *testing.T) {
	ctx := context.Background()
	p := startProxy(t, endpoint, 1)
	p.SetRules(faultproxy.Rule{Kind: faultproxy.Conflict, Rate: 1})
	c := newClients(p.URL, 1)
	key := map[string]ddbtypes.AttributeValue{"PK": &ddbtypes.AttributeValueMemberS{Value: "k"}}

	_, err := c.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key,
		UpdateExpression: aws.String("SET a = :a"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":a": &ddbtypes.AttributeValueMemberS{Value: "v"}}})
	var conflict *ddbtypes.TransactionConflictException
	if !errors.As(err, &conflict) {
		t.Errorf("UpdateItem: %v, want a TransactionConflictException", err)
	}

	put := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String("t"), Item: key}}
	_, err = c.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{put, put, put}})
	var canceled *ddbtypes.TransactionCanceledException
	if !errors.As(err, &canceled) || len(canceled.CancellationReasons) != 3 ||
		aws.ToString(canceled.CancellationReasons[0].Code) != "TransactionConflict" || aws.ToString(canceled.CancellationReasons[2].Code) != "None" {
		t.Errorf("TransactWriteItems: %v (reasons %+v), want cancelled for a TransactionConflict", err, canceled)
	}

	if _, err := c.ddb.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("a read got a fault: %v", err)
	}
	if n := p.Stats().TotalFaults(faultproxy.Conflict); n != 2 {
		t.Errorf("%d conflicts injected, want 2 (the writes)", n)
	}
}
