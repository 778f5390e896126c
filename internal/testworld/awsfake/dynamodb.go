package awsfake

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// ErrTransient is the generic error injected into fake calls.
var ErrTransient = errors.New("injected transient error (throttled)")

type item = map[string]types.AttributeValue

// Call is one recorded call of the fake table.
type Call struct {
	Op string
	In any
}

// Table is one DynamoDB table with the PK/SK key schema, in Account and
// Region (tables.go: its creation, deletion, tags and TTL).
type Table struct {
	name string

	Mu    sync.Mutex
	Items map[string]item // by PK + "|" + SK
	Calls []Call
	// Log, when set, records the table's calls with other fakes'.
	Log *Log
	// Absent: the table does not exist (a test sets it; DeleteTable does):
	// calls naming it fail as DynamoDB fails them, until CreateTable.
	Absent bool
	// ItemsAtDelete are the items the table held when DeleteTable deleted
	// it, for tests' assertions.
	ItemsAtDelete map[string]item
	// Tags are the table's tags.
	Tags map[string]string
	// TTLAttribute is the attribute of the table's TTL ("": TTL is off);
	// ttlUpdated: UpdateTimeToLive changed it, and refuses another change
	// (for the hour DynamoDB's takes).
	TTLAttribute string
	ttlUpdated   bool
	counts       map[string]int
	// failNth fails the n-th call (1-based) of an operation.
	failNth map[string]map[int]error
	// FailIf fails a call when it returns non-nil (checked after failNth).
	FailIf func(op string, in any) error
	// LoseAnswer makes a write that succeeded report ErrTransient when it
	// returns true, as a connection lost before the answer would.
	LoseAnswer func(op string, in any) bool
	// UnprocessedReads: this many BatchGetItem calls leave their last key
	// unprocessed, as a throttled table does.
	UnprocessedReads int
	// UnprocessedWrites: this many BatchWriteItem calls leave their last
	// item unprocessed.
	UnprocessedWrites int
	// AfterInstance hears of every instance record a write changed, once the
	// write is done and the lock released, before the write returns: the
	// agents of simulated instances act on their record then, through the
	// table's API, as the real agent does.
	AfterInstance func(ctx context.Context, old, cur protocol.Instance, existed bool)
	pending       []change // AfterInstance's, of the write under way
	// QueryPage is Query's page size (0: everything in one page).
	QueryPage int
	// BeforeBatchGet runs before every BatchGetItem, without the lock:
	// simulated agents write their heartbeats through the table's API.
	BeforeBatchGet func(ctx context.Context)
}

// NewTable is an empty table named name (the PK/SK key schema).
func NewTable(name string) *Table {
	return &Table{name: name, Items: map[string]item{}, Tags: map[string]string{}, counts: map[string]int{}, failNth: map[string]map[int]error{}}
}

// Fail makes the n-th call of op fail with err.
func (f *Table) Fail(op string, n int, err error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.failNth[op] == nil {
		f.failNth[op] = map[int]error{}
	}
	f.failNth[op][n] = err
}

// enter records a call and returns the injected error, if any. Called with mu held.
func (f *Table) enter(ctx context.Context, op string, table *string, in any) error {
	if err := ctx.Err(); err != nil { // as the SDK: a cancelled call is not sent
		return err
	}
	f.Calls = append(f.Calls, Call{op, in})
	f.Log.record("dynamodb", op, in)
	f.counts[op]++
	if err := f.failNth[op][f.counts[op]]; err != nil {
		return err
	}
	if f.FailIf != nil {
		if err := f.FailIf(op, in); err != nil {
			return err
		}
	}
	if table != nil {
		return f.check(aws.ToString(table))
	}
	return nil
}

// check fails a call naming a table other than this one, or this one while
// it is absent. Called with mu held.
func (f *Table) check(table string) error {
	if table != f.name || f.Absent {
		return &types.ResourceNotFoundException{Message: aws.String("Requested resource not found: Table: " + table + " not found")}
	}
	return nil
}

func keyString(key item) (string, error) {
	if len(key) != 2 {
		return "", fmt.Errorf("fake dynamodb: key must have exactly PK and SK, got %d attributes", len(key))
	}
	pk, ok1 := key["PK"].(*types.AttributeValueMemberS)
	sk, ok2 := key["SK"].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 || pk.Value == "" || sk.Value == "" {
		return "", errors.New("fake dynamodb: key needs non-empty string PK and SK")
	}
	return pk.Value + "|" + sk.Value, nil
}

// CopyItem is a deep copy of an item: the table's items never share a
// set, list or map with what callers hold.
func CopyItem(in item) item {
	if in == nil {
		return nil
	}
	out := make(item, len(in))
	for k, v := range in {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v types.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = copyValue(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: CopyItem(v.Value)}
	}
	return v
}

// exprEnv resolves the names and values of one request (that each is
// defined and used is a rule of internal/awslimits, checked before).
type exprEnv struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func newExprEnv(names map[string]string, values map[string]types.AttributeValue) *exprEnv {
	return &exprEnv{names: names, values: values}
}

func (e *exprEnv) name(tok string) (string, error) {
	if !strings.HasPrefix(tok, "#") {
		return tok, nil
	}
	n, ok := e.names[tok]
	if !ok {
		return "", fmt.Errorf("fake dynamodb: ValidationException: undefined attribute name %s", tok)
	}
	return n, nil
}

func (e *exprEnv) value(tok string) (types.AttributeValue, error) {
	v, ok := e.values[tok]
	if !ok || !strings.HasPrefix(tok, ":") {
		return nil, fmt.Errorf("fake dynamodb: ValidationException: undefined attribute value %s", tok)
	}
	return v, nil
}

// evalCondition evaluates the condition expression expr against cur
// (nil: no item).
func (e *exprEnv) evalCondition(expr string, cur item) (bool, error) {
	c, err := parseCondition(e, expr)
	if err != nil {
		return false, invalid("ConditionExpression", expr, err)
	}
	return c(cur)
}

// applyUpdate applies the update expression expr to cur, reading the
// item as it was before.
func (e *exprEnv) applyUpdate(expr string, cur item) error {
	actions, err := parseUpdate(e, expr)
	if err != nil {
		return invalid("UpdateExpression", expr, err)
	}
	old := CopyItem(cur)
	for _, a := range actions {
		if err := a(old, cur); err != nil {
			return fmt.Errorf("fake dynamodb: ValidationException: %w", err)
		}
	}
	return nil
}

// ConditionFailed is the error of a write whose condition failed.
func ConditionFailed() error {
	return &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
}

// Written notes an instance record a write changed, for AfterInstance.
// Called with mu held.
func (f *Table) Written(old, cur item) {
	if f.AfterInstance == nil || protocol.StringAttr(cur, "PK") != protocol.TypeInstance {
		return
	}
	curInst, err := protocol.InstanceFromItem(cur)
	if err != nil {
		return
	}
	var oldInst protocol.Instance
	if old != nil {
		oldInst, _ = protocol.InstanceFromItem(old)
	}
	f.pending = append(f.pending, change{old: oldInst, cur: curInst, existed: old != nil})
}

// change is an instance record a write changed.
type change struct {
	old, cur protocol.Instance
	existed  bool
}

// takePending hands the changes of the write under way to its caller.
// Called with mu held.
func (f *Table) takePending(changes *[]change) {
	*changes, f.pending = f.pending, nil
}

// dispatch runs AfterInstance for changes, without the lock.
func (f *Table) dispatch(ctx context.Context, changes []change) {
	for _, c := range changes {
		f.AfterInstance(ctx, c.old, c.cur, c.existed)
	}
}

// ItemKey is the fake's key of an item, from its PK and SK.
func ItemKey(it item) string {
	k, err := keyString(item{"PK": it["PK"], "SK": it["SK"]})
	if err != nil {
		panic(err)
	}
	return k
}

func (f *Table) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := limits(ctx, "dynamodb", "GetItem", in, func(ctx context.Context) error { return sdkErr(tableLimits.GetItem(ctx, in)) }); err != nil {
		return nil, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if err := f.enter(ctx, "GetItem", in.TableName, in); err != nil {
		return nil, err
	}
	k, err := keyString(in.Key)
	if err != nil {
		return nil, err
	}
	return &dynamodb.GetItemOutput{Item: CopyItem(f.Items[k])}, nil
}

// write is a checked, not yet committed write: the item at key k goes
// from old to cur.
type write struct {
	k        string
	old, cur item
}

// checkCondition evaluates a write's condition against old; a failure is a
// ConditionalCheckFailedException carrying old when asked for.
func checkCondition(env *exprEnv, cond *string, old item, rv types.ReturnValuesOnConditionCheckFailure) error {
	if cond == nil {
		return nil
	}
	ok, err := env.evalCondition(aws.ToString(cond), old)
	if err != nil || ok {
		return err
	}
	e := ConditionFailed().(*types.ConditionalCheckFailedException)
	if rv == types.ReturnValuesOnConditionCheckFailureAllOld {
		e.Item = CopyItem(old)
	}
	return e
}

// plan checks a write to the item at key without writing it: the
// condition against the current item, then build makes the new item from
// it. Called with mu held.
func (f *Table) plan(key item, cond *string, names map[string]string, values map[string]types.AttributeValue, rv types.ReturnValuesOnConditionCheckFailure,
	build func(env *exprEnv, old item) (item, error)) (write, error) {
	k, err := keyString(key)
	if err != nil {
		return write{}, err
	}
	old := f.Items[k]
	env := newExprEnv(names, values)
	if err := checkCondition(env, cond, old, rv); err != nil {
		return write{}, err
	}
	cur, err := build(env, old)
	if err != nil {
		return write{}, err
	}
	return write{k: k, old: old, cur: cur}, nil
}

// planPut checks a PutItem without writing. Called with mu held.
func (f *Table) planPut(it item, cond *string, names map[string]string, values map[string]types.AttributeValue, rv types.ReturnValuesOnConditionCheckFailure) (write, error) {
	key := item{"PK": it["PK"], "SK": it["SK"]}
	return f.plan(key, cond, names, values, rv, func(*exprEnv, item) (item, error) { return CopyItem(it), nil })
}

// planUpdate checks an UpdateItem without writing. Called with mu held.
func (f *Table) planUpdate(key item, update, cond *string, names map[string]string, values map[string]types.AttributeValue, rv types.ReturnValuesOnConditionCheckFailure) (write, error) {
	return f.plan(key, cond, names, values, rv, func(env *exprEnv, old item) (item, error) {
		cur := CopyItem(old)
		if cur == nil { // UpdateItem creates a missing item
			cur = CopyItem(key)
		}
		return cur, env.applyUpdate(aws.ToString(update), cur)
	})
}

// commit stores a checked write. Called with mu held.
func (f *Table) commit(w write) {
	f.Items[w.k] = w.cur
	f.Written(w.old, w.cur)
}

func (f *Table) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := limits(ctx, "dynamodb", "PutItem", in, func(ctx context.Context) error { return sdkErr(tableLimits.PutItem(ctx, in)) }); err != nil {
		return nil, err
	}
	var changes []change
	out, err := f.putItem(ctx, in, &changes)
	f.dispatch(ctx, changes)
	return out, err
}

func (f *Table) putItem(ctx context.Context, in *dynamodb.PutItemInput, changes *[]change) (*dynamodb.PutItemOutput, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	defer f.takePending(changes)
	if err := f.enter(ctx, "PutItem", in.TableName, in); err != nil {
		return nil, err
	}
	w, err := f.planPut(in.Item, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	f.commit(w)
	return &dynamodb.PutItemOutput{}, f.lost("PutItem", in)
}

func (f *Table) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := limits(ctx, "dynamodb", "UpdateItem", in, func(ctx context.Context) error { return sdkErr(tableLimits.UpdateItem(ctx, in)) }); err != nil {
		return nil, err
	}
	var changes []change
	out, err := f.updateItem(ctx, in, &changes)
	f.dispatch(ctx, changes)
	return out, err
}

func (f *Table) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput, changes *[]change) (*dynamodb.UpdateItemOutput, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	defer f.takePending(changes)
	if err := f.enter(ctx, "UpdateItem", in.TableName, in); err != nil {
		return nil, err
	}
	w, err := f.planUpdate(in.Key, in.UpdateExpression, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	if awslimits.ItemBytes(Wire(w.cur)) > awslimits.MaxItemBytes {
		// The size after the update: DynamoDB's rule, which only the
		// table knows (internal/awslimits' front cannot check it).
		return nil, &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size to update has exceeded the maximum allowed size"}
	}
	f.commit(w)
	return &dynamodb.UpdateItemOutput{}, f.lost("UpdateItem", in)
}

// lost is the error of a write that succeeded. Called with mu held.
func (f *Table) lost(op string, in any) error {
	if f.LoseAnswer != nil && f.LoseAnswer(op, in) {
		return ErrTransient
	}
	return nil
}

// TransactWriteItems checks every Put and Update first and writes all of
// them or none; failed conditions cancel it with a reason per item.
func (f *Table) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if err := limits(ctx, "dynamodb", "TransactWriteItems", in, func(ctx context.Context) error { return sdkErr(tableLimits.TransactWriteItems(ctx, in)) }); err != nil {
		return nil, err
	}
	var changes []change
	out, err := f.transactWriteItems(ctx, in, &changes)
	f.dispatch(ctx, changes)
	return out, err
}

func (f *Table) transactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, changes *[]change) (*dynamodb.TransactWriteItemsOutput, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	defer f.takePending(changes)
	if err := f.enter(ctx, "TransactWriteItems", nil, in); err != nil {
		return nil, err
	}
	var (
		writes   []write
		reasons  = make([]types.CancellationReason, len(in.TransactItems))
		canceled bool
	)
	for i, ti := range in.TransactItems {
		var (
			w     write
			err   error
			table *string
		)
		switch {
		case ti.Put != nil:
			table = ti.Put.TableName
			w, err = f.planPut(ti.Put.Item, ti.Put.ConditionExpression, ti.Put.ExpressionAttributeNames, ti.Put.ExpressionAttributeValues, ti.Put.ReturnValuesOnConditionCheckFailure)
		case ti.Update != nil:
			table = ti.Update.TableName
			w, err = f.planUpdate(ti.Update.Key, ti.Update.UpdateExpression, ti.Update.ConditionExpression, ti.Update.ExpressionAttributeNames, ti.Update.ExpressionAttributeValues, ti.Update.ReturnValuesOnConditionCheckFailure)
		default:
			return nil, errors.New("fake dynamodb: only Put and Update are supported in transactions")
		}
		if err := f.check(aws.ToString(table)); err != nil {
			return nil, err
		}
		var c *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &c):
			canceled = true
			reasons[i] = types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Message: c.Message, Item: c.Item}
		case err != nil:
			return nil, err
		default:
			reasons[i] = types.CancellationReason{Code: aws.String("None")}
			writes = append(writes, w)
		}
	}
	if canceled {
		return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
	}
	for _, w := range writes {
		f.commit(w)
	}
	return &dynamodb.TransactWriteItemsOutput{}, f.lost("TransactWriteItems", in)
}

func (f *Table) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := limits(ctx, "dynamodb", "DeleteItem", in, func(ctx context.Context) error { return sdkErr(tableLimits.DeleteItem(ctx, in)) }); err != nil {
		return nil, err
	}
	var changes []change
	out, err := f.deleteItem(ctx, in, &changes)
	f.dispatch(ctx, changes)
	return out, err
}

func (f *Table) deleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, changes *[]change) (*dynamodb.DeleteItemOutput, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	defer f.takePending(changes)
	if err := f.enter(ctx, "DeleteItem", in.TableName, in); err != nil {
		return nil, err
	}
	w, err := f.plan(in.Key, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure,
		func(*exprEnv, item) (item, error) { return nil, nil })
	if err != nil {
		return nil, err
	}
	delete(f.Items, w.k)
	return &dynamodb.DeleteItemOutput{}, nil
}

func (f *Table) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if err := limits(ctx, "dynamodb", "BatchGetItem", in, func(ctx context.Context) error { return sdkErr(tableLimits.BatchGetItem(ctx, in)) }); err != nil {
		return nil, err
	}
	if f.BeforeBatchGet != nil {
		f.BeforeBatchGet(ctx)
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if err := f.enter(ctx, "BatchGetItem", nil, in); err != nil {
		return nil, err
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for table, ka := range in.RequestItems {
		if err := f.check(table); err != nil {
			return nil, err
		}
		keys := ka.Keys
		if f.UnprocessedReads > 0 {
			f.UnprocessedReads--
			out.UnprocessedKeys = map[string]types.KeysAndAttributes{table: {Keys: keys[len(keys)-1:], ConsistentRead: ka.ConsistentRead}}
			keys = keys[:len(keys)-1]
		}
		for _, key := range keys {
			k, err := keyString(key)
			if err != nil {
				return nil, err
			}
			if it := f.Items[k]; it != nil {
				out.Responses[table] = append(out.Responses[table], CopyItem(it))
			}
		}
	}
	return out, nil
}

// BatchWriteItem supports puts to this table, at most 25 distinct items; a
// call beyond the first unprocessedWrites ones leaves its last item
// unprocessed, as a throttled table does.
func (f *Table) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	if err := limits(ctx, "dynamodb", "BatchWriteItem", in, func(ctx context.Context) error { return sdkErr(tableLimits.BatchWriteItem(ctx, in)) }); err != nil {
		return nil, err
	}
	var changes []change
	out, err := f.batchWriteItem(ctx, in, &changes)
	f.dispatch(ctx, changes)
	return out, err
}

func (f *Table) batchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, changes *[]change) (*dynamodb.BatchWriteItemOutput, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	defer f.takePending(changes)
	if err := f.enter(ctx, "BatchWriteItem", nil, in); err != nil {
		return nil, err
	}
	out := &dynamodb.BatchWriteItemOutput{UnprocessedItems: map[string][]types.WriteRequest{}}
	for table, reqs := range in.RequestItems {
		if err := f.check(table); err != nil {
			return nil, err
		}
		if f.UnprocessedWrites > 0 {
			f.UnprocessedWrites--
			out.UnprocessedItems[table] = reqs[len(reqs)-1:]
			reqs = reqs[:len(reqs)-1]
		}
		for _, r := range reqs {
			if r.PutRequest == nil {
				return nil, errors.New("fake dynamodb: only PutRequest is supported in BatchWriteItem")
			}
			k, err := keyString(item{"PK": r.PutRequest.Item["PK"], "SK": r.PutRequest.Item["SK"]})
			if err != nil {
				return nil, err
			}
			f.Items[k] = CopyItem(r.PutRequest.Item)
		}
	}
	return out, nil
}

// Query evaluates the key condition and the filter against the table's
// items, in sort key order, in pages of QueryPage items from
// ExclusiveStartKey, and projects what it returns.
func (f *Table) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if err := limits(ctx, "dynamodb", "Query", in, func(ctx context.Context) error { return sdkErr(tableLimits.Query(ctx, in)) }); err != nil {
		return nil, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if err := f.enter(ctx, "Query", in.TableName, in); err != nil {
		return nil, err
	}
	env := newExprEnv(in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	key, err := parseCondition(env, aws.ToString(in.KeyConditionExpression))
	if err != nil {
		return nil, invalid("KeyConditionExpression", aws.ToString(in.KeyConditionExpression), err)
	}
	filter := func(item) (bool, error) { return true, nil }
	if in.FilterExpression != nil {
		if filter, err = parseCondition(env, aws.ToString(in.FilterExpression)); err != nil {
			return nil, invalid("FilterExpression", aws.ToString(in.FilterExpression), err)
		}
	}
	var projection []docPath
	if in.ProjectionExpression != nil {
		if projection, err = parseProjection(env, aws.ToString(in.ProjectionExpression)); err != nil {
			return nil, invalid("ProjectionExpression", aws.ToString(in.ProjectionExpression), err)
		}
	}
	var keys []string
	for k, it := range f.Items {
		ok, err := key(it)
		if err != nil {
			return nil, err
		}
		if ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if in.ExclusiveStartKey != nil {
		start, err := keyString(in.ExclusiveStartKey)
		if err != nil {
			return nil, err
		}
		keys = slices.DeleteFunc(keys, func(k string) bool { return k <= start })
	}
	out := &dynamodb.QueryOutput{}
	if f.QueryPage > 0 && len(keys) > f.QueryPage {
		keys = keys[:f.QueryPage]
		last := f.Items[keys[len(keys)-1]]
		out.LastEvaluatedKey = map[string]types.AttributeValue{"PK": last["PK"], "SK": last["SK"]}
	}
	for _, k := range keys { // a filter applies to the page read, as DynamoDB's does
		it := f.Items[k]
		ok, err := filter(it)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if projection != nil {
			it = project(it, projection)
		}
		out.Items = append(out.Items, CopyItem(it))
	}
	out.Count = int32(len(out.Items))
	return out, nil
}

// Put writes an item directly (test setup).
func (f *Table) Put(it item) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Items[ItemKey(it)] = CopyItem(it)
}

// Get reads an item directly (test assertions); nil when absent.
func (f *Table) Get(typ, id string) item {
	return f.GetKey(protocol.Key(typ, id))
}

// GetKey reads the item at key directly; nil when absent.
func (f *Table) GetKey(key item) item {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return CopyItem(f.Items[ItemKey(key)])
}

// Count is how many calls of op the table answered or failed.
func (f *Table) Count(op string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.counts[op]
}

// Wire is an item in DynamoDB's wire form, {"S": "..."}, as
// internal/awslimits reads it.
func Wire(it item) map[string]any {
	out := make(map[string]any, len(it))
	for k, v := range it {
		out[k] = wireValue(v)
	}
	return out
}

func wireValue(v types.AttributeValue) map[string]any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(v.Value)}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": anys(v.Value, func(s string) any { return s })}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": anys(v.Value, func(s string) any { return s })}
	case *types.AttributeValueMemberBS:
		return map[string]any{"BS": anys(v.Value, func(b []byte) any { return base64.StdEncoding.EncodeToString(b) })}
	case *types.AttributeValueMemberL:
		return map[string]any{"L": anys(v.Value, func(e types.AttributeValue) any { return wireValue(e) })}
	case *types.AttributeValueMemberM:
		m := make(map[string]any, len(v.Value))
		for k, e := range v.Value {
			m[k] = wireValue(e)
		}
		return map[string]any{"M": m}
	}
	return nil
}

func anys[T any](in []T, f func(T) any) []any {
	out := make([]any, len(in))
	for i, e := range in {
		out[i] = f(e)
	}
	return out
}
