package table

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Deadline is what a transition requires of the record's threshold.
type Deadline string

// The deadlines of a transition.
const (
	AnyDeadline    Deadline = ""        // the threshold does not matter
	DeadlineLive   Deadline = "live"    // threshold > now
	DeadlinePassed Deadline = "passed"  // threshold < now
	InStoppedTime  Deadline = "stopped" // a runner in its stopped time: threshold < now < stopUntil
)

// Transition is one row of the pool protocol's state table: a conditional
// write of an instance record from (state, runId) to (state, runId) with a
// new threshold.
type Transition struct {
	FromState, FromRunID string
	ToState, ToRunID     string
	Threshold            time.Time
	// StopUntil, on a transition to idle: the runner's stopped time after
	// Threshold (protocol.AttrStopUntil). Every other transition clears it.
	StopUntil time.Time
	Deadline  Deadline
}

// Update is the conditional write of t on the record of instance id,
// made at now; a failed condition returns the record as it was.
func (t Transition) Update(tableName, id string, now time.Time) *types.Update {
	cond := "#state = :fromState AND #runId = :fromRunId"
	switch t.Deadline {
	case DeadlineLive:
		cond += " AND #threshold > :now"
	case DeadlinePassed:
		cond += " AND #threshold < :now"
	case InStoppedTime:
		cond += " AND #threshold < :now AND #stopUntil > :now"
	}
	expr := "SET #state = :toState, #runId = :toRunId, #threshold = :threshold, #updatedAt = :now"
	names := map[string]string{
		"#state": protocol.AttrState, "#runId": protocol.AttrRunID,
		"#threshold": protocol.AttrThreshold, "#updatedAt": protocol.AttrUpdatedAt,
		"#stopUntil": protocol.AttrStopUntil,
	}
	values := map[string]types.AttributeValue{
		":fromState": str(t.FromState), ":fromRunId": str(t.FromRunID),
		":toState": str(t.ToState), ":toRunId": str(t.ToRunID),
		":threshold": str(protocol.FormatTime(t.Threshold)), ":now": str(protocol.FormatTime(now)),
	}
	if t.ToState == protocol.StateTerminated { // the table forgets it after a while
		expr += ", #expiresAt = :expiresAt"
		names["#expiresAt"] = protocol.AttrExpiresAt
		values[":expiresAt"] = protocol.ExpiresAt(now)
	}
	if t.StopUntil.IsZero() {
		expr += " REMOVE #stopUntil"
	} else {
		expr += ", #stopUntil = :stopUntil"
		values[":stopUntil"] = str(protocol.FormatTime(t.StopUntil))
	}
	return &types.Update{
		TableName:                           aws.String(tableName),
		Key:                                 protocol.Key(protocol.TypeInstance, id),
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// Alone is the UpdateItem call that makes u outside a transaction.
func Alone(u *types.Update) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
		ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: u.ReturnValuesOnConditionCheckFailure,
	}
}

// AppliedTo tells a lost race from our own write whose answer was lost and
// whose retry then failed the condition: old, the record as the failed
// condition returned it, already holds exactly what t writes.
func (t Transition) AppliedTo(old Item) bool {
	stopUntil := ""
	if !t.StopUntil.IsZero() {
		stopUntil = protocol.FormatTime(t.StopUntil)
	}
	return old != nil && protocol.StringAttr(old, protocol.AttrState) == t.ToState &&
		protocol.StringAttr(old, protocol.AttrRunID) == t.ToRunID &&
		protocol.StringAttr(old, protocol.AttrThreshold) == protocol.FormatTime(t.Threshold) &&
		protocol.StringAttr(old, protocol.AttrStopUntil) == stopUntil
}

// PutNew writes item only where no item is; a failed condition returns
// the item that is there.
func PutNew(tableName string, item Item) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                           aws.String(tableName),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// MarkTerminated records that instance id is gone, whatever state it was
// in (force_destroy is an operator's decision, not a protocol transition),
// if it has a record.
func MarkTerminated(tableName, id string, now time.Time) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:           aws.String(tableName),
		Key:                 protocol.Key(protocol.TypeInstance, id),
		UpdateExpression:    aws.String("SET #state = :terminated, #threshold = :now, #updatedAt = :now"),
		ConditionExpression: aws.String("attribute_exists(PK)"),
		ExpressionAttributeNames: map[string]string{
			"#state": protocol.AttrState, "#threshold": protocol.AttrThreshold, "#updatedAt": protocol.AttrUpdatedAt,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":terminated": str(protocol.StateTerminated),
			":now":        str(protocol.FormatTime(now)),
		},
	}
}
