package table

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Attributes of the claim record beside its document (protocol.AttrValue).
const (
	// AttrNonce identifies the attempt that owns a pending record, and
	// the owner of the maintenance lease.
	AttrNonce = "nonce"
	// AttrInstanceIDs is the string set of every instance a claim has
	// taken or launched so far, grown as it goes, so a crashed apply can
	// be cleaned up.
	AttrInstanceIDs = "instanceIds"
)

// condition is a condition expression with the names and values it uses.
type condition struct {
	text   string
	names  map[string]string
	values map[string]types.AttributeValue
}

// ownedBy is the condition that the record still belongs to the attempt
// with nonce: every write of an attempt to its record carries it, so a
// stalled attempt cannot change, recreate or delete its successor's record.
func ownedBy(nonce string) condition {
	return condition{"#nonce = :nonce", map[string]string{"#nonce": AttrNonce}, map[string]types.AttributeValue{":nonce": str(nonce)}}
}

// PutRecord writes the claim record item over the record of the attempt
// with nonce, for a transaction.
func PutRecord(tableName string, item Item, nonce string) *types.Put {
	c := ownedBy(nonce)
	return &types.Put{TableName: aws.String(tableName), Item: item,
		ConditionExpression: aws.String(c.text), ExpressionAttributeNames: c.names, ExpressionAttributeValues: c.values}
}

// ReplaceRecord writes the claim record item over the record of the
// attempt with nonce, as it stood when refreshed at updatedAt ("":
// whenever).
func ReplaceRecord(tableName string, item Item, nonce, updatedAt string) *dynamodb.PutItemInput {
	c := ownedBy(nonce)
	if updatedAt != "" {
		c.text += " AND #updatedAt = :updatedAt"
		c.names["#updatedAt"] = protocol.AttrUpdatedAt
		c.values[":updatedAt"] = str(updatedAt)
	}
	return &dynamodb.PutItemInput{TableName: aws.String(tableName), Item: item,
		ConditionExpression: aws.String(c.text), ExpressionAttributeNames: c.names, ExpressionAttributeValues: c.values}
}

// AddOwned grows the set of instances of runID's record, which the attempt
// with nonce owns, by ids.
func AddOwned(tableName, runID, nonce string, ids []string) *dynamodb.UpdateItemInput {
	return changeOwned(tableName, runID, nonce, "ADD", ids)
}

// DropOwned removes ids from the set of instances of runID's record, which
// the attempt with nonce owns.
func DropOwned(tableName, runID, nonce string, ids []string) *dynamodb.UpdateItemInput {
	return changeOwned(tableName, runID, nonce, "DELETE", ids)
}

func changeOwned(tableName, runID, nonce, action string, ids []string) *dynamodb.UpdateItemInput {
	c := ownedBy(nonce)
	c.names["#ids"] = AttrInstanceIDs
	c.values[":ids"] = &types.AttributeValueMemberSS{Value: ids}
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(tableName), Key: protocol.Key(protocol.TypeClaim, runID),
		UpdateExpression:    aws.String(action + " #ids :ids"),
		ConditionExpression: aws.String(c.text), ExpressionAttributeNames: c.names, ExpressionAttributeValues: c.values,
	}
}

// TouchRecord refreshes the updatedAt of runID's record, which the attempt
// with nonce owns, to now.
func TouchRecord(tableName, runID, nonce, now string) *dynamodb.UpdateItemInput {
	c := ownedBy(nonce)
	c.names["#updatedAt"] = protocol.AttrUpdatedAt
	c.values[":now"] = str(now)
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(tableName), Key: protocol.Key(protocol.TypeClaim, runID),
		UpdateExpression:    aws.String("SET #updatedAt = :now"),
		ConditionExpression: aws.String(c.text), ExpressionAttributeNames: c.names, ExpressionAttributeValues: c.values,
	}
}

// DeleteRecord deletes runID's record if the attempt with nonce owns it.
func DeleteRecord(tableName, runID, nonce string) *dynamodb.DeleteItemInput {
	c := ownedBy(nonce)
	return &dynamodb.DeleteItemInput{
		TableName: aws.String(tableName), Key: protocol.Key(protocol.TypeClaim, runID),
		ConditionExpression: aws.String(c.text), ExpressionAttributeNames: c.names, ExpressionAttributeValues: c.values,
	}
}
