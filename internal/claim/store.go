package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// errConditionFailed means a conditional write found the record not as
// expected: someone else owns the instance. It is never retried blindly.
var errConditionFailed = errors.New("instance record changed: owned by someone else, or its deadline passed")

// store reads and writes one pool's table.
type store struct {
	db    DynamoDBClient
	table string
	now   func() time.Time
	log   func(msg string, keyvals ...any)
}

// transition is one row of PROTOCOL.md's state table: a conditional write
// from (state, runId) to (state, runId) with a new threshold.
type transition struct {
	fromState, fromRunID string
	toState, toRunID     string
	threshold            time.Time
	// deadline: "live" requires threshold > now, "passed" threshold < now, "" neither.
	deadline string
}

func (s *store) apply(ctx context.Context, id string, t transition) error {
	now := protocol.FormatTime(s.now())
	cond := "#state = :fromState AND #runId = :fromRunId"
	switch t.deadline {
	case "live":
		cond += " AND #threshold > :now"
	case "passed":
		cond += " AND #threshold < :now"
	}
	update := "SET #state = :toState, #runId = :toRunId, #threshold = :threshold, #updatedAt = :now"
	names := map[string]string{
		"#state": protocol.AttrState, "#runId": protocol.AttrRunID,
		"#threshold": protocol.AttrThreshold, "#updatedAt": protocol.AttrUpdatedAt,
	}
	values := map[string]types.AttributeValue{
		":fromState": str(t.fromState), ":fromRunId": str(t.fromRunID),
		":toState": str(t.toState), ":toRunId": str(t.toRunID),
		":threshold": str(protocol.FormatTime(t.threshold)), ":now": str(now),
	}
	if t.toState == protocol.StateTerminated { // the table forgets it after a while
		update += ", #expiresAt = :expiresAt"
		names["#expiresAt"] = protocol.AttrExpiresAt
		values[":expiresAt"] = protocol.ExpiresAt(s.now())
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 protocol.Key(protocol.TypeInstance, id),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if alreadyApplied(ccf.Item, t) {
			return nil
		}
		return fmt.Errorf("%s -> %s: %w", t.fromState, t.toState, errConditionFailed)
	}
	if err != nil {
		return fmt.Errorf("%s -> %s: %w", t.fromState, t.toState, err)
	}
	return nil
}

// alreadyApplied tells a lost race from our own write whose response was
// lost and whose retry then failed the condition: the record already holds
// exactly what the transition writes.
func alreadyApplied(old map[string]types.AttributeValue, t transition) bool {
	return old != nil && protocol.StringAttr(old, protocol.AttrState) == t.toState &&
		protocol.StringAttr(old, protocol.AttrRunID) == t.toRunID &&
		protocol.StringAttr(old, protocol.AttrThreshold) == protocol.FormatTime(t.threshold)
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// putCreated records a freshly launched instance; the item must not exist.
func (s *store) putCreated(ctx context.Context, inst protocol.Instance) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                inst.Item(),
		ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && ccf.Item != nil && protocol.StringAttr(ccf.Item, protocol.AttrState) == inst.State &&
		protocol.StringAttr(ccf.Item, protocol.AttrRunID) == inst.RunID {
		return nil // our own write, its response lost and retried
	}
	if err != nil {
		return fmt.Errorf("recording created instance %s: %w", inst.ID, err)
	}
	return nil
}

// instance reads one instance record; ok is false when there is none.
func (s *store) instance(ctx context.Context, id string) (protocol.Instance, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: protocol.Key(protocol.TypeInstance, id), ConsistentRead: aws.Bool(true),
	})
	if err != nil || out.Item == nil {
		return protocol.Instance{}, false, err
	}
	inst, err := protocol.InstanceFromItem(out.Item)
	return inst, err == nil, err
}

// instances reads many instance records in batches; missing ones are absent.
func (s *store) instances(ctx context.Context, ids []string) (map[string]protocol.Instance, error) {
	out := map[string]protocol.Instance{}
	items, err := s.batchGet(ctx, protocol.TypeInstance, ids)
	if err != nil {
		return nil, err
	}
	for _, item := range items {
		inst, err := protocol.InstanceFromItem(item)
		if err != nil {
			// Treated as missing: the others are settled, this one is
			// left to the reaper once its threshold passes.
			s.log("skipping a corrupt instance record", "item", protocol.StringAttr(item, protocol.AttrSK), "error", err.Error())
			continue
		}
		out[inst.ID] = inst
	}
	return out, nil
}

// batchGet reads the items of one type for ids, following unprocessed keys.
func (s *store) batchGet(ctx context.Context, typ string, ids []string) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	for start := 0; start < len(ids); start += 100 { // BatchGetItem's limit
		keys := make([]map[string]types.AttributeValue, 0, 100)
		for _, id := range ids[start:min(start+100, len(ids))] {
			keys = append(keys, protocol.Key(typ, id))
		}
		got, err := s.batchGetKeys(ctx, keys)
		if err != nil {
			return nil, err
		}
		items = append(items, got...)
	}
	return items, nil
}

func (s *store) batchGetKeys(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for len(req) > 0 && len(req[s.table].Keys) > 0 {
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("reading table %s: %w", s.table, err)
		}
		items = append(items, out.Responses[s.table]...)
		req = out.UnprocessedKeys
	}
	return items, nil
}

// agentState is what an agent has published about itself.
type agentState struct {
	heartbeat time.Time // zero when none
	signal    protocol.Signal
}

// agent reads the heartbeat and the latest worker signal of an instance in
// one round trip.
func (s *store) agent(ctx context.Context, id string) (agentState, error) {
	items, err := s.batchGetKeys(ctx, []map[string]types.AttributeValue{
		protocol.Key(protocol.TypeHeartbeat, id), protocol.Key(protocol.TypeSignal, id),
	})
	if err != nil {
		return agentState{}, err
	}
	var st agentState
	for _, item := range items {
		switch protocol.StringAttr(item, protocol.AttrPK) {
		case protocol.TypeHeartbeat:
			st.heartbeat, _ = protocol.ParseTime(protocol.StringAttr(item, protocol.AttrUpdatedAt)) // unparsable: no heartbeat
		case protocol.TypeSignal:
			st.signal, _ = protocol.SignalFromItem(item)
		}
	}
	return st, nil
}
