package awsfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	logstypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
)

// captureClient records the body the SDK serialized, and sends nothing.
type captureClient struct{ body *[]byte }

func (c captureClient) Do(r *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(r.Body)
	*c.body = b
	if err == nil {
		err = errWithinLimits
	}
	return nil, err
}

// wire is the document of the request the SDK sends for an input.
func wire(t *testing.T, service string, call func(ctx context.Context, hc aws.HTTPClient) error) map[string]any {
	t.Helper()
	var body []byte
	if err := call(context.Background(), captureClient{&body}); !errors.Is(err, errWithinLimits) {
		t.Fatalf("the SDK did not serialize the request: %v", err)
	}
	if service == "ec2" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			t.Fatal(err)
		}
		delete(form, "Action")
		delete(form, "Version")
		return awslimits.FormDocument(form)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func ec2With(hc aws.HTTPClient) *ec2.Client {
	return ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: nowhere, Credentials: aws.AnonymousCredentials{}, HTTPClient: hc, Retryer: aws.NopRetryer{}})
}

func sqsWith(hc aws.HTTPClient) *sqs.Client {
	return sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: nowhere, Credentials: aws.AnonymousCredentials{}, HTTPClient: hc, Retryer: aws.NopRetryer{}})
}

func tableWith(hc aws.HTTPClient) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: nowhere, Credentials: aws.AnonymousCredentials{}, HTTPClient: hc, Retryer: aws.NopRetryer{}})
}

func logsWith(hc aws.HTTPClient) *cloudwatchlogs.Client {
	return cloudwatchlogs.New(cloudwatchlogs.Options{Region: "us-east-1", BaseEndpoint: nowhere, Credentials: aws.AnonymousCredentials{}, HTTPClient: hc, Retryer: aws.NopRetryer{}})
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": s(pk), "SK": s(sk)}
}

// The fakes read an input as the SDK sends it: for an input of every
// action the fakes implement, shaped as the code under test shapes it,
// Document equals the document of the request the SDK serializes.
func TestDocument_isTheSDKsWireForm(t *testing.T) {
	fleet := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant, ClientToken: aws.String("ec2runners-0123"),
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{
				{SubnetId: aws.String("subnet-1"), InstanceType: "c6i.large"},
				{SubnetId: aws.String("subnet-2"), InstanceRequirements: &ec2types.InstanceRequirementsRequest{
					VCpuCount: &ec2types.VCpuCountRangeRequest{Min: aws.Int32(2), Max: aws.Int32(2)}, MemoryMiB: &ec2types.MemoryMiBRequest{Min: aws.Int32(4096)},
					AllowedInstanceTypes: []string{"c6i.*"}, BurstablePerformance: ec2types.BurstablePerformanceExcluded}},
			},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(3), OnDemandTargetCapacity: aws.Int32(3), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		OnDemandOptions:             &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
			Tags: []ec2types.Tag{{Key: aws.String("ec2runners:pool"), Value: aws.String("p")}, {Key: aws.String("InitialRunId"), Value: aws.String("r")}}}},
	}
	filters := []ec2types.Filter{{Name: aws.String("vcpu-info.default-vcpus"), Values: []string{"2"}}, {Name: aws.String("tag:ec2runners:pool"), Values: []string{"p", "q"}}}
	entries := []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String(`{"id":"i-1"}`), DelaySeconds: 3}, {Id: aws.String("1"), MessageBody: aws.String("x")}}
	cond := &dynamodb.UpdateItemInput{TableName: aws.String("pool"), Key: key("TYPE#INSTANCE", "i-1"),
		UpdateExpression: aws.String("SET #a = :a"), ConditionExpression: aws.String("#a = :b"), ExpressionAttributeNames: map[string]string{"#a": "a"},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: "12"}, ":b": &types.AttributeValueMemberSS{Value: []string{"x", "y"}}},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	item := map[string]types.AttributeValue{"PK": s("AGENT#arn"), "SK": s("RUNNER"), "n": &types.AttributeValueMemberN{Value: "1"}, "ok": &types.AttributeValueMemberBOOL{Value: true},
		"b": &types.AttributeValueMemberB{Value: []byte{1, 2}}, "l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("x")}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": s("v")}}, "null": &types.AttributeValueMemberNULL{Value: true}}
	for _, tc := range []struct {
		service, action string
		in              any
		sdk             func(ctx context.Context, hc aws.HTTPClient) error
	}{
		{"ec2", "CreateFleet", fleet, func(ctx context.Context, hc aws.HTTPClient) error { return sdkErr(ec2With(hc).CreateFleet(ctx, fleet)) }},
		{"ec2", "RunInstances", &ec2.RunInstancesInput{ImageId: aws.String("ami-1"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1), UserData: aws.String("IyE="), TagSpecifications: fleet.TagSpecifications},
			nil},
		{"ec2", "DescribeInstanceTypes", &ec2.DescribeInstanceTypesInput{Filters: filters, MaxResults: aws.Int32(100)}, nil},
		{"ec2", "DescribeInstances", &ec2.DescribeInstancesInput{Filters: filters, NextToken: aws.String("t")}, nil},
		{"ec2", "DescribeLaunchTemplates", &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"lt"}}, nil},
		{"ec2", "DescribeLaunchTemplateVersions", &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String("lt-1"), Versions: []string{"$Latest"}}, nil},
		{"ec2", "DescribeImages", &ec2.DescribeImagesInput{ImageIds: []string{"ami-1"}}, nil},
		{"ec2", "TerminateInstances", &ec2.TerminateInstancesInput{InstanceIds: []string{"i-1", "i-2"}}, nil},
		{"ec2", "StartInstances", &ec2.StartInstancesInput{InstanceIds: []string{"i-1"}}, nil},
		{"ec2", "StopInstances", &ec2.StopInstancesInput{InstanceIds: []string{"i-1"}}, nil},
		{"sqs", "SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: aws.String("q"), Entries: entries}, nil},
		{"sqs", "ReceiveMessage", &sqs.ReceiveMessageInput{QueueUrl: aws.String("q"), MaxNumberOfMessages: 10, VisibilityTimeout: 30, WaitTimeSeconds: 20}, nil},
		{"sqs", "DeleteMessageBatch", &sqs.DeleteMessageBatchInput{QueueUrl: aws.String("q"), Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: aws.String("rh")}}}, nil},
		{"sqs", "ChangeMessageVisibilityBatch", &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String("q"), Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: aws.String("rh"), VisibilityTimeout: 0}}}, nil},
		{"dynamodb", "UpdateItem", cond, nil},
		{"dynamodb", "PutItem", &dynamodb.PutItemInput{TableName: aws.String("pool"), Item: item, ConditionExpression: aws.String("attribute_not_exists(PK)")}, nil},
		{"dynamodb", "GetItem", &dynamodb.GetItemInput{TableName: aws.String("pool"), Key: key("a", "b"), ConsistentRead: aws.Bool(true)}, nil},
		{"dynamodb", "DeleteItem", &dynamodb.DeleteItemInput{TableName: aws.String("pool"), Key: key("a", "b")}, nil},
		{"dynamodb", "Query", &dynamodb.QueryInput{TableName: aws.String("pool"), KeyConditionExpression: aws.String("#pk = :pk"), ExpressionAttributeNames: map[string]string{"#pk": "PK"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s("TYPE#CLAIM")}, ExclusiveStartKey: key("a", "b"), Limit: aws.Int32(5)}, nil},
		{"dynamodb", "BatchGetItem", &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"pool": {Keys: []map[string]types.AttributeValue{key("a", "b")}, ConsistentRead: aws.Bool(true)}}}, nil},
		{"dynamodb", "BatchWriteItem", &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"pool": {{PutRequest: &types.PutRequest{Item: item}}}}}, nil},
		{"dynamodb", "TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String("pool"), Item: item}},
			{Update: &types.Update{TableName: aws.String("pool"), Key: cond.Key, UpdateExpression: cond.UpdateExpression, ConditionExpression: cond.ConditionExpression,
				ExpressionAttributeNames: cond.ExpressionAttributeNames, ExpressionAttributeValues: cond.ExpressionAttributeValues}},
		}}, nil},
		{"sqs", "CreateQueue", &sqs.CreateQueueInput{QueueName: aws.String("pool-large"), Attributes: map[string]string{"VisibilityTimeout": "30"}, Tags: map[string]string{"ec2runners:pool": "pool"}}, nil},
		{"sqs", "GetQueueUrl", &sqs.GetQueueUrlInput{QueueName: aws.String("pool-large")}, nil},
		{"sqs", "GetQueueAttributes", &sqs.GetQueueAttributesInput{QueueUrl: aws.String("q"), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}}, nil},
		{"sqs", "DeleteQueue", &sqs.DeleteQueueInput{QueueUrl: aws.String("q")}, nil},
		{"sqs", "TagQueue", &sqs.TagQueueInput{QueueUrl: aws.String("q"), Tags: map[string]string{"team": "ci"}}, nil},
		{"sqs", "UntagQueue", &sqs.UntagQueueInput{QueueUrl: aws.String("q"), TagKeys: []string{"team"}}, nil},
		{"sqs", "ListQueueTags", &sqs.ListQueueTagsInput{QueueUrl: aws.String("q")}, nil},
		{"dynamodb", "CreateTable", &dynamodb.CreateTableInput{TableName: aws.String("pool"), BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash}}, Tags: []types.Tag{{Key: aws.String("team"), Value: aws.String("ci")}}}, nil},
		{"dynamodb", "DescribeTable", &dynamodb.DescribeTableInput{TableName: aws.String("pool")}, nil},
		{"dynamodb", "DeleteTable", &dynamodb.DeleteTableInput{TableName: aws.String("pool")}, nil},
		{"dynamodb", "DescribeTimeToLive", &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("pool")}, nil},
		{"dynamodb", "UpdateTimeToLive", &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("pool"),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)}}, nil},
		{"dynamodb", "TagResource", &dynamodb.TagResourceInput{ResourceArn: aws.String("arn:aws:dynamodb:eu-west-1:123456789012:table/pool"), Tags: []types.Tag{{Key: aws.String("team"), Value: aws.String("ci")}}}, nil},
		{"dynamodb", "UntagResource", &dynamodb.UntagResourceInput{ResourceArn: aws.String("arn:aws:dynamodb:eu-west-1:123456789012:table/pool"), TagKeys: []string{"team"}}, nil},
		{"dynamodb", "ListTagsOfResource", &dynamodb.ListTagsOfResourceInput{ResourceArn: aws.String("arn:aws:dynamodb:eu-west-1:123456789012:table/pool")}, nil},
		{"logs", "CreateLogStream", &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String("/ec2runners/metrics"), LogStreamName: aws.String("pool")}, nil},
		{"logs", "PutLogEvents", &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String("/ec2runners/metrics"), LogStreamName: aws.String("pool"),
			LogEvents: []logstypes.InputLogEvent{{Message: aws.String(`{"_aws":{}}`), Timestamp: aws.Int64(1700000000000)}, {Message: aws.String("x"), Timestamp: aws.Int64(1700000000001)}}}, nil},
	} {
		t.Run(tc.action, func(t *testing.T) {
			sdk := tc.sdk
			if sdk == nil {
				sdk = sdkCall(tc.service, tc.action, tc.in)
			}
			want := wire(t, tc.service, sdk)
			if got := Document(tc.service, tc.in); !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Errorf("%s %s:\nDocument %s\n     SDK %s", tc.service, tc.action, gj, wj)
			}
		})
	}
}

// sdkCall calls the SDK client method named action with in.
func sdkCall(service, action string, in any) func(ctx context.Context, hc aws.HTTPClient) error {
	return func(ctx context.Context, hc aws.HTTPClient) error {
		var client any
		switch service {
		case "ec2":
			client = ec2With(hc)
		case "sqs":
			client = sqsWith(hc)
		case "logs":
			client = logsWith(hc)
		default:
			client = tableWith(hc)
		}
		out := reflect.ValueOf(client).MethodByName(action).Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(in)})
		err, _ := out[1].Interface().(error)
		return err
	}
}

// fakeRefusal is a call of a fake that breaks a rule, and AWS's answer.
type fakeRefusal struct {
	call          func(ctx context.Context) error
	code, message string
}

// The fakes refuse what AWS refuses, with the SDK's error of AWS's answer,
// for every rule whose actions they implement (TestFakes_refuse fails for
// one without a case).
func TestFakes_refuse(t *testing.T) {
	e := &EC2{Pool: "p"}
	q := NewSQS("q")
	tbl := NewTable("pool")
	logs := NewLogs("/ec2runners/metrics")
	ctx := context.Background()
	put := func(events ...logstypes.InputLogEvent) func(context.Context) error {
		return func(ctx context.Context) error {
			return sdkErr(logs.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String("/ec2runners/metrics"), LogStreamName: aws.String("pool"), LogEvents: events}))
		}
	}
	event := func(ms int64, msg string) logstypes.InputLogEvent {
		return logstypes.InputLogEvent{Timestamp: aws.Int64(ms), Message: aws.String(msg)}
	}
	fleet := func(mod func(*ec2.CreateFleetInput)) func(context.Context) error {
		return func(ctx context.Context) error {
			in := &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant, ClientToken: aws.String("t"),
				LaunchTemplateConfigs:       []ec2types.FleetLaunchTemplateConfigRequest{{Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "c6i.large"}}}},
				TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1)}}
			mod(in)
			return sdkErr(e.CreateFleet(ctx, in))
		}
	}
	manyTags := func(n int) []ec2types.Tag {
		var out []ec2types.Tag
		for i := range n {
			out = append(out, ec2types.Tag{Key: aws.String(fmt.Sprint("k", i)), Value: aws.String("v")})
		}
		return out
	}
	batch := func(entries ...sqstypes.SendMessageBatchRequestEntry) func(context.Context) error {
		return func(ctx context.Context) error {
			return sdkErr(q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String("q"), Entries: entries}))
		}
	}
	entry := func(id, body string) sqstypes.SendMessageBatchRequestEntry {
		return sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(body)}
	}
	keys := func(n int) []map[string]types.AttributeValue {
		var out []map[string]types.AttributeValue
		for i := range n {
			out = append(out, key("TYPE#X", strconv.Itoa(i)))
		}
		return out
	}
	puts := func(n int) []types.WriteRequest {
		var out []types.WriteRequest
		for _, k := range keys(n) {
			out = append(out, types.WriteRequest{PutRequest: &types.PutRequest{Item: k}})
		}
		return out
	}
	var eleven []sqstypes.SendMessageBatchRequestEntry
	for i := range 11 {
		eleven = append(eleven, entry(strconv.Itoa(i), "x"))
	}
	cases := map[string][]fakeRefusal{
		"ec2-user-data": {{func(ctx context.Context) error {
			return sdkErr(e.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-1"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1), UserData: aws.String("#!/bin/sh\n")}))
		}, "InvalidParameterValue", "Invalid BASE64 encoding of user data"}},
		"ec2-tags-per-resource": {{fleet(func(in *ec2.CreateFleetInput) {
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: manyTags(51)}}
		}), "TagLimitExceeded", "The maximum number of tags for a resource is 50; the request gives one 51 (the test front's wording)."}},
		"ec2-tag-length": {{fleet(func(in *ec2.CreateFleetInput) {
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String(strings.Repeat("k", 129)), Value: aws.String("v")}}}}
		}), "InvalidParameterValue", "Tag key exceeds the maximum length of 128 characters"}},
		"ec2-tag-aws-prefix": {{fleet(func(in *ec2.CreateFleetInput) {
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String("aws:cost"), Value: aws.String("v")}}}}
		}), "InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use"}},
		"ec2-fleet-tag-resource-types": {{fleet(func(in *ec2.CreateFleetInput) {
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeVolume, Tags: manyTags(1)}}
		}), "InvalidParameterValue", `A fleet of type instant cannot tag resource type "volume" at launch (the test front's wording).`}},
		"ec2-client-token": {{fleet(func(in *ec2.CreateFleetInput) { in.ClientToken = aws.String("ec2runners-é") }),
			"InvalidParameterValue", "Value (ec2runners-é) for parameter clientToken is invalid: at most 64 ASCII characters (the test front's wording)."}},
		"ec2-filter-values": {{func(ctx context.Context) error {
			return sdkErr(e.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: make([]string, 201)}}}))
		}, "FilterLimitExceeded", "The maximum number of filter values specified on a single call is 200"}},
		"ec2-describe-page-size": {{func(ctx context.Context) error {
			return sdkErr(e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-1"}, MaxResults: aws.Int32(10)}))
		}, "InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults"}},
		"ec2-terminate-ids": {{func(ctx context.Context) error {
			return sdkErr(e.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: make([]string, 1001)}))
		}, "InvalidParameterValue", "TerminateInstances takes up to 1000 instance IDs; the request names 1001 (the test front's wording)."}},
		"sqs-batch-entries": {
			{batch(eleven...), "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent 11."},
			{batch(entry("a", "x"), entry("a", "y")), "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id a repeated."},
			{batch(entry("i-0123.4", "x")), "AWS.SimpleQueueService.InvalidBatchEntryId",
				"A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long."},
			{func(ctx context.Context) error {
				return sdkErr(q.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String("q"), Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{}}))
			}, "AWS.SimpleQueueService.EmptyBatchRequest", "There should be at least one ChangeMessageVisibilityBatchRequestEntry in the request."},
		},
		"sqs-message-size": {{batch(entry("a", strings.Repeat("x", 1<<20)), entry("b", "y")), "AWS.SimpleQueueService.BatchRequestTooLong", "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes."}},
		"sqs-delay-seconds": {{batch(sqstypes.SendMessageBatchRequestEntry{Id: aws.String("a"), MessageBody: aws.String("x"), DelaySeconds: -1}),
			"InvalidParameterValue", "Value -1 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900."}},
		"sqs-receive": {{func(ctx context.Context) error {
			return sdkErr(q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String("q"), MaxNumberOfMessages: 25}))
		}, "InvalidParameterValue", "Value 25 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided."}},
		"sqs-visibility-timeout": {{func(ctx context.Context) error {
			return sdkErr(q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String("q"), MaxNumberOfMessages: 1, VisibilityTimeout: 86400}))
		}, "InvalidParameterValue", "Value 86400 for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]."}},
		"sqs-queue-name": {{func(ctx context.Context) error {
			return sdkErr(q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("pool.large")}))
		}, "InvalidParameterValue", "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"}},
		"sqs-queue-attributes": {{func(ctx context.Context) error {
			return sdkErr(q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("pool-large"), Attributes: map[string]string{"DelaySeconds": "901"}}))
		}, "InvalidAttributeValue", "Invalid value for the parameter DelaySeconds."}},
		"sqs-tags": {{func(ctx context.Context) error {
			return sdkErr(q.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String("q"), Tags: map[string]string{"aws:cost": "x"}}))
		}, "InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use (the test front's wording)."}},
		"dynamodb-tags": {{func(ctx context.Context) error {
			return sdkErr(tbl.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: aws.String(tbl.ARN()), Tags: []types.Tag{{Key: aws.String(strings.Repeat("k", 129)), Value: aws.String("v")}}}))
		}, "ValidationException", "Tag keys must be between 1 and 128 characters in length (the test front's wording)."}},
		"dynamodb-table-name": {{func(ctx context.Context) error {
			return sdkErr(tbl.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("p"), Key: key("a", "b")}))
		}, "ValidationException", "1 validation error detected: Value 'p' at 'tableName' failed to satisfy constraint: Member must have length greater than or equal to 3"}},
		"dynamodb-item-size": {{func(ctx context.Context) error {
			it := key("a", "b")
			it["big"] = s(strings.Repeat("x", 409600))
			return sdkErr(tbl.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"pool": {{PutRequest: &types.PutRequest{Item: it}}}}}))
		}, "ValidationException", "Item size has exceeded the maximum allowed size"}},
		"dynamodb-key": {{func(ctx context.Context) error {
			return sdkErr(tbl.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("pool"), Item: key("", "b")}))
		}, "ValidationException", "One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: PK"}},
		"dynamodb-empty-set": {{func(ctx context.Context) error {
			return sdkErr(tbl.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("pool"), Key: key("TYPE#LEASE", "l"), UpdateExpression: aws.String("ADD #ids :ids"),
				ExpressionAttributeNames: map[string]string{"#ids": "ids"}, ExpressionAttributeValues: map[string]types.AttributeValue{":ids": &types.AttributeValueMemberSS{}}}))
		}, "ValidationException", "ExpressionAttributeValues contains invalid value: One or more parameter values were invalid: An string set  may not be empty for key :ids"}},
		"dynamodb-expressions": {{func(ctx context.Context) error {
			return sdkErr(tbl.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("pool"), Item: key("a", "b"), ConditionExpression: aws.String("attribute_not_exists(PK)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":unused": s("x")}}))
		}, "ValidationException", "Value provided in ExpressionAttributeValues unused in expressions: keys: {:unused}"}},
		"dynamodb-transact-write": {{func(ctx context.Context) error {
			put := types.TransactWriteItem{Put: &types.Put{TableName: aws.String("pool"), Item: key("a", "b")}}
			return sdkErr(tbl.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put, put}}))
		}, "ValidationException", "Transaction request cannot include multiple operations on one item"}},
		"dynamodb-batch-get": {{func(ctx context.Context) error {
			return sdkErr(tbl.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"pool": {Keys: []map[string]types.AttributeValue{key("a", "b"), key("a", "b")}}}}))
		}, "ValidationException", "Provided list of item keys contains duplicates"}, {func(ctx context.Context) error {
			return sdkErr(tbl.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"pool": {Keys: keys(60)}, "other": {Keys: keys(41)}}}))
		}, "ValidationException", "Too many items requested for the BatchGetItem call."}},
		"dynamodb-batch-write": {{func(ctx context.Context) error {
			return sdkErr(tbl.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"pool": {}}}))
		}, "ValidationException", "1 validation error detected: Value '{pool=[]}' at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: " +
			"[Member must have length less than or equal to 25, Member must have length greater than or equal to 1]"}, {func(ctx context.Context) error {
			return sdkErr(tbl.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"pool": puts(13), "other": puts(13)}}))
		}, "ValidationException", "Too many items requested for the BatchWriteItem call"}},
		"logs-names": {{func(ctx context.Context) error {
			return sdkErr(logs.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String("/ec2runners/metrics"), LogStreamName: aws.String("pool:a")}))
		}, "InvalidParameterException", "1 validation error detected: Value 'pool:a' at 'logStreamName' failed to satisfy constraint: Member must satisfy regular expression pattern: [^:*]*"}},
		"logs-batch-events": {{put(slices.Repeat([]logstypes.InputLogEvent{event(1, "x")}, 10001)...), "InvalidParameterException",
			"1 validation error detected: Value at 'logEvents' failed to satisfy constraint: Member must have length less than or equal to 10000 (the test front's wording)"}},
		"logs-batch-size": {{put(event(1, strings.Repeat("x", 600000)), event(2, strings.Repeat("x", 600000))), "InvalidParameterException",
			"Upload too large: 1200052 bytes exceeds limit of 1048576"}},
		"logs-event-order": {{put(event(2, "a"), event(1, "b")), "InvalidParameterException", "Log events in a single PutLogEvents request must be in chronological order."}},
	}
	fakes := []any{e, q, tbl, logs}
	for _, rule := range awslimits.Rules {
		implemented := false
		for _, a := range rule.Actions {
			for _, f := range fakes {
				_, ok := reflect.TypeOf(f).MethodByName(a)
				implemented = implemented || ok && strings.HasPrefix(reflect.TypeOf(f).Elem().Name(), map[string]string{"ec2": "EC2", "sqs": "SQS", "dynamodb": "Table", "logs": "Logs"}[rule.Service])
			}
		}
		tcs, ok := cases[rule.ID]
		ok = ok || rule.Entries != nil // TestFakes_entryFailures
		if implemented && !ok {
			t.Errorf("rule %s: the fakes implement one of its actions %v, but it has no case here", rule.ID, rule.Actions)
		}
		for i, tc := range tcs {
			wantRefusal(t, fmt.Sprintf("%s case %d", rule.ID, i+1), tc.call(ctx), tc.code, tc.message)
		}
	}
	if len(e.Fleets) != 0 || len(e.Runs) != 0 || len(e.Terminated) != 0 || len(q.Sends) != 0 || len(tbl.Calls) != 0 || logs.Calls("PutLogEvents")+logs.Calls("CreateLogStream") != 0 {
		t.Errorf("refused calls were carried out or recorded: %d fleets, %d runs, %v terminated, %d sends, %d table calls, %d log calls",
			len(e.Fleets), len(e.Runs), e.Terminated, len(q.Sends), len(tbl.Calls), logs.Calls("PutLogEvents")+logs.Calls("CreateLogStream"))
	}
}

// An update that grows an item past 400 KB is refused: the size after the
// update, which only the table knows.
func TestTable_updateItemSize(t *testing.T) {
	tbl := NewTable("pool")
	it := key("TYPE#LEASE", "l")
	it["pad"] = s(strings.Repeat("x", 409600-30))
	tbl.Put(it)
	_, err := tbl.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String("pool"), Key: key("TYPE#LEASE", "l"), UpdateExpression: aws.String("ADD #ids :ids"),
		ExpressionAttributeNames: map[string]string{"#ids": "ids"}, ExpressionAttributeValues: map[string]types.AttributeValue{":ids": &types.AttributeValueMemberSS{Value: []string{strings.Repeat("i", 30)}}}})
	var apiErr smithy.APIError
	want := awslimits.ItemSizeToUpdate
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != want.Code || apiErr.ErrorMessage() != want.Message {
		t.Errorf("an update past 400 KB: %v, want %s: %s", err, want.Code, want.Message)
	}
}

// A batch's entries that SQS fails alone are failed alone: the call
// succeeds, the others are sent, and the answer lists the failed ones with
// AWS's code and message, the sender at fault.
func TestFakes_entryFailures(t *testing.T) {
	q := NewSQS("q")
	ctx := context.Background()
	entry := func(id, body string) sqstypes.SendMessageBatchRequestEntry {
		return sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(body)}
	}
	out, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String("q"), Entries: []sqstypes.SendMessageBatchRequestEntry{
		entry("a", "ok"), entry("b", "\x1b[0m"), entry("c", "fine\t\n"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	const message = "Invalid binary character '#x1B' was found in the message body, the set of allowed characters is #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]."
	if len(out.Failed) != 1 || aws.ToString(out.Failed[0].Id) != "b" || aws.ToString(out.Failed[0].Code) != "InvalidMessageContents" ||
		aws.ToString(out.Failed[0].Message) != message || !out.Failed[0].SenderFault {
		t.Errorf("failed entries %+v, want b alone, InvalidMessageContents: %s, the sender's fault", out.Failed, message)
	}
	var sent []string
	for _, s := range out.Successful {
		sent = append(sent, aws.ToString(s.Id))
	}
	if !slices.Equal(sent, []string{"a", "c"}) || !slices.Equal(q.Bodies("q"), []string{"ok", "fine\t\n"}) {
		t.Errorf("sent %v, queue %q: want a and c sent, their bodies queued", sent, q.Bodies("q"))
	}
}

// wantRefusal checks err is AWS's refusal as the SDK reports it: HTTP 400
// with code and message.
func wantRefusal(t *testing.T, what string, err error, code, message string) {
	t.Helper()
	var apiErr smithy.APIError
	var httpErr *awshttp.ResponseError
	if !errors.As(err, &apiErr) || !errors.As(err, &httpErr) {
		t.Errorf("%s: %v, want AWS's refusal %s: %s", what, err, code, message)
		return
	}
	if status := httpErr.HTTPStatusCode(); status != http.StatusBadRequest || apiErr.ErrorCode() != code || apiErr.ErrorMessage() != message {
		t.Errorf("%s: HTTP %d %s: %q, want HTTP 400 %s: %q", what, status, apiErr.ErrorCode(), apiErr.ErrorMessage(), code, message)
	}
}
