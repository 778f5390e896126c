package table

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Attributes of the lease and marker items.
const (
	// AttrHeldUntil is when the maintenance lease is free again.
	AttrHeldUntil = "heldUntil"
	// AttrRevivedFor is the attempt the maintenance revived a released
	// claim's marker for (a number): at most once per attempt, so a
	// revival that failed is not tried again and again for the same
	// re-run.
	AttrRevivedFor = "revivedFor"
)

// TakeReaperLease records a reap at now, unless one ran after
// now - interval.
func TakeReaperLease(tableName string, now time.Time, interval time.Duration) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String(tableName),
		Key:                       protocol.Key(protocol.TypeLease, protocol.ReaperLeaseID),
		UpdateExpression:          aws.String("SET #updatedAt = :now"),
		ConditionExpression:       aws.String("attribute_not_exists(PK) OR #updatedAt < :cutoff"),
		ExpressionAttributeNames:  map[string]string{"#updatedAt": protocol.AttrUpdatedAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": str(protocol.FormatTime(now)), ":cutoff": str(protocol.FormatTime(now.Add(-interval)))},
	}
}

// TakeMaintenanceLease takes the pool's maintenance lease for owner until
// heldUntil, unless another holds it at now.
func TakeMaintenanceLease(tableName, owner string, now, heldUntil time.Time) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:           aws.String(tableName),
		Key:                 protocol.Key(protocol.TypeLease, protocol.MaintenanceLeaseID),
		UpdateExpression:    aws.String("SET #updatedAt = :now, #heldUntil = :heldUntil, #nonce = :nonce"),
		ConditionExpression: aws.String("attribute_not_exists(PK) OR #heldUntil < :now"),
		ExpressionAttributeNames: map[string]string{
			"#updatedAt": protocol.AttrUpdatedAt, "#heldUntil": AttrHeldUntil, "#nonce": AttrNonce,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": str(protocol.FormatTime(now)), ":heldUntil": str(protocol.FormatTime(heldUntil)), ":nonce": str(owner),
		},
	}
}

// EndMaintenanceLease gives owner's maintenance lease back, to be taken
// again from freeAt on; a lease another took meanwhile stays theirs.
func EndMaintenanceLease(tableName, owner string, freeAt time.Time) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String(tableName),
		Key:                       protocol.Key(protocol.TypeLease, protocol.MaintenanceLeaseID),
		UpdateExpression:          aws.String("SET #heldUntil = :heldUntil"),
		ConditionExpression:       aws.String("#nonce = :nonce"),
		ExpressionAttributeNames:  map[string]string{"#heldUntil": AttrHeldUntil, "#nonce": AttrNonce},
		ExpressionAttributeValues: map[string]types.AttributeValue{":heldUntil": str(protocol.FormatTime(freeAt)), ":nonce": str(owner)},
	}
}

// PutSlots writes a tier's slots item over the one whose value was prev
// ("": where there is none).
func PutSlots(tableName string, item Item, prev string) *dynamodb.PutItemInput {
	if prev == "" {
		return PutNew(tableName, item)
	}
	return &dynamodb.PutItemInput{TableName: aws.String(tableName), Item: item,
		ConditionExpression:       aws.String("#value = :prev"),
		ExpressionAttributeNames:  map[string]string{"#value": protocol.AttrValue},
		ExpressionAttributeValues: map[string]types.AttributeValue{":prev": str(prev)},
	}
}

// MarkRevived records that the marker of runID's released claim is
// revived for attempt, unless it was revived for it (or a later one)
// already. (AND binds before OR: a marker gone, its TTL passed, is not
// written again.)
func MarkRevived(tableName, runID string, attempt int) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(tableName), Key: protocol.Key(protocol.TypeReleased, runID),
		UpdateExpression:          aws.String("SET #revived = :attempt"),
		ConditionExpression:       aws.String("attribute_exists(#value) AND attribute_not_exists(#revived) OR #revived < :attempt"),
		ExpressionAttributeNames:  map[string]string{"#value": protocol.AttrValue, "#revived": AttrRevivedFor},
		ExpressionAttributeValues: map[string]types.AttributeValue{":attempt": &types.AttributeValueMemberN{Value: strconv.Itoa(attempt)}},
	}
}
