package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var errNotFaked = errors.New("not implemented by the fake")

// callLog records the calls made to all fakes of one test, in order.
type callLog struct{ calls []string }

func (l *callLog) add(format string, args ...any) {
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
}

// mutating lists the recorded calls that change something.
func (l *callLog) mutating() []string {
	var out []string
	for _, c := range l.calls {
		for _, p := range []string{"CreateTable", "DeleteTable", "PutItem", "UpdateItem", "TagResource", "UntagResource",
			"CreateQueue", "DeleteQueue", "TagQueue", "UntagQueue", "TerminateInstances"} {
			if strings.HasPrefix(c, p+" ") || c == p {
				out = append(out, c)
			}
		}
	}
	return out
}

// fakeDynamo is one table, enough for the Manager.
type fakeDynamo struct {
	log    *callLog
	name   string
	arn    string
	exists bool
	items  map[string]map[string]types.AttributeValue // by PK + "|" + SK
	tags   map[string]string
	ttl    string // the TTL attribute, "" while TTL is off
}

func newFakeDynamo(log *callLog, name string) *fakeDynamo {
	return &fakeDynamo{log: log, name: name, arn: "arn:aws:dynamodb:eu-west-1:123:table/" + name, exists: true,
		items: map[string]map[string]types.AttributeValue{}, tags: map[string]string{}}
}

func itemKey(item map[string]types.AttributeValue) string {
	return protocol.StringAttr(item, protocol.AttrPK) + "|" + protocol.StringAttr(item, protocol.AttrSK)
}

func (f *fakeDynamo) put(item map[string]types.AttributeValue) {
	f.items[itemKey(item)] = maps.Clone(item)
}

func (f *fakeDynamo) get(typ, id string) map[string]types.AttributeValue {
	return f.items[itemKey(protocol.Key(typ, id))]
}

func (f *fakeDynamo) check(table *string) error {
	if aws.ToString(table) != f.name || !f.exists {
		return &types.ResourceNotFoundException{Message: aws.String("Requested resource not found: " + aws.ToString(table))}
	}
	return nil
}

// CreateTable makes the table active at once; it must be the fake's table.
func (f *fakeDynamo) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	f.log.add("CreateTable %s", aws.ToString(in.TableName))
	if aws.ToString(in.TableName) != f.name {
		return nil, errNotFaked
	}
	if f.exists {
		return nil, &types.ResourceInUseException{Message: aws.String("Table already exists: " + f.name)}
	}
	f.exists = true
	for _, t := range in.Tags {
		f.tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return &dynamodb.CreateTableOutput{TableDescription: &types.TableDescription{
		TableName: in.TableName, TableArn: aws.String(f.arn), TableStatus: types.TableStatusActive,
	}}, nil
}

func (f *fakeDynamo) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	f.log.add("DescribeTable %s", aws.ToString(in.TableName))
	if err := f.check(in.TableName); err != nil {
		return nil, err
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		TableName: in.TableName, TableArn: aws.String(f.arn), TableStatus: types.TableStatusActive,
	}}, nil
}

func (f *fakeDynamo) DeleteTable(_ context.Context, in *dynamodb.DeleteTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error) {
	f.log.add("DeleteTable %s", aws.ToString(in.TableName))
	if err := f.check(in.TableName); err != nil {
		return nil, err
	}
	f.exists = false // items are kept for inspection
	return &dynamodb.DeleteTableOutput{}, nil
}

func (f *fakeDynamo) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.log.add("GetItem %s", itemKey(in.Key))
	if err := f.check(in.TableName); err != nil {
		return nil, err
	}
	item := f.items[itemKey(in.Key)]
	if item == nil {
		return &dynamodb.GetItemOutput{}, nil
	}
	return &dynamodb.GetItemOutput{Item: maps.Clone(item)}, nil
}

func (f *fakeDynamo) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.log.add("PutItem %s", itemKey(in.Item))
	if err := f.check(in.TableName); err != nil {
		return nil, err
	}
	if in.ConditionExpression != nil {
		return nil, errNotFaked
	}
	f.put(in.Item)
	return &dynamodb.PutItemOutput{}, nil
}

// UpdateItem understands "SET #a = :x, #b = :y" with an optional
// attribute_exists(PK) condition: what markTerminated writes.
func (f *fakeDynamo) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.log.add("UpdateItem %s", itemKey(in.Key))
	if err := f.check(in.TableName); err != nil {
		return nil, err
	}
	item := f.items[itemKey(in.Key)]
	switch cond := aws.ToString(in.ConditionExpression); cond {
	case "":
	case "attribute_exists(PK)":
		if item == nil {
			return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
		}
	default:
		return nil, fmt.Errorf("fake UpdateItem: condition %q: %w", cond, errNotFaked)
	}
	expr, ok := strings.CutPrefix(aws.ToString(in.UpdateExpression), "SET ")
	if !ok {
		return nil, fmt.Errorf("fake UpdateItem: expression %q: %w", aws.ToString(in.UpdateExpression), errNotFaked)
	}
	if item == nil {
		item = maps.Clone(in.Key)
	}
	for _, assign := range strings.Split(expr, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(assign), " = ")
		attr, okName := in.ExpressionAttributeNames[name]
		v, okValue := in.ExpressionAttributeValues[value]
		if !ok || !okName || !okValue {
			return nil, fmt.Errorf("fake UpdateItem: assignment %q: %w", assign, errNotFaked)
		}
		item[attr] = v
	}
	f.put(item)
	return &dynamodb.UpdateItemOutput{}, nil
}

// Query understands "#pk = :pk" and returns the items in SK order, in one page.
func (f *fakeDynamo) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	f.log.add("Query %s", aws.ToString(in.TableName))
	if err := f.check(in.TableName); err != nil {
		return nil, err
	}
	if aws.ToString(in.KeyConditionExpression) != "#pk = :pk" || in.ExpressionAttributeNames["#pk"] != protocol.AttrPK || in.FilterExpression != nil {
		return nil, errNotFaked
	}
	pk := protocol.StringAttr(in.ExpressionAttributeValues, ":pk")
	var out []map[string]types.AttributeValue
	for _, k := range slices.Sorted(maps.Keys(f.items)) {
		if item := f.items[k]; protocol.StringAttr(item, protocol.AttrPK) == pk {
			out = append(out, maps.Clone(item))
		}
	}
	return &dynamodb.QueryOutput{Items: out, Count: int32(len(out))}, nil
}

func (f *fakeDynamo) TagResource(_ context.Context, in *dynamodb.TagResourceInput, _ ...func(*dynamodb.Options)) (*dynamodb.TagResourceOutput, error) {
	f.log.add("TagResource %s", aws.ToString(in.ResourceArn))
	for _, t := range in.Tags {
		f.tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return &dynamodb.TagResourceOutput{}, nil
}

func (f *fakeDynamo) UntagResource(_ context.Context, in *dynamodb.UntagResourceInput, _ ...func(*dynamodb.Options)) (*dynamodb.UntagResourceOutput, error) {
	f.log.add("UntagResource %s", aws.ToString(in.ResourceArn))
	for _, k := range in.TagKeys {
		delete(f.tags, k)
	}
	return &dynamodb.UntagResourceOutput{}, nil
}

func (f *fakeDynamo) ListTagsOfResource(_ context.Context, in *dynamodb.ListTagsOfResourceInput, _ ...func(*dynamodb.Options)) (*dynamodb.ListTagsOfResourceOutput, error) {
	f.log.add("ListTagsOfResource %s", aws.ToString(in.ResourceArn))
	if aws.ToString(in.ResourceArn) != f.arn || !f.exists {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no such resource")}
	}
	var tags []types.Tag
	for _, k := range slices.Sorted(maps.Keys(f.tags)) {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(f.tags[k])})
	}
	return &dynamodb.ListTagsOfResourceOutput{Tags: tags}, nil
}

func (f *fakeDynamo) DescribeTimeToLive(_ context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	f.log.add("DescribeTimeToLive %s", aws.ToString(in.TableName))
	if aws.ToString(in.TableName) != f.name || !f.exists {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no such table")}
	}
	d := &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
	if f.ttl != "" {
		d = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusEnabled, AttributeName: aws.String(f.ttl)}
	}
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: d}, nil
}

// UpdateTimeToLive fails, as DynamoDB does, when TTL is already on.
func (f *fakeDynamo) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	f.log.add("UpdateTimeToLive %s %s", aws.ToString(in.TableName), aws.ToString(in.TimeToLiveSpecification.AttributeName))
	if aws.ToString(in.TableName) != f.name || !f.exists {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no such table")}
	}
	if f.ttl != "" {
		return nil, errors.New("ValidationException: TimeToLive is already enabled")
	}
	f.ttl = aws.ToString(in.TimeToLiveSpecification.AttributeName)
	return &dynamodb.UpdateTimeToLiveOutput{}, nil
}

// fakeQueue is one SQS queue; the message counts are what
// GetQueueAttributes reports.
type fakeQueue struct {
	name, url, arn               string
	visible, notVisible, delayed int
	tags                         map[string]string
}

type fakeSQS struct {
	log    *callLog
	queues map[string]*fakeQueue // by name
	// beforeCreate, when set, runs at the start of each CreateQueue: another
	// party creating a queue in between.
	beforeCreate func(name string)
}

func newFakeSQS(log *callLog) *fakeSQS { return &fakeSQS{log: log, queues: map[string]*fakeQueue{}} }

func (f *fakeSQS) add(name string) *fakeQueue {
	q := &fakeQueue{name: name, url: "https://sqs.eu-west-1.amazonaws.com/123/" + name,
		arn: "arn:aws:sqs:eu-west-1:123:" + name, tags: map[string]string{}}
	f.queues[name] = q
	return q
}

func (f *fakeSQS) byURL(url *string) (*fakeQueue, error) {
	for _, q := range f.queues {
		if q.url == aws.ToString(url) {
			return q, nil
		}
	}
	return nil, &sqstypes.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
}

// CreateQueue returns an existing queue of the name only when the request
// names its tags exactly; otherwise it fails, as AWS does.
func (f *fakeSQS) CreateQueue(_ context.Context, in *sqs.CreateQueueInput, _ ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	name := aws.ToString(in.QueueName)
	f.log.add("CreateQueue %s", name)
	if f.beforeCreate != nil {
		f.beforeCreate(name)
	}
	q, ok := f.queues[name]
	switch {
	case !ok:
		q = f.add(name)
		maps.Copy(q.tags, in.Tags)
	case !maps.Equal(q.tags, in.Tags):
		return nil, &sqstypes.QueueNameExists{Message: aws.String("A queue already exists with the same name and a different value for tags")}
	}
	return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
}

func (f *fakeSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	f.log.add("GetQueueUrl %s", aws.ToString(in.QueueName))
	q, ok := f.queues[aws.ToString(in.QueueName)]
	if !ok {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(q.url)}, nil
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.log.add("GetQueueAttributes %s", aws.ToString(in.QueueUrl))
	q, err := f.byURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		string(sqstypes.QueueAttributeNameQueueArn):                              q.arn,
		string(sqstypes.QueueAttributeNameApproximateNumberOfMessages):           strconv.Itoa(q.visible),
		string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible): strconv.Itoa(q.notVisible),
		string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed):    strconv.Itoa(q.delayed),
	}}, nil
}

func (f *fakeSQS) DeleteQueue(_ context.Context, in *sqs.DeleteQueueInput, _ ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	f.log.add("DeleteQueue %s", aws.ToString(in.QueueUrl))
	q, err := f.byURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	delete(f.queues, q.name)
	return &sqs.DeleteQueueOutput{}, nil
}

func (f *fakeSQS) TagQueue(_ context.Context, in *sqs.TagQueueInput, _ ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	f.log.add("TagQueue %s", aws.ToString(in.QueueUrl))
	q, err := f.byURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	maps.Copy(q.tags, in.Tags)
	return &sqs.TagQueueOutput{}, nil
}

func (f *fakeSQS) UntagQueue(_ context.Context, in *sqs.UntagQueueInput, _ ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error) {
	f.log.add("UntagQueue %s", aws.ToString(in.QueueUrl))
	q, err := f.byURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	for _, k := range in.TagKeys {
		delete(q.tags, k)
	}
	return &sqs.UntagQueueOutput{}, nil
}

func (f *fakeSQS) ListQueueTags(_ context.Context, in *sqs.ListQueueTagsInput, _ ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	f.log.add("ListQueueTags %s", aws.ToString(in.QueueUrl))
	q, err := f.byURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return &sqs.ListQueueTagsOutput{Tags: maps.Clone(q.tags)}, nil
}

// fakeEC2 terminates the instances it knows. Like EC2, a call naming any id
// it does not know fails as a whole with InvalidInstanceID.NotFound; a call
// naming a denied id fails with UnauthorizedOperation; err, when set, fails
// every call.
type fakeEC2 struct {
	log        *callLog
	known      map[string]bool
	denied     map[string]bool
	err        error
	calls      [][]string
	terminated []string
}

func newFakeEC2(log *callLog, known ...string) *fakeEC2 {
	f := &fakeEC2{log: log, known: map[string]bool{}, denied: map[string]bool{}}
	for _, id := range known {
		f.known[id] = true
	}
	return f
}

func (f *fakeEC2) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	ids := slices.Clone(in.InstanceIds)
	if f.log != nil {
		f.log.add("TerminateInstances %s", strings.Join(ids, ","))
	}
	f.calls = append(f.calls, ids)
	if f.err != nil {
		return nil, f.err
	}
	var unknown []string
	for _, id := range ids {
		if !f.known[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return nil, &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound",
			Message: fmt.Sprintf("The instance IDs '%s' do not exist", strings.Join(unknown, ", "))}
	}
	for _, id := range ids {
		if f.denied[id] {
			return nil, &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}
		}
	}
	f.terminated = append(f.terminated, ids...)
	return &ec2.TerminateInstancesOutput{}, nil
}

// sortedTerminated is what the fake terminated, sorted.
func (f *fakeEC2) sortedTerminated() []string {
	out := slices.Clone(f.terminated)
	sort.Strings(out)
	return out
}

// fakeSTS answers GetCallerIdentity as STS does for a role session.
type fakeSTS struct {
	log     *callLog
	account string
	arn     string
	err     error
}

func newFakeSTS(log *callLog) *fakeSTS {
	return &fakeSTS{log: log, account: "123456789012", arn: "arn:aws:sts::123456789012:assumed-role/ci/session"}
}

func (f *fakeSTS) GetCallerIdentity(context.Context, *sts.GetCallerIdentityInput, ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error) {
	f.log.add("GetCallerIdentity")
	if f.err != nil {
		return nil, f.err
	}
	return &sts.GetCallerIdentityOutput{Account: aws.String(f.account), Arn: aws.String(f.arn), UserId: aws.String("AROATEST:session")}, nil
}
