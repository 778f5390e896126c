package emulator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	logstypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// The front refuses what AWS refuses, one case per rule of
// internal/awslimits (TestFrontRules fails for a rule without one): the
// real SDK client's call, and AWS's answer as the SDK reports it (HTTP
// status, error code, message), written out here as AWS gives it, not
// taken from the rules. A message given as a regexp is one whose middle
// AWS prints from the request (a Java dump of a list), matched as the
// DynamoDB conformance suite matches it. The two user data rules have
// tests of their own (front_test.go), with the limit itself accepted.

// clients are SDK clients of the front.
type clients struct {
	ec2  *ec2.Client
	sqs  *sqs.Client
	ddb  *dynamodb.Client
	logs *cloudwatchlogs.Client
	ssm  *ssm.Client
	sm   *secretsmanager.Client
}

// refusal is a rule's case: a call that breaks it and AWS's answer.
type refusal struct {
	call    func(ctx context.Context, c clients) error
	code    string
	message string // exact, or a regexp when it starts with ^
}

const (
	queueURL = "http://sqs.us-east-1.localhost.localstack.cloud:4566/000000000000/front-rules"
	table    = "front-rules"
)

func ddbS(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }

func ddbKey(pk, sk string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"PK": ddbS(pk), "SK": ddbS(sk)}
}

func tags(n int, key func(i int) string) []ec2types.Tag {
	var out []ec2types.Tag
	for i := range n {
		out = append(out, ec2types.Tag{Key: aws.String(key(i)), Value: aws.String("v")})
	}
	return out
}

func fleet(mod func(*ec2.CreateFleetInput)) func(ctx context.Context, c clients) error {
	return func(ctx context.Context, c clients) error {
		in := &ec2.CreateFleetInput{
			Type:                        ec2types.FleetTypeInstant,
			LaunchTemplateConfigs:       []ec2types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("front-rules"), Version: aws.String("$Latest")}}},
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		}
		mod(in)
		_, err := c.ec2.CreateFleet(ctx, in)
		return err
	}
}

func sendBatch(entries []sqstypes.SendMessageBatchRequestEntry) func(ctx context.Context, c clients) error {
	return func(ctx context.Context, c clients) error {
		_, err := c.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		return err
	}
}

func entries(n int, body string) []sqstypes.SendMessageBatchRequestEntry {
	var out []sqstypes.SendMessageBatchRequestEntry
	for i := range n {
		out = append(out, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body)})
	}
	return out
}

func putLogs(events []logstypes.InputLogEvent) func(ctx context.Context, c clients) error {
	return func(ctx context.Context, c clients) error {
		_, err := c.logs.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String("/front-rules"), LogStreamName: aws.String("s"), LogEvents: events})
		return err
	}
}

func logEvents(n int, message string, step time.Duration) []logstypes.InputLogEvent {
	start := time.Now().Add(-25 * time.Hour)
	var out []logstypes.InputLogEvent
	for i := range n {
		out = append(out, logstypes.InputLogEvent{Message: aws.String(message), Timestamp: aws.Int64(start.Add(time.Duration(i) * step).UnixMilli())})
	}
	return out
}

func puts(n int) []ddbtypes.TransactWriteItem {
	var out []ddbtypes.TransactWriteItem
	for i := range n {
		out = append(out, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(table), Item: ddbKey("TYPE#X", strconv.Itoa(i))}})
	}
	return out
}

// frontRefusals are the cases, by rule.
var frontRefusals = map[string][]refusal{
	"ec2-tags-per-resource": {{
		call: fleet(func(in *ec2.CreateFleetInput) {
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags(51, func(i int) string { return fmt.Sprint("k", i) })}}
		}),
		code: "TagLimitExceeded", message: "The maximum number of tags for a resource is 50; the request gives one 51 (the test front's wording).",
	}},
	"ec2-tag-length": {{
		call: fleet(func(in *ec2.CreateFleetInput) {
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
				Tags: []ec2types.Tag{{Key: aws.String("k"), Value: aws.String(strings.Repeat("v", 257))}}}}
		}),
		code: "InvalidParameterValue", message: "Tag value exceeds the maximum length of 256 characters",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-0123456789abcdef0"}, Tags: tags(1, func(int) string { return strings.Repeat("k", 129) })})
			return err
		},
		code: "InvalidParameterValue", message: "Tag key exceeds the maximum length of 128 characters",
	}},
	"ec2-tag-aws-prefix": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
				TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags(1, func(int) string { return "aws:x" })}}})
			return err
		},
		code: "InvalidParameterValue", message: "Tag keys starting with 'aws:' are reserved for internal use",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-0123456789abcdef0"}, Tags: tags(1, func(int) string { return "AWS:autoscaling:groupName" })})
			return err
		},
		code: "InvalidParameterValue", message: "Value ( AWS:autoscaling:groupName ) for parameter key is invalid. Tag keys starting with 'aws:' are reserved for internal use",
	}},
	"ec2-fleet-tag-resource-types": {{
		call: fleet(func(in *ec2.CreateFleetInput) {
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeVolume, Tags: tags(1, func(int) string { return "k" })}}
		}),
		code: "InvalidParameterValue", message: `A fleet of type instant cannot tag resource type "volume" at launch (the test front's wording).`,
	}},
	"ec2-client-token": {{
		call: fleet(func(in *ec2.CreateFleetInput) { in.ClientToken = aws.String(strings.Repeat("t", 65)) }),
		code: "InvalidParameterValue", message: "Value (" + strings.Repeat("t", 65) + ") for parameter clientToken is invalid: at most 64 ASCII characters (the test front's wording).",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("front-rules"), ClientToken: aws.String(strings.Repeat("t", 129)),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{InstanceType: ec2types.InstanceTypeT3Micro}})
			return err
		},
		code: "InvalidParameterValue", message: "Value (" + strings.Repeat("t", 129) + ") for parameter clientToken is invalid: at most 128 ASCII characters (the test front's wording).",
	}},
	"ec2-filter-values": {{
		call: func(ctx context.Context, c clients) error {
			ids := make([]string, 201)
			for i := range ids {
				ids[i] = fmt.Sprintf("i-%017x", i)
			}
			_, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: ids}}})
			return err
		},
		code: "FilterLimitExceeded", message: "The maximum number of filter values specified on a single call is 200",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:InitialRunId"), Values: []string{strings.Repeat("r", 256)}}}})
			return err
		},
		code: "FilterLimitExceeded", message: "The maximum length for a filter value is 255 characters",
	}},
	"ec2-describe-page-size": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}, MaxResults: aws.Int32(5)})
			return err
		},
		code: "InvalidParameterCombination", message: "The parameter instancesSet cannot be used with the parameter maxResults",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1)})
			return err
		},
		code: "InvalidParameterValue", message: "Value ( 1 ) for parameter maxResults is invalid. Expecting a value greater than 5.",
	}},
	"ec2-terminate-ids": {{
		call: func(ctx context.Context, c clients) error {
			ids := make([]string, 1001)
			for i := range ids {
				ids[i] = fmt.Sprintf("i-%017x", i)
			}
			_, err := c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
			return err
		},
		code: "InvalidParameterValue", message: "TerminateInstances takes up to 1000 instance IDs; the request names 1001 (the test front's wording).",
	}},
	"sqs-batch-entries": {{
		call: sendBatch(entries(11, "x")),
		code: "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", message: "Maximum number of entries per request are 10. You have sent 11.",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: []sqstypes.DeleteMessageBatchRequestEntry{}})
			return err
		},
		code: "AWS.SimpleQueueService.EmptyBatchRequest", message: "There should be at least one DeleteMessageBatchRequestEntry in the request.",
	}, {
		call: sendBatch([]sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("id1"), MessageBody: aws.String("a")}, {Id: aws.String("id1"), MessageBody: aws.String("b")}}),
		code: "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", message: "Id id1 repeated.",
	}, {
		call: sendBatch([]sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("i-0123.4"), MessageBody: aws.String("a")}}),
		code: "AWS.SimpleQueueService.InvalidBatchEntryId", message: "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.",
	}},
	"sqs-message-size": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(strings.Repeat("x", 1<<20+1))})
			return err
		},
		code: "InvalidParameterValue", message: "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes.",
	}, {
		call: sendBatch(entries(10, strings.Repeat("x", 104858))),
		code: "AWS.SimpleQueueService.BatchRequestTooLong", message: "Batch requests cannot be longer than 1048576 bytes. You have sent 1048580 bytes.",
	}},
	// A batch's entries fail alone: TestFrontRules_batchEntryFailures.
	"sqs-message-characters": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("{\"id\":\"\x01\"}")})
			return err
		},
		code:    "InvalidMessageContents",
		message: "Invalid binary character '#x1' was found in the message body, the set of allowed characters is #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF].",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("")})
			return err
		},
		code: "MissingParameter", message: "The request must contain the parameter MessageBody.",
	}},
	"sqs-delay-seconds": {{
		call: sendBatch([]sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("a"), MessageBody: aws.String("x"), DelaySeconds: 1000}}),
		code: "InvalidParameterValue", message: "Value 1000 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.",
	}},
	"sqs-receive": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 11})
			return err
		},
		code: "InvalidParameterValue", message: "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), WaitTimeSeconds: 21})
			return err
		},
		code: "InvalidParameterValue", message: "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.",
	}},
	"sqs-visibility-timeout": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queueURL),
				Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("a"), ReceiptHandle: aws.String("rh"), VisibilityTimeout: 43201}}})
			return err
		},
		code: "InvalidParameterValue", message: "Value 43201 for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds].",
	}},
	"sqs-queue-name": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(strings.Repeat("q", 81))})
			return err
		},
		code: "InvalidParameterValue", message: "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
	}},
	"sqs-queue-attributes": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("front-rules"), Attributes: map[string]string{"DelaySeconds": "901"}})
			return err
		},
		code: "InvalidAttributeValue", message: "Invalid value for the parameter DelaySeconds.",
	}},
	"sqs-tags": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.sqs.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(queueURL), Tags: map[string]string{"aws:x": "v"}})
			return err
		},
		code: "InvalidParameterValue", message: "Tag keys starting with 'aws:' are reserved for internal use (the test front's wording).",
	}},
	"dynamodb-table-name": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("ab")})
			return err
		},
		code: "ValidationException", message: "1 validation error detected: Value 'ab' at 'tableName' failed to satisfy constraint: Member must have length greater than or equal to 3",
	}},
	"dynamodb-item-size": {{
		call: func(ctx context.Context, c clients) error {
			item := ddbKey("TYPE#X", "1") // 2+6 + 2+1 bytes
			item["v"] = ddbS(strings.Repeat("x", 409600-11-1+1))
			_, err := c.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
			return err
		},
		code: "ValidationException", message: "Item size has exceeded the maximum allowed size",
	}},
	"dynamodb-key": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: ddbKey("TYPE#X", "")})
			return err
		},
		code: "ValidationException", message: "One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: SK",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: ddbKey(strings.Repeat("p", 2049), "1")})
			return err
		},
		code: "ValidationException", message: "One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of2048 bytes",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: ddbKey("TYPE#X", strings.Repeat("s", 1025))})
			return err
		},
		code: "ValidationException", message: "One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of 1024 bytes",
	}},
	"dynamodb-empty-set": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: ddbKey("TYPE#LEASE", "x"),
				UpdateExpression: aws.String("DELETE #ids :ids"), ExpressionAttributeNames: map[string]string{"#ids": "ids"},
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":ids": &ddbtypes.AttributeValueMemberSS{Value: []string{}}}})
			return err
		},
		code: "ValidationException", message: "ExpressionAttributeValues contains invalid value: One or more parameter values were invalid: An string set  may not be empty for key :ids",
	}, {
		call: func(ctx context.Context, c clients) error {
			item := ddbKey("TYPE#LEASE", "x")
			item["ids"] = &ddbtypes.AttributeValueMemberSS{Value: []string{}}
			_, err := c.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
			return err
		},
		code: "ValidationException", message: "One or more parameter values were invalid: An string set  may not be empty",
	}},
	"dynamodb-expressions": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: ddbKey("TYPE#X", "1"),
				UpdateExpression: aws.String("SET #a = :a"), ExpressionAttributeNames: map[string]string{"#a": "a", "#unused": "u"},
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":a": ddbS("x")}})
			return err
		},
		code: "ValidationException", message: "Value provided in ExpressionAttributeNames unused in expressions: keys: {#unused}",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: ddbKey("TYPE#X", "1"),
				ConditionExpression: aws.String("#missing = :v"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": ddbS("x")}})
			return err
		},
		code: "ValidationException", message: "Invalid ConditionExpression: An expression attribute name used in the document path is not defined; attribute name: #missing",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("PK = :pk"),
				FilterExpression: aws.String("attribute_exists(x)" + strings.Repeat(" ", 4096)), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": ddbS("TYPE#X")}})
			return err
		},
		code: "ValidationException", message: "Invalid FilterExpression: Expression size has exceeded the maximum allowed size; expression size: 4115",
	}},
	"dynamodb-transact-write": {{
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(101)})
			return err
		},
		code:    "ValidationException",
		message: `^1 validation error detected: Value '\[.+\]' at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100$`,
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Put: &ddbtypes.Put{TableName: aws.String(table), Item: ddbKey("TYPE#X", "1")}},
				{Update: &ddbtypes.Update{TableName: aws.String(table), Key: ddbKey("TYPE#X", "1"), UpdateExpression: aws.String("SET #a = :a"),
					ExpressionAttributeNames: map[string]string{"#a": "a"}, ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":a": ddbS("x")}}},
			}})
			return err
		},
		code: "ValidationException", message: "Transaction request cannot include multiple operations on one item",
	}},
	"dynamodb-batch-get": {{
		call: func(ctx context.Context, c clients) error {
			var keys []map[string]ddbtypes.AttributeValue
			for i := range 101 {
				keys = append(keys, ddbKey("TYPE#X", strconv.Itoa(i)))
			}
			_, err := c.ddb.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{table: {Keys: keys}}})
			return err
		},
		code: "ValidationException", message: "1 validation error detected: Value at 'RequestItems.front-rules.member.Keys' failed to satisfy constraint: Member must have length less than or equal to 100",
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.ddb.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{table: {Keys: []map[string]ddbtypes.AttributeValue{ddbKey("TYPE#X", "1"), ddbKey("TYPE#X", "1")}}}})
			return err
		},
		code: "ValidationException", message: "Provided list of item keys contains duplicates",
	}, {
		call: func(ctx context.Context, c clients) error {
			var a, b []map[string]ddbtypes.AttributeValue
			for i := range 60 {
				a = append(a, ddbKey("TYPE#X", strconv.Itoa(i)))
				b = append(b, ddbKey("TYPE#Y", strconv.Itoa(i)))
			}
			_, err := c.ddb.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{table: {Keys: a}, table + "-b": {Keys: b}}})
			return err
		},
		code: "ValidationException", message: "Too many items requested for the BatchGetItem call.",
	}},
	"dynamodb-batch-write": {{
		call: func(ctx context.Context, c clients) error {
			var writes []ddbtypes.WriteRequest
			for i := range 26 {
				writes = append(writes, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: ddbKey("TYPE#X", strconv.Itoa(i))}})
			}
			_, err := c.ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{table: writes}})
			return err
		},
		code: "ValidationException",
		message: `^1 validation error detected: Value '\{front-rules=\[.+\]\}' at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: ` +
			`\[Member must have length less than or equal to 25, Member must have length greater than or equal to 1\]$`,
	}, {
		call: func(ctx context.Context, c clients) error {
			var a, b []ddbtypes.WriteRequest
			for i := range 13 {
				a = append(a, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: ddbKey("TYPE#X", strconv.Itoa(i))}})
				b = append(b, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: ddbKey("TYPE#Y", strconv.Itoa(i))}})
			}
			_, err := c.ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{table: a, table + "-b": b}})
			return err
		},
		code: "ValidationException", message: "Too many items requested for the BatchWriteItem call",
	}},
	"dynamodb-tags": {{
		call: func(ctx context.Context, c clients) error {
			var tags []ddbtypes.Tag
			for i := range 51 {
				tags = append(tags, ddbtypes.Tag{Key: aws.String(fmt.Sprint("k", i)), Value: aws.String("v")})
			}
			_, err := c.ddb.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: aws.String("arn:aws:dynamodb:us-east-1:000000000000:table/front-rules"), Tags: tags})
			return err
		},
		code: "ValidationException", message: "A resource takes at most 50 tags; the request gives 51 (the test front's wording).",
	}},
}

func init() {
	frontRefusals["logs-names"] = []refusal{{
		call: func(ctx context.Context, c clients) error {
			_, err := c.logs.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String("bad:name")})
			return err
		},
		code: "InvalidParameterException", message: `1 validation error detected: Value 'bad:name' at 'logGroupName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\.\-_/#A-Za-z0-9]+`,
	}, {
		call: func(ctx context.Context, c clients) error {
			_, err := c.logs.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String("/front-rules"), LogStreamName: aws.String(strings.Repeat("s", 513))})
			return err
		},
		code: "InvalidParameterException", message: "1 validation error detected: Value '" + strings.Repeat("s", 513) + "' at 'logStreamName' failed to satisfy constraint: Member must have length less than or equal to 512",
	}}
	frontRefusals["logs-batch-events"] = []refusal{{
		call: putLogs(logEvents(10001, "x", time.Millisecond)),
		code: "InvalidParameterException", message: "1 validation error detected: Value at 'logEvents' failed to satisfy constraint: Member must have length less than or equal to 10000 (the test front's wording)",
	}, {
		call: putLogs([]logstypes.InputLogEvent{}),
		code: "InvalidParameterException", message: "1 validation error detected: Value at 'logEvents' failed to satisfy constraint: Member must have length greater than or equal to 1 (the test front's wording)",
	}}
	frontRefusals["logs-batch-size"] = []refusal{{
		call: putLogs(logEvents(1, strings.Repeat("x", 1<<20-25), time.Millisecond)),
		code: "InvalidParameterException", message: "Log event too large: 1048577 bytes exceeds limit of 1048576",
	}, {
		call: putLogs(logEvents(2, strings.Repeat("x", 600000), time.Millisecond)),
		code: "InvalidParameterException", message: "Upload too large: 1200052 bytes exceeds limit of 1048576",
	}}
	later, earlier := logEvents(2, "x", time.Second)[1], logEvents(1, "x", time.Second)[0]
	frontRefusals["logs-event-order"] = []refusal{{
		call: putLogs([]logstypes.InputLogEvent{later, earlier}),
		code: "InvalidParameterException", message: "Log events in a single PutLogEvents request must be in chronological order.",
	}, {
		call: putLogs(logEvents(2, "x", 24*time.Hour+time.Millisecond)),
		code: "InvalidParameterException", message: "The batch of log events in a single PutLogEvents request cannot span more than 24 hours.",
	}}
	frontRefusals["ssm-parameter-name"] = []refusal{{
		call: getParameter("/ec2runners//github"),
		code: "ValidationException", message: awsSSMNameMessage,
	}, {
		call: getParameter("ec2runners/pool/github"),
		code: "ValidationException", message: awsSSMNameMessage,
	}}
	long := "/" + strings.Repeat("p", 2048)
	frontRefusals["ssm-parameter-name-length"] = []refusal{{
		call: getParameter(long),
		code: "ValidationException", message: "1 validation error detected: Value '" + long + "' at 'name' failed to satisfy constraint: Member must have length less than or equal to 2048 (the test front's wording).",
	}}
	frontRefusals["secretsmanager-secret-id"] = []refusal{{
		call: getSecretValue("ec2runners/pool#github"),
		code: "ValidationException", message: "Invalid name. Must be a valid name containing alphanumeric characters, or any of the following: -/_+=.@!",
	}}
	longID := strings.Repeat("s", 2049)
	frontRefusals["secretsmanager-secret-id-length"] = []refusal{{
		call: getSecretValue(longID),
		code: "ValidationException", message: "1 validation error detected: Value '" + longID + "' at 'secretId' failed to satisfy constraint: Member must have length less than or equal to 2048 (the test front's wording).",
	}, {
		call: getSecretValue(""),
		code: "ValidationException", message: "1 validation error detected: Value '' at 'secretId' failed to satisfy constraint: Member must have length greater than or equal to 1 (the test front's wording).",
	}}
}

// awsSSMNameMessage is SSM's answer to a malformed parameter name.
const awsSSMNameMessage = `Parameter name: can't be prefixed with "ssm" (case-insensitive). If formed as a path, it can consist of sub-paths divided by slash symbol; ` +
	`each sub-path can be formed as a mix of letters, numbers and the following 3 symbols .-_`

func getParameter(name string) func(ctx context.Context, c clients) error {
	return func(ctx context.Context, c clients) error {
		_, err := c.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
		return err
	}
}

func getSecretValue(id string) func(ctx context.Context, c clients) error {
	return func(ctx context.Context, c clients) error {
		_, err := c.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
		return err
	}
}

// ownTests are the rules with tests of their own (front_test.go).
var ownTests = map[string]string{"ec2-user-data": "TestFront_RunInstancesUserData", "ec2-launch-template-user-data": "TestFront_LaunchTemplateUserData"}

func TestFrontRules(t *testing.T) {
	ctx, c := frontClients(t)
	for _, rule := range awslimits.Rules {
		cases, ok := frontRefusals[rule.ID]
		if !ok && ownTests[rule.ID] == "" {
			t.Errorf("rule %s: no case here (frontRefusals) nor a test of its own (ownTests)", rule.ID)
			continue
		}
		t.Run(rule.ID, func(t *testing.T) {
			for i, tc := range cases {
				wantAWSRefusal(t, fmt.Sprintf("%s case %d", rule.ID, i+1), tc.call(ctx, c), tc.code, tc.message)
			}
		})
	}
}

// What AWS takes, the front takes: each limit itself, against the emulator.
func TestFrontRules_limitsAccepted(t *testing.T) {
	ctx, c := frontClients(t)
	name := "front-limits-" + randomHex(4)
	q, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	tbl := name[:3] + name[len(name)-2:] // 5 characters; 3 is the minimum
	if _, err := c.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(tbl), BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("PK"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("SK"), KeyType: ddbtypes.KeyTypeRange}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("PK"), AttributeType: ddbtypes.ScalarAttributeTypeS}, {AttributeName: aws.String("SK"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(tbl)})
	})
	for _, step := range []struct {
		what string
		call func() error
	}{
		{"a batch of 10 messages", func() error {
			_, err := c.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries(10, "{\"id\":\"i-1\"}\t\n")})
			return err
		}},
		{"a receive of 10, waiting 0 s, hidden 43200 s", func() error {
			_, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 43200})
			return err
		}},
		{"a transaction of 100 puts", func() error {
			items := puts(100)
			for _, it := range items {
				it.Put.TableName = aws.String(tbl)
			}
			_, err := c.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
			return err
		}},
		{"a BatchGetItem of 100 keys", func() error {
			var keys []map[string]ddbtypes.AttributeValue
			for i := range 100 {
				keys = append(keys, ddbKey("TYPE#X", strconv.Itoa(i)))
			}
			_, err := c.ddb.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{tbl: {Keys: keys}}})
			return err
		}},
		{"a CreateLaunchTemplate with a ClientToken of 128 characters", func() error {
			lt := name + "-token"
			if _, err := c.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(lt), ClientToken: aws.String(strings.Repeat("t", 128)),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{InstanceType: ec2types.InstanceTypeT3Micro}}); err != nil {
				return err
			}
			_, err := c.ec2.DeleteLaunchTemplate(context.WithoutCancel(ctx), &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(lt)})
			return err
		}},
		{"a BatchWriteItem of 25 puts", func() error {
			var writes []ddbtypes.WriteRequest
			for i := range 25 {
				writes = append(writes, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: ddbKey("TYPE#Y", strconv.Itoa(i))}})
			}
			_, err := c.ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{tbl: writes}})
			return err
		}},
		{"a PutLogEvents of 10,000 events spanning 24 hours, a batch of 1,048,576 bytes", func() error {
			group := "/" + name
			if _, err := c.logs.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(group)}); err != nil {
				return err
			}
			defer c.logs.DeleteLogGroup(context.WithoutCancel(ctx), &cloudwatchlogs.DeleteLogGroupInput{LogGroupName: aws.String(group)})
			if _, err := c.logs.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(group), LogStreamName: aws.String("s")}); err != nil {
				return err
			}
			events := logEvents(10000, "x", 24*time.Hour/9999)
			events[9999].Timestamp = aws.Int64(*events[0].Timestamp + (24 * time.Hour).Milliseconds())
			if _, err := c.logs.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String("s"), LogEvents: events}); err != nil {
				return err
			}
			_, err := c.logs.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String("s"),
				LogEvents: logEvents(1, strings.Repeat("x", 1<<20-26), time.Millisecond)})
			return err
		}},
		// Not an item of 409600 bytes, which AWS takes: moto refuses
		// items over 400000.
		{"keys at their limits", func() error {
			item := ddbKey(strings.Repeat("p", 2048), strings.Repeat("s", 1024))
			_, err := c.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item})
			return err
		}},
	} {
		if err := step.call(); err != nil {
			t.Errorf("%s: %v, want it taken", step.what, err)
		}
	}
}

// A batch's entries that SQS fails alone (sqs-message-characters) are
// failed alone: the call succeeds, the other entries are sent, and the
// answer lists the failed ones with SQS's code and message, the sender at
// fault; a batch all of whose entries fail sends nothing.
func TestFrontRules_batchEntryFailures(t *testing.T) {
	ctx, c := frontClients(t)
	q, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("front-entries-" + randomHex(4))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	entry := func(id, body string) sqstypes.SendMessageBatchRequestEntry {
		return sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(body)}
	}
	const message = "Invalid binary character '#x1' was found in the message body, the set of allowed characters is #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]."
	wantFailed := func(what string, failed []sqstypes.BatchResultErrorEntry, ids ...string) {
		t.Helper()
		var got []string
		for _, f := range failed {
			got = append(got, aws.ToString(f.Id))
			if aws.ToString(f.Code) != "InvalidMessageContents" || aws.ToString(f.Message) != message || !f.SenderFault {
				t.Errorf("%s: entry %s failed %s: %q (sender's fault %v), want InvalidMessageContents: %q, the sender's fault",
					what, aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message), f.SenderFault, message)
			}
		}
		if !slices.Equal(got, ids) {
			t.Errorf("%s: entries %v failed, want %v", what, got, ids)
		}
	}
	out, err := c.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: []sqstypes.SendMessageBatchRequestEntry{
		entry("a", "one"), entry("b", "{\"id\":\"\x01\"}"), entry("c", "two"),
	}})
	if err != nil {
		t.Fatalf("a batch with one bad entry: %v, want it to succeed", err)
	}
	wantFailed("a batch with one bad entry", out.Failed, "b")
	if len(out.Successful) != 2 {
		t.Errorf("a batch with one bad entry: %d sent, want 2", len(out.Successful))
	}
	all, err := c.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: []sqstypes.SendMessageBatchRequestEntry{
		entry("x", "\x01"), entry("y", "\x01\x01"),
	}})
	if err != nil {
		t.Fatalf("a batch of bad entries: %v, want it to succeed", err)
	}
	wantFailed("a batch of bad entries", all.Failed, "x", "y")
	if len(all.Successful) != 0 {
		t.Errorf("a batch of bad entries: %d sent, want none", len(all.Successful))
	}
	var bodies []string
	for range 5 {
		got, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
		}
		if len(bodies) >= 2 {
			break
		}
	}
	slices.Sort(bodies)
	if !slices.Equal(bodies, []string{"one", "two"}) {
		t.Errorf("the queue holds %q, want the two good entries' bodies", bodies)
	}
}

// frontClients are SDK clients of Ensure's endpoint, until the test's end,
// that do not retry (a refusal is not retried anyway).
func frontClients(t *testing.T) (context.Context, clients) {
	t.Helper()
	startup, cancel := context.WithTimeout(context.Background(), await.Patience)
	defer cancel()
	endpoint, stop, err := Ensure(startup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	creds := credentials.NewStaticCredentialsProvider("test", "test", "")
	return t.Context(), clients{
		ec2:  ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds}),
		sqs:  sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds}),
		ddb:  dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds}),
		logs: cloudwatchlogs.New(cloudwatchlogs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds}),
		ssm:  ssm.New(ssm.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds}),
		sm:   secretsmanager.New(secretsmanager.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds}),
	}
}

// wantAWSRefusal checks err is AWS's refusal as the SDK reports it: HTTP
// 400 with code and message (a regexp when it starts with ^).
func wantAWSRefusal(t *testing.T, what string, err error, code, message string) {
	t.Helper()
	var apiErr smithy.APIError
	var httpErr *awshttp.ResponseError
	if !errors.As(err, &apiErr) || !errors.As(err, &httpErr) {
		t.Errorf("%s: %v, want AWS's refusal %s: %s", what, err, code, message)
		return
	}
	matches := apiErr.ErrorMessage() == message
	if strings.HasPrefix(message, "^") {
		matches = regexp.MustCompile(message).MatchString(apiErr.ErrorMessage())
	}
	if status := httpErr.HTTPStatusCode(); status != http.StatusBadRequest || apiErr.ErrorCode() != code || !matches {
		t.Errorf("%s: HTTP %d %s: %q, want HTTP 400 %s: %q", what, status, apiErr.ErrorCode(), apiErr.ErrorMessage(), code, message)
	}
}
