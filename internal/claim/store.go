package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// ErrRecordChanged means a conditional write found the record not as
// expected: someone else owns the instance. It is never retried blindly.
var ErrRecordChanged = errors.New("instance record changed: owned by someone else, or its deadline passed")

// store reads and writes one pool's table.
type store struct {
	db    DynamoDBClient
	table string
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error // nil: a timer
	log   func(msg string, keyvals ...any)
}

// pause waits d on the store's clock.
func (s *store) pause(ctx context.Context, d time.Duration) error {
	return sleepOn(s.sleep, ctx, d)
}

// update is the conditional write of t on the record of id.
func (s *store) update(id string, t table.Transition) *types.Update {
	return t.Update(s.table, id, s.now())
}

func (s *store) apply(ctx context.Context, id string, t table.Transition) error {
	_, err := s.db.UpdateItem(ctx, table.Alone(s.update(id, t)))
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if t.AppliedTo(ccf.Item) {
			return nil
		}
		return fmt.Errorf("%s -> %s: %w", t.FromState, t.ToState, ErrRecordChanged)
	}
	if err != nil {
		return fmt.Errorf("%s -> %s: %w", t.FromState, t.ToState, err)
	}
	return nil
}

// transactionLimit is the most writes per TransactWriteItems that every
// emulator takes: DynamoDB takes awslimits.MaxTransactItems (100) since
// 2022, DynamoDB Local and the emulators built on it took 25 for longer.
// The claim's writes are small (a few hundred bytes each), far from
// awslimits.MaxTransactBytes.
const transactionLimit = 25

// transact makes writes all or none. A transaction that failed changed
// nothing, unless its answer was lost.
func (s *store) transact(ctx context.Context, writes []types.TransactWriteItem) error {
	if _, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: writes}); err != nil {
		return fmt.Errorf("transaction of %d writes on table %s: %w", len(writes), s.table, err)
	}
	return nil
}

// applyEach makes the transition of each id, with an outcome each as apply
// gives, in transactions of up to transactionLimit writes: one call for up
// to 25 runners when all goes well (a lone write goes alone). A transaction cancelled by failed
// conditions is made again without those writes; writes it says nothing
// certain about, and those of a transaction that failed otherwise (its
// answer may have been lost), are made one at a time.
func (s *store) applyEach(ctx context.Context, ids []string, t func(id string) table.Transition) []error {
	errs := make([]error, len(ids))
	var alone []int
	for start := 0; start < len(ids); start += transactionLimit {
		pending := make([]int, 0, transactionLimit)
		for i := start; i < min(start+transactionLimit, len(ids)); i++ {
			pending = append(pending, i)
		}
		for len(pending) > 0 {
			if len(pending) == 1 { // a transaction buys nothing here, and costs twice
				alone = append(alone, pending...)
				break
			}
			writes := make([]types.TransactWriteItem, len(pending))
			for k, i := range pending {
				writes[k] = types.TransactWriteItem{Update: s.update(ids[i], t(ids[i]))}
			}
			err := s.transact(ctx, writes)
			var canceled *types.TransactionCanceledException
			if err == nil {
				break
			}
			if !errors.As(err, &canceled) || len(canceled.CancellationReasons) != len(pending) {
				s.log("transaction failed, writing one at a time", "writes", len(pending), "error", err.Error())
				alone = append(alone, pending...)
				break
			}
			var again []int
			for k, r := range canceled.CancellationReasons {
				i := pending[k]
				switch aws.ToString(r.Code) {
				case "None": // cancelled because of the others
					again = append(again, i)
				case "ConditionalCheckFailed":
					if tr := t(ids[i]); !tr.AppliedTo(r.Item) {
						errs[i] = fmt.Errorf("%s -> %s: %w", tr.FromState, tr.ToState, ErrRecordChanged)
					}
				default: // a conflicting write under way, throttling, ...
					alone = append(alone, i)
				}
			}
			pending = again
		}
	}
	parallel(len(alone), func(k int) {
		i := alone[k]
		errs[i] = s.apply(ctx, ids[i], t(ids[i]))
	})
	return errs
}

// parallel runs f(0) ... f(n-1) concurrently and waits for all.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// putCreated records a freshly launched instance; the item must not exist.
func (s *store) putCreated(ctx context.Context, inst protocol.Instance) error {
	_, err := s.db.PutItem(ctx, table.PutNew(s.table, inst.Item()))
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
// An id named twice is read once: BatchGetItem refuses a key twice
// (ValidationException), and callers list ids from where a runner can
// appear twice (a tier's slots keep a stale entry of a runner that holds
// another one).
func (s *store) batchGet(ctx context.Context, typ string, ids []string) ([]map[string]types.AttributeValue, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	var items []map[string]types.AttributeValue
	for start := 0; start < len(ids); start += awslimits.MaxBatchGetKeys {
		keys := make([]map[string]types.AttributeValue, 0, awslimits.MaxBatchGetKeys)
		for _, id := range ids[start:min(start+awslimits.MaxBatchGetKeys, len(ids))] {
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
	err := s.untilProcessed(ctx, "reads", len(keys), func() (int, error) {
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return 0, fmt.Errorf("reading table %s: %w", s.table, err)
		}
		items = append(items, out.Responses[s.table]...)
		req = out.UnprocessedKeys
		return len(req[s.table].Keys), nil
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// agentState is what an agent has published about itself.
type agentState struct {
	heartbeat     time.Time // zero when none
	runnerVersion string    // the runner it registers with, as its heartbeat says ("": not told)
	signal        protocol.Signal
}

// agents reads the heartbeats and latest worker signals of ids from their
// agent partitions (arnPrefix: the pool config's), 50 instances per
// BatchGetItem. An instance that published nothing, or nothing readable,
// gets the zero agentState.
func (s *store) agents(ctx context.Context, arnPrefix string, ids []string) (map[string]agentState, error) {
	states := make(map[string]agentState, len(ids))
	for chunk := range slices.Chunk(ids, awslimits.MaxBatchGetKeys/2) { // two keys each
		byARN := make(map[string]string, len(chunk))
		keys := make([]map[string]types.AttributeValue, 0, 2*len(chunk))
		for _, id := range chunk {
			arn := protocol.InstanceARN(arnPrefix, id)
			byARN[arn] = id
			keys = append(keys, protocol.AgentKey(arn, protocol.SortKeyHeartbeat), protocol.AgentKey(arn, protocol.SortKeySignal))
		}
		items, err := s.batchGetKeys(ctx, keys)
		if err != nil {
			return nil, err
		}
		update := func(arn string, set func(*agentState)) {
			st := states[byARN[arn]]
			set(&st)
			states[byARN[arn]] = st
		}
		for _, item := range items {
			if arn, at, ok := protocol.HeartbeatFromItem(item); ok {
				update(arn, func(st *agentState) { st.heartbeat, st.runnerVersion = at, protocol.HeartbeatRunnerVersion(item) })
			} else if sig, ok := protocol.SignalFromItem(item); ok {
				update(sig.InstanceARN, func(st *agentState) { st.signal = sig })
			}
		}
	}
	return states, nil
}
