package claim

// Hand-written fakes of the AWS clients a claim uses. They are small but
// real: the table evaluates the exact condition and update expressions the
// store sends (and rejects any other), the queue honours visibility,
// MaxNumberOfMessages and DelaySeconds against its own clock, and EC2 filters
// instance types. Each can be told to fail a given call.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// errTransient is the generic error injected into fake calls.
var errTransient = errors.New("injected transient error (throttled)")

// ---------------------------------------------------------------- DynamoDB

type item = map[string]types.AttributeValue

// ddbCall is one recorded call of the fake table.
type ddbCall struct {
	op string
	in any
}

// fakeTable is one DynamoDB table with the PK/SK key schema.
type fakeTable struct {
	name string

	mu     sync.Mutex
	items  map[string]item // by PK + "|" + SK
	calls  []ddbCall
	counts map[string]int
	// failNth fails the n-th call (1-based) of an operation.
	failNth map[string]map[int]error
	// failIf fails a call when it returns non-nil (checked after failNth).
	failIf func(op string, in any) error
	// loseAnswer makes a write that succeeded report errTransient when it
	// returns true, as a connection lost before the answer would.
	loseAnswer func(op string, in any) bool
	// unprocessedReads: this many BatchGetItem calls leave their last key
	// unprocessed, as a throttled table does.
	unprocessedReads int
	// unprocessedWrites: this many BatchWriteItem calls leave their last
	// item unprocessed.
	unprocessedWrites int
	// onInstance reacts to a changed instance record (the fake agents);
	// the items it returns are written at once, under the same lock.
	onInstance func(old, cur protocol.Instance, existed bool) []item
	// queryPage is Query's page size (0: everything in one page).
	queryPage int
	// beforeBatchGet runs before every BatchGetItem, under the lock; the
	// items it returns are written first (the agents' heartbeat loops).
	beforeBatchGet func() []item
}

func newFakeTable(name string) *fakeTable {
	return &fakeTable{name: name, items: map[string]item{}, counts: map[string]int{}, failNth: map[string]map[int]error{}}
}

// fail makes the n-th call of op fail with err.
func (f *fakeTable) fail(op string, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNth[op] == nil {
		f.failNth[op] = map[int]error{}
	}
	f.failNth[op][n] = err
}

// enter records a call and returns the injected error, if any. Called with mu held.
func (f *fakeTable) enter(ctx context.Context, op string, table *string, in any) error {
	if err := ctx.Err(); err != nil { // as the SDK: a cancelled call is not sent
		return err
	}
	f.calls = append(f.calls, ddbCall{op, in})
	f.counts[op]++
	if err := f.failNth[op][f.counts[op]]; err != nil {
		return err
	}
	if f.failIf != nil {
		if err := f.failIf(op, in); err != nil {
			return err
		}
	}
	if table != nil && aws.ToString(table) != f.name {
		return &types.ResourceNotFoundException{Message: aws.String("Requested resource not found: Table: " + aws.ToString(table) + " not found")}
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

func copyItem(in item) item {
	if in == nil {
		return nil
	}
	out := make(item, len(in))
	for k, v := range in {
		if ss, ok := v.(*types.AttributeValueMemberSS); ok {
			v = &types.AttributeValueMemberSS{Value: slices.Clone(ss.Value)}
		}
		out[k] = v
	}
	return out
}

// The only expressions the store may send; anything else is a bug in the
// code under test (or a change the fake must learn about).
var (
	knownConditions = map[string]bool{
		"#state = :fromState AND #runId = :fromRunId":                       true,
		"#state = :fromState AND #runId = :fromRunId AND #threshold > :now": true,
		"#state = :fromState AND #runId = :fromRunId AND #threshold < :now": true,
		"attribute_not_exists(PK)":                                          true,
		"#updatedAt = :prev":                                                true,
		"attribute_not_exists(PK) OR #updatedAt < :cutoff":                  true,
		"#nonce = :nonce":                                                   true,
		"#nonce = :nonce AND #updatedAt = :updatedAt":                       true,
		"#value = :prev":                                                    true,
	}
	knownUpdates = map[string]bool{
		"SET #state = :toState, #runId = :toRunId, #threshold = :threshold, #updatedAt = :now":                          true,
		"SET #state = :toState, #runId = :toRunId, #threshold = :threshold, #updatedAt = :now, #expiresAt = :expiresAt": true,
		"ADD #ids :ids":         true,
		"DELETE #ids :ids":      true,
		"SET #updatedAt = :now": true,
	}
)

// exprEnv resolves names and values of one request and checks that each is
// used, as DynamoDB does.
type exprEnv struct {
	names      map[string]string
	values     map[string]types.AttributeValue
	usedNames  map[string]bool
	usedValues map[string]bool
}

func newExprEnv(names map[string]string, values map[string]types.AttributeValue) *exprEnv {
	return &exprEnv{names: names, values: values, usedNames: map[string]bool{}, usedValues: map[string]bool{}}
}

func (e *exprEnv) name(tok string) (string, error) {
	if !strings.HasPrefix(tok, "#") {
		return tok, nil
	}
	n, ok := e.names[tok]
	if !ok {
		return "", fmt.Errorf("fake dynamodb: ValidationException: undefined attribute name %s", tok)
	}
	e.usedNames[tok] = true
	return n, nil
}

func (e *exprEnv) value(tok string) (types.AttributeValue, error) {
	v, ok := e.values[tok]
	if !ok || !strings.HasPrefix(tok, ":") {
		return nil, fmt.Errorf("fake dynamodb: ValidationException: undefined attribute value %s", tok)
	}
	e.usedValues[tok] = true
	return v, nil
}

func (e *exprEnv) checkAllUsed() error {
	for n := range e.names {
		if !e.usedNames[n] {
			return fmt.Errorf("fake dynamodb: ValidationException: unused attribute name %s", n)
		}
	}
	for v := range e.values {
		if !e.usedValues[v] {
			return fmt.Errorf("fake dynamodb: ValidationException: unused attribute value %s", v)
		}
	}
	return nil
}

// evalCondition evaluates one of knownConditions against cur (nil: no item).
func (e *exprEnv) evalCondition(expr string, cur item) (bool, error) {
	if !knownConditions[expr] {
		return false, fmt.Errorf("fake dynamodb: unsupported condition expression %q", expr)
	}
	if alternatives := strings.Split(expr, " OR "); len(alternatives) > 1 {
		result := false
		for _, a := range alternatives {
			ok, err := e.evalAnd(a, cur)
			if err != nil {
				return false, err
			}
			result = result || ok
		}
		return result, nil
	}
	return e.evalAnd(expr, cur)
}

// evalAnd evaluates a conjunction of comparisons and attribute_not_exists.
func (e *exprEnv) evalAnd(expr string, cur item) (bool, error) {
	result := true
	for _, clause := range strings.Split(expr, " AND ") {
		if inner, ok := strings.CutPrefix(clause, "attribute_not_exists("); ok {
			n, err := e.name(strings.TrimSuffix(inner, ")"))
			if err != nil {
				return false, err
			}
			result = result && cur[n] == nil
			continue
		}
		f := strings.Fields(clause)
		if len(f) != 3 {
			return false, fmt.Errorf("fake dynamodb: cannot parse %q", clause)
		}
		n, err := e.name(f[0])
		if err != nil {
			return false, err
		}
		v, err := e.value(f[2])
		if err != nil {
			return false, err
		}
		want, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			return false, fmt.Errorf("fake dynamodb: %s is not a string", f[2])
		}
		have, ok := cur[n].(*types.AttributeValueMemberS)
		if !ok { // a missing attribute compares false
			result = false
			continue
		}
		switch f[1] {
		case "=":
			result = result && have.Value == want.Value
		case "<":
			result = result && have.Value < want.Value
		case ">":
			result = result && have.Value > want.Value
		default:
			return false, fmt.Errorf("fake dynamodb: unsupported operator %q", f[1])
		}
	}
	return result, nil
}

// applyUpdate applies one of knownUpdates to cur.
func (e *exprEnv) applyUpdate(expr string, cur item) error {
	if !knownUpdates[expr] {
		return fmt.Errorf("fake dynamodb: unsupported update expression %q", expr)
	}
	if rest, ok := strings.CutPrefix(expr, "SET "); ok {
		for _, assign := range strings.Split(rest, ", ") {
			f := strings.Fields(assign)
			if len(f) != 3 || f[1] != "=" {
				return fmt.Errorf("fake dynamodb: cannot parse %q", assign)
			}
			n, err := e.name(f[0])
			if err != nil {
				return err
			}
			v, err := e.value(f[2])
			if err != nil {
				return err
			}
			if n == "PK" || n == "SK" {
				return errors.New("fake dynamodb: cannot update a key attribute")
			}
			cur[n] = v
		}
		return nil
	}
	if rest, ok := strings.CutPrefix(expr, "DELETE "); ok {
		f := strings.Fields(rest)
		n, err := e.name(f[0])
		if err != nil {
			return err
		}
		v, err := e.value(f[1])
		if err != nil {
			return err
		}
		del, ok := v.(*types.AttributeValueMemberSS)
		old, present := cur[n].(*types.AttributeValueMemberSS)
		if !ok || !present {
			return nil // deleting from a missing set does nothing
		}
		set := slices.DeleteFunc(slices.Clone(old.Value), func(id string) bool { return slices.Contains(del.Value, id) })
		if len(set) == 0 {
			delete(cur, n) // DynamoDB removes an emptied set
		} else {
			cur[n] = &types.AttributeValueMemberSS{Value: set}
		}
		return nil
	}
	f := strings.Fields(strings.TrimPrefix(expr, "ADD "))
	n, err := e.name(f[0])
	if err != nil {
		return err
	}
	v, err := e.value(f[1])
	if err != nil {
		return err
	}
	add, ok := v.(*types.AttributeValueMemberSS)
	if !ok || len(add.Value) == 0 {
		return errors.New("fake dynamodb: ADD needs a non-empty string set")
	}
	var set []string
	if old, present := cur[n]; present {
		oldSS, ok := old.(*types.AttributeValueMemberSS)
		if !ok {
			return errors.New("fake dynamodb: ADD to an attribute that is not a string set")
		}
		set = slices.Clone(oldSS.Value)
	}
	for _, s := range add.Value {
		if !slices.Contains(set, s) {
			set = append(set, s)
		}
	}
	cur[n] = &types.AttributeValueMemberSS{Value: set}
	return nil
}

func ccf() error {
	return &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
}

// written runs the agent hook after an item changed. Called with mu held.
func (f *fakeTable) written(old, cur item) {
	if f.onInstance == nil || protocol.StringAttr(cur, "PK") != protocol.TypeInstance {
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
	for _, it := range f.onInstance(oldInst, curInst, old != nil) {
		f.items[itemKeyString(it)] = it
	}
}

// itemKeyString is the fake's key of an item, from its PK and SK.
func itemKeyString(it item) string {
	k, err := keyString(item{"PK": it["PK"], "SK": it["SK"]})
	if err != nil {
		panic(err)
	}
	return k
}

func (f *fakeTable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "GetItem", in.TableName, in); err != nil {
		return nil, err
	}
	k, err := keyString(in.Key)
	if err != nil {
		return nil, err
	}
	return &dynamodb.GetItemOutput{Item: copyItem(f.items[k])}, nil
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
	e := ccf().(*types.ConditionalCheckFailedException)
	if rv == types.ReturnValuesOnConditionCheckFailureAllOld {
		e.Item = copyItem(old)
	}
	return e
}

// plan checks a write to the item at key without writing it: the
// condition against the current item, then build makes the new item from
// it, then every name and value must have been used. Called with mu held.
func (f *fakeTable) plan(key item, cond *string, names map[string]string, values map[string]types.AttributeValue, rv types.ReturnValuesOnConditionCheckFailure,
	build func(env *exprEnv, old item) (item, error)) (write, error) {
	k, err := keyString(key)
	if err != nil {
		return write{}, err
	}
	old := f.items[k]
	env := newExprEnv(names, values)
	if err := checkCondition(env, cond, old, rv); err != nil {
		return write{}, err
	}
	cur, err := build(env, old)
	if err != nil {
		return write{}, err
	}
	if err := env.checkAllUsed(); err != nil {
		return write{}, err
	}
	return write{k: k, old: old, cur: cur}, nil
}

// planPut checks a PutItem without writing. Called with mu held.
func (f *fakeTable) planPut(it item, cond *string, names map[string]string, values map[string]types.AttributeValue, rv types.ReturnValuesOnConditionCheckFailure) (write, error) {
	key := item{"PK": it["PK"], "SK": it["SK"]}
	return f.plan(key, cond, names, values, rv, func(*exprEnv, item) (item, error) { return copyItem(it), nil })
}

// planUpdate checks an UpdateItem without writing. Called with mu held.
func (f *fakeTable) planUpdate(key item, update, cond *string, names map[string]string, values map[string]types.AttributeValue, rv types.ReturnValuesOnConditionCheckFailure) (write, error) {
	return f.plan(key, cond, names, values, rv, func(env *exprEnv, old item) (item, error) {
		cur := copyItem(old)
		if cur == nil { // UpdateItem creates a missing item
			cur = copyItem(key)
		}
		return cur, env.applyUpdate(aws.ToString(update), cur)
	})
}

// commit stores a checked write. Called with mu held.
func (f *fakeTable) commit(w write) {
	f.items[w.k] = w.cur
	f.written(w.old, w.cur)
}

func (f *fakeTable) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
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

func (f *fakeTable) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "UpdateItem", in.TableName, in); err != nil {
		return nil, err
	}
	w, err := f.planUpdate(in.Key, in.UpdateExpression, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	f.commit(w)
	return &dynamodb.UpdateItemOutput{}, f.lost("UpdateItem", in)
}

// lost is the error of a write that succeeded. Called with mu held.
func (f *fakeTable) lost(op string, in any) error {
	if f.loseAnswer != nil && f.loseAnswer(op, in) {
		return errTransient
	}
	return nil
}

// fakeTransactionLimit is moto's (and DynamoDB's former) limit; DynamoDB
// itself now takes 100.
const fakeTransactionLimit = 25

// TransactWriteItems checks every Put and Update first and writes all of
// them or none; failed conditions cancel it with a reason per item.
func (f *fakeTable) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "TransactWriteItems", nil, in); err != nil {
		return nil, err
	}
	if len(in.TransactItems) == 0 || len(in.TransactItems) > fakeTransactionLimit {
		return nil, fmt.Errorf("fake dynamodb: ValidationException: %d transaction items, want 1 to %d", len(in.TransactItems), fakeTransactionLimit)
	}
	var (
		writes   []write
		reasons  = make([]types.CancellationReason, len(in.TransactItems))
		canceled bool
		seen     = map[string]bool{}
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
		if aws.ToString(table) != f.name {
			return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
		}
		var c *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &c):
			canceled = true
			reasons[i] = types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Message: c.Message, Item: c.Item}
		case err != nil:
			return nil, err
		default:
			if seen[w.k] {
				return nil, errors.New("fake dynamodb: ValidationException: transaction request cannot include multiple operations on one item")
			}
			seen[w.k] = true
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

func (f *fakeTable) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "DeleteItem", in.TableName, in); err != nil {
		return nil, err
	}
	w, err := f.plan(in.Key, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure,
		func(*exprEnv, item) (item, error) { return nil, nil })
	if err != nil {
		return nil, err
	}
	delete(f.items, w.k)
	return &dynamodb.DeleteItemOutput{}, nil
}

func (f *fakeTable) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "BatchGetItem", nil, in); err != nil {
		return nil, err
	}
	if f.beforeBatchGet != nil {
		for _, it := range f.beforeBatchGet() {
			f.items[itemKeyString(it)] = it
		}
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for table, ka := range in.RequestItems {
		if table != f.name {
			return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
		}
		if len(ka.Keys) == 0 || len(ka.Keys) > 100 {
			return nil, fmt.Errorf("fake dynamodb: ValidationException: %d keys in one BatchGetItem", len(ka.Keys))
		}
		keys := ka.Keys
		if f.unprocessedReads > 0 {
			f.unprocessedReads--
			out.UnprocessedKeys = map[string]types.KeysAndAttributes{table: {Keys: keys[len(keys)-1:], ConsistentRead: ka.ConsistentRead}}
			keys = keys[:len(keys)-1]
		}
		seen := map[string]bool{}
		for _, key := range keys {
			k, err := keyString(key)
			if err != nil {
				return nil, err
			}
			if seen[k] {
				return nil, errors.New("fake dynamodb: ValidationException: duplicate key in BatchGetItem")
			}
			seen[k] = true
			if it := f.items[k]; it != nil {
				out.Responses[table] = append(out.Responses[table], copyItem(it))
			}
		}
	}
	return out, nil
}

// BatchWriteItem supports puts to this table, at most 25 distinct items; a
// call beyond the first unprocessedWrites ones leaves its last item
// unprocessed, as a throttled table does.
func (f *fakeTable) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "BatchWriteItem", nil, in); err != nil {
		return nil, err
	}
	out := &dynamodb.BatchWriteItemOutput{UnprocessedItems: map[string][]types.WriteRequest{}}
	for table, reqs := range in.RequestItems {
		if table != f.name {
			return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
		}
		if len(reqs) == 0 || len(reqs) > 25 {
			return nil, fmt.Errorf("fake dynamodb: ValidationException: %d writes in one BatchWriteItem", len(reqs))
		}
		if f.unprocessedWrites > 0 {
			f.unprocessedWrites--
			out.UnprocessedItems[table] = reqs[len(reqs)-1:]
			reqs = reqs[:len(reqs)-1]
		}
		seen := map[string]bool{}
		for _, r := range reqs {
			if r.PutRequest == nil {
				return nil, errors.New("fake dynamodb: only PutRequest is supported in BatchWriteItem")
			}
			k, err := keyString(item{"PK": r.PutRequest.Item["PK"], "SK": r.PutRequest.Item["SK"]})
			if err != nil {
				return nil, err
			}
			if seen[k] {
				return nil, errors.New("fake dynamodb: ValidationException: provided list of item keys contains duplicates")
			}
			seen[k] = true
			f.items[k] = copyItem(r.PutRequest.Item)
		}
	}
	return out, nil
}

// Query supports the one key condition the code uses (#pk = :pk), pages of
// queryPage items in sort key order, and ExclusiveStartKey.
func (f *fakeTable) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "Query", in.TableName, in); err != nil {
		return nil, err
	}
	if aws.ToString(in.KeyConditionExpression) != "#pk = :pk" || in.ExpressionAttributeNames["#pk"] != "PK" {
		return nil, fmt.Errorf("fake dynamodb: unsupported key condition %q", aws.ToString(in.KeyConditionExpression))
	}
	pk, ok := in.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS)
	if !ok {
		return nil, errors.New("fake dynamodb: :pk is not a string")
	}
	var keys []string
	for k := range f.items {
		if strings.HasPrefix(k, pk.Value+"|") {
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
	if f.queryPage > 0 && len(keys) > f.queryPage {
		keys = keys[:f.queryPage]
		last := f.items[keys[len(keys)-1]]
		out.LastEvaluatedKey = map[string]types.AttributeValue{"PK": last["PK"], "SK": last["SK"]}
	}
	for _, k := range keys {
		out.Items = append(out.Items, copyItem(f.items[k]))
	}
	return out, nil
}

// put writes an item directly (test setup).
func (f *fakeTable) put(it item) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items[itemKeyString(it)] = copyItem(it)
}

// get reads an item directly (test assertions); nil when absent.
func (f *fakeTable) get(typ, id string) item {
	return f.getKey(protocol.Key(typ, id))
}

// getAgent reads item sk of an instance's agent partition directly.
func (f *fakeTable) getAgent(id, sk string) item {
	return f.getKey(protocol.AgentKey(arn(id), sk))
}

func (f *fakeTable) getKey(key item) item {
	f.mu.Lock()
	defer f.mu.Unlock()
	return copyItem(f.items[itemKeyString(key)])
}

func (f *fakeTable) instance(t *testing.T, id string) protocol.Instance {
	t.Helper()
	it := f.get(protocol.TypeInstance, id)
	if it == nil {
		t.Fatalf("no instance record %s", id)
	}
	inst, err := protocol.InstanceFromItem(it)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// setInstance rewrites fields of an instance record (test setup).
func (f *fakeTable) setInstance(t *testing.T, id string, change func(*protocol.Instance)) {
	t.Helper()
	inst := f.instance(t, id)
	change(&inst)
	f.put(inst.Item())
}

func (f *fakeTable) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[op]
}

// updates returns the recorded UpdateItem inputs.
// updates are the instance and record updates attempted, alone or in
// transactions, in order.
func (f *fakeTable) updates() []*dynamodb.UpdateItemInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*dynamodb.UpdateItemInput
	for _, c := range f.calls {
		switch in := c.in.(type) {
		case *dynamodb.UpdateItemInput:
			out = append(out, in)
		case *dynamodb.TransactWriteItemsInput:
			for _, ti := range in.TransactItems {
				if ti.Update != nil {
					out = append(out, updateItemInput(ti.Update))
				}
			}
		}
	}
	return out
}

// ---------------------------------------------------------------- agents

// behavior is how a fake agent reacts to its instance record.
type behavior int

const (
	healthy              behavior = iota
	staleHeartbeat                // last heartbeat a minute old, writes nothing
	noHeartbeat                   // never heartbeats, but signals like a healthy one
	neverRegisters                // heartbeats, never signals for a run
	registrationFails             // signals UD_REG_FAILED
	neverConfirmsRelease          // registers, but says nothing on release
	releasesWrongRun              // confirms a release, but for another run id
	registersLate                 // heartbeats, has not registered by the wait's end, confirms a release
)

// fakeAgents play the agents of PROTOCOL.md through the table: when an
// instance record gets a run id they register (or not), when it loses one
// they confirm the release (or not). Writes happen in the same table call
// that changed the record, so tests are deterministic. With a GitHub
// target, an agent needs the token for the run in its agent partition at
// that moment, as a real one uses only a token for its record's run: a
// registration without one fails (UD_REG_FAILED), a deregistration too
// (UD_REMOVE_REG_FAILED).
type fakeAgents struct {
	mu        sync.Mutex
	target    string // "": the pool has no GitHub target, tokens are not needed
	behaviors map[string]behavior
	// releaseDelay delays the release confirmation (written by a goroutine).
	releaseDelay time.Duration
	table        *fakeTable
	signalled    map[string]time.Time // instance -> when the release was confirmed
	// clockSkew: the agents' clocks run this far ahead of the provider's
	// (behind when negative), in every heartbeat they write.
	clockSkew time.Duration
}

// heartbeats are the ones the agents that heartbeat write now, as their
// loops do every few seconds (wired to fakeTable.beforeBatchGet).
func (a *fakeAgents) heartbeats() []item {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []item
	for id, b := range a.behaviors {
		if b != staleHeartbeat && b != noHeartbeat {
			out = append(out, heartbeatAt(id, time.Now().Add(a.clockSkew)))
		}
	}
	return out
}

func (a *fakeAgents) set(id string, b behavior) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.behaviors[id] = b
}

func (a *fakeAgents) get(id string) behavior {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.behaviors[id]
}

func signalItem(id, state, runID string) item {
	return protocol.Signal{InstanceARN: arn(id), State: state, RunID: runID, UpdatedAt: protocol.FormatTime(time.Now())}.Item()
}

func heartbeatAt(id string, at time.Time) item {
	return protocol.HeartbeatItem(arn(id), protocol.FormatTime(at))
}

// hasToken tells whether the agent partition of id holds the token sk for
// runID and the agents' target. Called with the table's lock held.
func (a *fakeAgents) hasToken(id, sk, runID string) bool {
	tok, err := protocol.RunnerTokenFromItem(a.table.items[itemKeyString(protocol.AgentKey(arn(id), sk))])
	return err == nil && tok.RunID == runID && tok.Target == a.target && tok.ExpiresAt.After(time.Now())
}

// tokenFor tells whether the agent of id can go on with the token sk for runID.
func (a *fakeAgents) tokenFor(id, sk, runID string) bool {
	return a.target == "" || a.hasToken(id, sk, runID)
}

func (a *fakeAgents) react(old, cur protocol.Instance, existed bool) []item {
	b := a.get(cur.ID)
	if cur.State == protocol.StateTerminated {
		return nil
	}
	var out []item
	if b != staleHeartbeat && b != noHeartbeat {
		out = append(out, heartbeatAt(cur.ID, time.Now().Add(a.clockSkew)))
	}
	switch {
	case cur.RunID != "" && (!existed || old.RunID != cur.RunID):
		registers := a.tokenFor(cur.ID, protocol.SortKeyRegistrationToken, cur.RunID)
		switch {
		case b == registrationFails || (!registers && b != neverRegisters && b != staleHeartbeat):
			out = append(out, signalItem(cur.ID, protocol.SignalRegistrationFailed, cur.RunID))
		case b == healthy || b == noHeartbeat || b == neverConfirmsRelease || b == releasesWrongRun:
			out = append(out, signalItem(cur.ID, protocol.SignalRegistered, cur.RunID))
		}
	case existed && old.RunID != "" && cur.RunID == "":
		runID := old.RunID
		switch b {
		case neverConfirmsRelease, staleHeartbeat, neverRegisters:
			return out
		case releasesWrongRun:
			runID = "some-other-run"
		}
		if !a.tokenFor(cur.ID, protocol.SortKeyRemovalToken, old.RunID) {
			return append(out, signalItem(cur.ID, protocol.SignalDeregistrationFailed, runID))
		}
		out = append(out, signalItem(cur.ID, protocol.SignalDeregistered, runID))
		if a.releaseDelay > 0 {
			go func() {
				time.Sleep(a.releaseDelay)
				a.mu.Lock()
				a.signalled[cur.ID] = time.Now()
				a.mu.Unlock()
				a.table.put(signalItem(cur.ID, protocol.SignalReleased, runID))
			}()
			return out
		}
		a.mu.Lock()
		a.signalled[cur.ID] = time.Now()
		a.mu.Unlock()
		out = append(out, signalItem(cur.ID, protocol.SignalReleased, runID))
	}
	return out
}

// ---------------------------------------------------------------- SQS

type qmsg struct {
	msgID, body, receipt string
	visibleAt            time.Time
}

type sentEntry struct {
	body  string
	delay int32
	at    time.Time // real time of the call
}

// fakeQueue is one standard queue with its own clock: received messages are
// invisible for their visibility timeout, sent ones for their delay.
type fakeQueue struct {
	url      string
	messages []*qmsg
}

// byReceipt is the index of the message last received with handle h, or -1.
func (q *fakeQueue) byReceipt(h *string) int {
	return slices.IndexFunc(q.messages, func(m *qmsg) bool { return m.receipt != "" && m.receipt == aws.ToString(h) })
}

// fakeSQS holds queues by URL and records every call.
type fakeSQS struct {
	mu     sync.Mutex
	clock  time.Time
	queues map[string]*fakeQueue
	seq    int
	// advancePerReceive moves the clock on at every receive (0: never).
	advancePerReceive time.Duration

	receives []*sqs.ReceiveMessageInput
	received []string // bodies, in order
	deletes  []*sqs.DeleteMessageBatchInput
	sends    []*sqs.SendMessageBatchInput
	sent     []sentEntry

	visibilityChanges []*sqs.ChangeMessageVisibilityBatchInput

	counts  map[string]int
	failNth map[string]map[int]error
	// failDelete makes DeleteMessageBatch report the entry of a message
	// with this instance id as failed.
	failDelete map[string]bool
	// failSendEntries: this many SendMessageBatch calls report their first
	// entry as failed.
	failSendEntries int
	// receiveHook runs (without the lock) before every receive.
	receiveHook func(n int, in *sqs.ReceiveMessageInput)
}

func newFakeSQS(urls ...string) *fakeSQS {
	s := &fakeSQS{clock: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), queues: map[string]*fakeQueue{},
		counts: map[string]int{}, failNth: map[string]map[int]error{}, failDelete: map[string]bool{}}
	for _, u := range urls {
		s.queues[u] = &fakeQueue{url: u}
	}
	return s
}

func (s *fakeSQS) fail(op string, n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNth[op] == nil {
		s.failNth[op] = map[int]error{}
	}
	s.failNth[op][n] = err
}

func (s *fakeSQS) enter(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil { // as the SDK: a cancelled call is not sent
		return err
	}
	s.counts[op]++
	return s.failNth[op][s.counts[op]]
}

func (s *fakeSQS) queue(url *string) (*fakeQueue, error) {
	q := s.queues[aws.ToString(url)]
	if q == nil {
		return nil, fmt.Errorf("fake sqs: AWS.SimpleQueueService.NonExistentQueue: %s", aws.ToString(url))
	}
	return q, nil
}

// add puts a message in a queue, visible at once (test setup).
func (s *fakeSQS) add(url, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.queues[url].messages = append(s.queues[url].messages, &qmsg{msgID: "m" + strconv.Itoa(s.seq), body: body, visibleAt: s.clock})
}

func (s *fakeSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.mu.Lock()
	hook := s.receiveHook
	n := len(s.receives) + 1
	s.mu.Unlock()
	if hook != nil {
		hook(n, in)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.receives = append(s.receives, in)
	if err := s.enter(ctx, "ReceiveMessage"); err != nil {
		return nil, err
	}
	q, err := s.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if in.MaxNumberOfMessages < 1 || in.MaxNumberOfMessages > 10 {
		return nil, fmt.Errorf("fake sqs: MaxNumberOfMessages %d out of 1-10", in.MaxNumberOfMessages)
	}
	if in.WaitTimeSeconds < 0 || in.WaitTimeSeconds > 20 {
		return nil, fmt.Errorf("fake sqs: WaitTimeSeconds %d out of 0-20", in.WaitTimeSeconds)
	}
	s.clock = s.clock.Add(s.advancePerReceive)
	visible := func() []*qmsg {
		var v []*qmsg
		for _, m := range q.messages {
			if !m.visibleAt.After(s.clock) && len(v) < int(in.MaxNumberOfMessages) {
				v = append(v, m)
			}
		}
		return v
	}
	got := visible()
	if len(got) == 0 && in.WaitTimeSeconds > 0 {
		// Long poll: wait (on the fake clock) for the first message to
		// become visible, at most WaitTimeSeconds.
		end := s.clock.Add(time.Duration(in.WaitTimeSeconds) * time.Second)
		next := end
		for _, m := range q.messages {
			if m.visibleAt.Before(next) {
				next = m.visibleAt
			}
		}
		s.clock = next
		got = visible()
	}
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range got {
		s.seq++
		m.receipt = fmt.Sprintf("rh-%s-%d", m.msgID, s.seq)
		m.visibleAt = s.clock.Add(time.Duration(in.VisibilityTimeout) * time.Second)
		s.received = append(s.received, m.body)
		out.Messages = append(out.Messages, sqstypes.Message{MessageId: aws.String(m.msgID), ReceiptHandle: aws.String(m.receipt), Body: aws.String(m.body)})
	}
	return out, nil
}

func checkBatchIDs[T any](entries []T, id func(T) *string) error {
	if len(entries) == 0 || len(entries) > 10 {
		return fmt.Errorf("fake sqs: %d entries in a batch", len(entries))
	}
	seen := map[string]bool{}
	for _, e := range entries {
		i := aws.ToString(id(e))
		if i == "" || seen[i] {
			return fmt.Errorf("fake sqs: batch entry id %q empty or repeated", i)
		}
		seen[i] = true
	}
	return nil
}

// ChangeMessageVisibilityBatch sets when received messages become visible.
func (s *fakeSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.visibilityChanges = append(s.visibilityChanges, in)
	if err := s.enter(ctx, "ChangeMessageVisibilityBatch"); err != nil {
		return nil, err
	}
	q, err := s.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := checkBatchIDs(in.Entries, func(e sqstypes.ChangeMessageVisibilityBatchRequestEntry) *string { return e.Id }); err != nil {
		return nil, err
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		if idx := q.byReceipt(e.ReceiptHandle); idx >= 0 {
			q.messages[idx].visibleAt = s.clock.Add(time.Duration(e.VisibilityTimeout) * time.Second)
			out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
		} else {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("no such receipt handle"), SenderFault: true})
		}
	}
	return out, nil
}

func (s *fakeSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes = append(s.deletes, in)
	if err := s.enter(ctx, "DeleteMessageBatch"); err != nil {
		return nil, err
	}
	q, err := s.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := checkBatchIDs(in.Entries, func(e sqstypes.DeleteMessageBatchRequestEntry) *string { return e.Id }); err != nil {
		return nil, err
	}
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		idx := q.byReceipt(e.ReceiptHandle)
		if idx >= 0 && s.failDelete[bodyID(q.messages[idx].body)] {
			idx = -1
		}
		if idx < 0 {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("invalid receipt handle")})
			continue
		}
		q.messages = slices.Delete(q.messages, idx, idx+1)
		out.Successful = append(out.Successful, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (s *fakeSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends = append(s.sends, in)
	if err := s.enter(ctx, "SendMessageBatch"); err != nil {
		return nil, err
	}
	q, err := s.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := checkBatchIDs(in.Entries, func(e sqstypes.SendMessageBatchRequestEntry) *string { return e.Id }); err != nil {
		return nil, err
	}
	out := &sqs.SendMessageBatchOutput{}
	for i, e := range in.Entries {
		if e.DelaySeconds < 0 || e.DelaySeconds > 900 {
			return nil, fmt.Errorf("fake sqs: DelaySeconds %d", e.DelaySeconds)
		}
		if i == 0 && s.failSendEntries > 0 {
			s.failSendEntries--
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected entry failure")})
			continue
		}
		s.seq++
		q.messages = append(q.messages, &qmsg{msgID: "m" + strconv.Itoa(s.seq), body: aws.ToString(e.MessageBody), visibleAt: s.clock.Add(time.Duration(e.DelaySeconds) * time.Second)})
		s.sent = append(s.sent, sentEntry{body: aws.ToString(e.MessageBody), delay: e.DelaySeconds, at: time.Now()})
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m" + strconv.Itoa(s.seq))})
	}
	return out, nil
}

// bodyID is the instance id of a message body, or the body when it has none.
func bodyID(body string) string {
	m, err := protocol.ParseMessage(body)
	if err != nil || m.ID == "" {
		return body
	}
	return m.ID
}

// queued returns the messages in a queue (visible or not), parsed.
func (s *fakeSQS) queued(t *testing.T, url string) []protocol.Message {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []protocol.Message
	for _, m := range s.queues[url].messages {
		pm, err := protocol.ParseMessage(m.body)
		if err != nil {
			t.Fatalf("queue %s holds an invalid message %q: %v", url, m.body, err)
		}
		out = append(out, pm)
	}
	return out
}

// queuedIDs returns the instance ids (or raw bodies) in a queue, sorted.
func (s *fakeSQS) queuedIDs(t *testing.T, url string) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, m := range s.queues[url].messages {
		ids = append(ids, bodyID(m.body))
	}
	sort.Strings(ids)
	return ids
}

func (s *fakeSQS) sentEntries() []sentEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

func (s *fakeSQS) receiveInputs() []*sqs.ReceiveMessageInput {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.receives)
}

// ---------------------------------------------------------------- EC2

// fakeEC2 launches instant fleets, describes a catalogue of instance types
// (applying the filters it understands) and records terminations.
type fakeEC2 struct {
	mu sync.Mutex

	// live are the instances EC2 runs, with their launch times: fleet
	// launches add to it, terminations remove from it.
	live map[string]time.Time

	fleets []*ec2.CreateFleetInput
	// onFleet runs (under the lock) at every CreateFleet.
	onFleet func()
	// shortBy launches this many fewer instances than asked, with an
	// InsufficientInstanceCapacity error entry.
	shortBy   int
	fleetErr  error
	nextID    int
	groupSize int // instance ids per CreateFleetInstance entry (AWS groups them)

	catalog       []ec2types.InstanceTypeInfo
	pageSize      int
	typeInputs    []*ec2.DescribeInstanceTypesInput
	ltImage       string // "" : the template has no AMI
	ltInputs      []*ec2.DescribeLaunchTemplateVersionsInput
	ltTags        map[string]string // the launch template's tags; nil: tagged for the test pool
	ltMissing     bool              // DescribeLaunchTemplates finds no template
	ltDescribes   []*ec2.DescribeLaunchTemplatesInput
	images        map[string]ec2types.ArchitectureValues
	imageInputs   []*ec2.DescribeImagesInput
	terminated    []string
	terminateErrs map[int]error // n-th TerminateInstances call fails
	terminateN    int
	// unseenCalls: EC2's eventual consistency; the first calls naming a
	// fleet's new instance answer InvalidInstanceID.NotFound.
	unseenCalls int
	unseen      map[string]int
}

func (e *fakeEC2) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fleets = append(e.fleets, in)
	if e.onFleet != nil {
		e.onFleet()
	}
	if e.fleetErr != nil {
		return nil, e.fleetErr
	}
	if in.Type != ec2types.FleetTypeInstant || in.TargetCapacitySpecification == nil || len(in.LaunchTemplateConfigs) != 1 {
		return nil, errors.New("fake ec2: only single-template instant fleets are supported")
	}
	if tok := aws.ToString(in.ClientToken); tok == "" || len(tok) > 64 {
		return nil, fmt.Errorf("fake ec2: client token %q", tok)
	}
	overrides := in.LaunchTemplateConfigs[0].Overrides
	if len(overrides) == 0 {
		return nil, errors.New("fake ec2: no overrides")
	}
	typ := ec2types.InstanceType("c6i.large")
	if overrides[0].InstanceType != "" {
		typ = overrides[0].InstanceType
	}
	n := int(aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity)) - e.shortBy
	out := &ec2.CreateFleetOutput{FleetId: aws.String("fleet-1")}
	group := max(1, e.groupSize)
	for i := 0; i < n; i++ {
		e.nextID++
		id := fmt.Sprintf("i-f%d", e.nextID)
		e.launchLocked(id, time.Now())
		if e.unseenCalls > 0 {
			if e.unseen == nil {
				e.unseen = map[string]int{}
			}
			e.unseen[id] = e.unseenCalls
		}
		if i%group == 0 {
			out.Instances = append(out.Instances, ec2types.CreateFleetInstance{InstanceType: typ})
		}
		last := &out.Instances[len(out.Instances)-1]
		last.InstanceIds = append(last.InstanceIds, id)
	}
	if e.shortBy > 0 {
		out.Errors = append(out.Errors, ec2types.CreateFleetError{ErrorCode: aws.String("InsufficientInstanceCapacity"), ErrorMessage: aws.String("not enough capacity")})
	}
	return out, nil
}

func (e *fakeEC2) DescribeInstanceTypes(_ context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.typeInputs = append(e.typeInputs, in)
	var match []ec2types.InstanceTypeInfo
	for _, it := range e.catalog {
		ok := true
		for _, f := range in.Filters {
			var have []string
			switch aws.ToString(f.Name) {
			case "vcpu-info.default-vcpus":
				have = []string{strconv.Itoa(int(aws.ToInt32(it.VCpuInfo.DefaultVCpus)))}
			case "processor-info.supported-architecture":
				for _, a := range it.ProcessorInfo.SupportedArchitectures {
					have = append(have, string(a))
				}
			case "burstable-performance-supported":
				have = []string{strconv.FormatBool(aws.ToBool(it.BurstablePerformanceSupported))}
			default:
				return nil, fmt.Errorf("fake ec2: unsupported filter %s", aws.ToString(f.Name))
			}
			hit := false
			for _, v := range f.Values {
				hit = hit || slices.Contains(have, v)
			}
			ok = ok && hit
		}
		if ok {
			match = append(match, it)
		}
	}
	start := 0
	if in.NextToken != nil {
		start, _ = strconv.Atoi(aws.ToString(in.NextToken))
	}
	size := e.pageSize
	if size == 0 {
		size = len(match) + 1
	}
	end := min(start+size, len(match))
	out := &ec2.DescribeInstanceTypesOutput{InstanceTypes: match[start:end]}
	if end < len(match) {
		out.NextToken = aws.String(strconv.Itoa(end))
	}
	return out, nil
}

func (e *fakeEC2) DescribeLaunchTemplateVersions(_ context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ltInputs = append(e.ltInputs, in)
	data := &ec2types.ResponseLaunchTemplateData{}
	if e.ltImage != "" {
		data.ImageId = aws.String(e.ltImage)
	}
	return &ec2.DescribeLaunchTemplateVersionsOutput{LaunchTemplateVersions: []ec2types.LaunchTemplateVersion{{LaunchTemplateData: data}}}, nil
}

// DescribeLaunchTemplates describes the one launch template there is, by
// whatever id or name it is asked for, as EC2 does: an unknown one is an
// error.
func (e *fakeEC2) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ltDescribes = append(e.ltDescribes, in)
	if len(in.LaunchTemplateIds)+len(in.LaunchTemplateNames) != 1 {
		return nil, errors.New("fake ec2: DescribeLaunchTemplates of exactly one id or name is supported")
	}
	if e.ltMissing {
		return nil, &smithy.GenericAPIError{Code: "InvalidLaunchTemplateId.NotFound", Message: "the launch template does not exist"}
	}
	tags := e.ltTags
	if tags == nil {
		tags = map[string]string{protocol.TagPool: testPool}
	}
	lt := ec2types.LaunchTemplate{LaunchTemplateId: aws.String("lt-0123"), LaunchTemplateName: aws.String("runners")}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		lt.Tags = append(lt.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return &ec2.DescribeLaunchTemplatesOutput{LaunchTemplates: []ec2types.LaunchTemplate{lt}}, nil
}

func (e *fakeEC2) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.imageInputs = append(e.imageInputs, in)
	out := &ec2.DescribeImagesOutput{}
	for _, id := range in.ImageIds {
		if arch, ok := e.images[id]; ok {
			out.Images = append(out.Images, ec2types.Image{ImageId: aws.String(id), Architecture: arch})
		}
	}
	return out, nil
}

func (e *fakeEC2) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.terminateN++
	if err := e.terminateErrs[e.terminateN]; err != nil {
		return nil, err
	}
	for _, id := range in.InstanceIds {
		if e.unseen[id] > 0 {
			e.unseen[id]--
			return nil, &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: fmt.Sprintf("The instance ID '%s' does not exist", id)}
		}
	}
	e.terminated = append(e.terminated, in.InstanceIds...)
	for _, id := range in.InstanceIds {
		delete(e.live, id)
	}
	return &ec2.TerminateInstancesOutput{}, nil
}

// launch adds an instance EC2 runs, as if launched at at.
func (e *fakeEC2) launch(id string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.launchLocked(id, at)
}

func (e *fakeEC2) launchLocked(id string, at time.Time) {
	if e.live == nil {
		e.live = map[string]time.Time{}
	}
	e.live[id] = at
}

// DescribeInstances lists the live instances; every fake instance belongs
// to the test pool, so only the filters' presence is checked.
func (e *fakeEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var tagged, live bool
	for _, f := range in.Filters {
		tagged = tagged || (aws.ToString(f.Name) == "tag:"+protocol.TagPool && slices.Equal(f.Values, []string{testPool}))
		live = live || aws.ToString(f.Name) == "instance-state-name"
	}
	if !tagged || !live {
		return nil, errors.New("fake ec2: DescribeInstances without the pool tag and state filters")
	}
	var r ec2types.Reservation
	for _, id := range slices.Sorted(maps.Keys(e.live)) {
		r.Instances = append(r.Instances, ec2types.Instance{InstanceId: aws.String(id), LaunchTime: aws.Time(e.live[id]), State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning}})
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{r}}, nil
}

func (e *fakeEC2) terminatedIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := slices.Clone(e.terminated)
	sort.Strings(ids)
	return ids
}

func (e *fakeEC2) fleetInputs() []*ec2.CreateFleetInput {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.fleets)
}

func instanceType(name string, vcpus int32, mib int64, burstable bool, archs ...ec2types.ArchitectureType) ec2types.InstanceTypeInfo {
	return ec2types.InstanceTypeInfo{
		InstanceType:                  ec2types.InstanceType(name),
		VCpuInfo:                      &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(vcpus)},
		MemoryInfo:                    &ec2types.MemoryInfo{SizeInMiB: aws.Int64(mib)},
		ProcessorInfo:                 &ec2types.ProcessorInfo{SupportedArchitectures: archs},
		BurstablePerformanceSupported: aws.Bool(burstable),
	}
}

// ---------------------------------------------------------------- fixture

const (
	testPool      = "testpool"
	testARNPrefix = "arn:aws:ec2:eu-west-1:123456789012:instance/"
	testRun       = "run-1"
	largeURL      = "https://sqs.test/000000000000/testpool-large"
	xlargeURL     = "https://sqs.test/000000000000/testpool-xlarge"
	idleTime      = 20 * time.Minute
	maxRunTime    = time.Hour
)

// arn is the ARN of a test instance.
func arn(id string) string { return protocol.InstanceARN(testARNPrefix, id) }

func testTimings() Timings {
	return Timings{
		HeartbeatMaxAge:     15 * time.Second,
		RegistrationWait:    300 * time.Millisecond,
		FleetValidationWait: 500 * time.Millisecond,
		ReleaseWait:         300 * time.Millisecond,
		PollInterval:        10 * time.Millisecond,
	}
}

// env is a pool in fakes with a Claimer on top.
type env struct {
	t      *testing.T
	db     *fakeTable
	sqs    *fakeSQS
	ec2    *fakeEC2
	agents *fakeAgents
	cfg    protocol.PoolConfig
	c      *Claimer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := newFakeTable(testPool)
	agents := &fakeAgents{behaviors: map[string]behavior{}, table: db, signalled: map[string]time.Time{}}
	db.onInstance = agents.react
	e := &env{
		t: t, db: db, sqs: newFakeSQS(largeURL, xlargeURL), agents: agents,
		ec2: &fakeEC2{images: map[string]ec2types.ArchitectureValues{}},
		cfg: protocol.PoolConfig{
			Name:              testPool,
			InstanceARNPrefix: testARNPrefix,
			ResourceClasses: map[string]protocol.ResourceClass{
				"large": {CPU: 2, MemoryMiB: 4096}, "xlarge": {CPU: 4, MemoryMiB: 8192},
			},
			IdleTimeout: protocol.Duration(idleTime),
			MaxRuntime:  protocol.Duration(maxRunTime),
			Fleet: &protocol.FleetConfig{
				LaunchTemplateID: "lt-0123", LaunchTemplateVersion: "$Latest",
				SubnetIDs: []string{"subnet-a", "subnet-b"}, InstanceSelection: protocol.SelectionAttributeBased,
			},
			QueueURLs: map[string]string{"large": largeURL, "xlarge": xlargeURL},
		},
	}
	// Reaping has tests of its own; the others see only the claim's work.
	e.c = &Claimer{DynamoDB: e.db, SQS: e.sqs, EC2: e.ec2, ReapInterval: -1, Log: func(msg string, kv ...any) { t.Log(append([]any{msg}, kv...)...) }}
	e.writeConfig()
	return e
}

func (e *env) writeConfig() { e.db.put(e.cfg.Item(protocol.FormatTime(time.Now()))) }

func (e *env) request(n int) Request {
	return Request{
		Pool: testPool, RunID: testRun, InstanceCount: n, ResourceClass: "large", UsageClass: protocol.UsageOnDemand,
		AllowedTypes: []string{"c*", "m*"}, FleetFallback: true, Timings: testTimings(),
	}
}

// idleMessage is the queue message of an idle large runner.
func idleMessage(id, typ string, until time.Time) protocol.Message {
	return protocol.Message{ID: id, ResourceClass: "large", InstanceType: typ, CPU: 2, MemoryMiB: 4096, UsageClass: protocol.UsageOnDemand, Threshold: protocol.FormatTime(until)}
}

// seedIdle puts an idle large runner in the pool: its record, its heartbeat
// (as its behaviour has it) and its message.
func (e *env) seedIdle(id string, b behavior) protocol.Message {
	e.t.Helper()
	until := time.Now().Add(time.Hour) // distinct from the pool's idle timeout
	m := idleMessage(id, "c6i.large", until)
	e.seedRecord(protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: m.Threshold}, b)
	e.sqs.add(largeURL, m.Body())
	return m
}

// seedRecord writes an instance record (large, c6i.large, on-demand by
// default) and the agent's heartbeat.
func (e *env) seedRecord(inst protocol.Instance, b behavior) {
	if inst.ResourceClass == "" {
		inst.ResourceClass = "large"
	}
	if inst.InstanceType == "" {
		inst.InstanceType = "c6i.large"
	}
	if inst.UsageClass == "" {
		inst.UsageClass = protocol.UsageOnDemand
	}
	inst.UpdatedAt = protocol.FormatTime(time.Now())
	e.agents.set(inst.ID, b)
	e.db.put(inst.Item())
	switch b {
	case noHeartbeat:
	case staleHeartbeat:
		e.db.put(heartbeatAt(inst.ID, time.Now().Add(-time.Minute)))
	default:
		e.db.put(heartbeatAt(inst.ID, time.Now()))
	}
}

// claimRecord reads the claim record of the test run.
func (e *env) claimRecord() (Record, bool) {
	e.t.Helper()
	it := e.db.get(protocol.TypeClaim, testRun)
	if it == nil {
		return Record{}, false
	}
	r, err := recordFromItem(testPool, it)
	if err != nil {
		e.t.Fatal(err)
	}
	return r, true
}

// window is the range a threshold set between two instants plus d may take.
type window struct{ lo, hi string }

func during(start time.Time, d time.Duration) window {
	return window{protocol.FormatTime(start.Add(d)), protocol.FormatTime(time.Now().Add(d))}
}

func (w window) check(t *testing.T, what, got string) {
	t.Helper()
	if got < w.lo || got > w.hi {
		t.Errorf("%s = %s, want within [%s, %s]", what, got, w.lo, w.hi)
	}
}

// render prints an item with its values, for comparing items.
func render(it item) string {
	keys := make([]string, 0, len(it))
	for k := range it {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		switch v := it[k].(type) {
		case *types.AttributeValueMemberS:
			fmt.Fprintf(&b, "%s=S:%q ", k, v.Value)
		case *types.AttributeValueMemberSS:
			fmt.Fprintf(&b, "%s=SS:%q ", k, v.Value)
		case *types.AttributeValueMemberM:
			fmt.Fprintf(&b, "%s=M:{%s} ", k, render(v.Value))
		default:
			fmt.Fprintf(&b, "%s=%T ", k, v)
		}
	}
	return b.String()
}
