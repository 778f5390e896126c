package latency

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
)

// DynamoDBAPI is the DynamoDB calls of the claims, which the seeds' algorithm and the agents use too.
type DynamoDBAPI interface {
	claim.DynamoDBClient
}

// DynamoDB answers Inner's calls with the model's latency; Observe, if set, hears of each.
type DynamoDB struct {
	Inner   DynamoDBAPI
	Model   *Model
	Observe Observer
}

func (c DynamoDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return call(ctx, c.Model, c.Observe, "DynamoDB/GetItem", func() (*dynamodb.GetItemOutput, error) { return c.Inner.GetItem(ctx, in, opts...) })
}

func (c DynamoDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return call(ctx, c.Model, c.Observe, "DynamoDB/PutItem", func() (*dynamodb.PutItemOutput, error) { return c.Inner.PutItem(ctx, in, opts...) })
}

func (c DynamoDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return call(ctx, c.Model, c.Observe, "DynamoDB/UpdateItem", func() (*dynamodb.UpdateItemOutput, error) { return c.Inner.UpdateItem(ctx, in, opts...) })
}

func (c DynamoDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return call(ctx, c.Model, c.Observe, "DynamoDB/DeleteItem", func() (*dynamodb.DeleteItemOutput, error) { return c.Inner.DeleteItem(ctx, in, opts...) })
}

func (c DynamoDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return call(ctx, c.Model, c.Observe, "DynamoDB/BatchGetItem", func() (*dynamodb.BatchGetItemOutput, error) { return c.Inner.BatchGetItem(ctx, in, opts...) })
}

func (c DynamoDB) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return call(ctx, c.Model, c.Observe, "DynamoDB/BatchWriteItem", func() (*dynamodb.BatchWriteItemOutput, error) { return c.Inner.BatchWriteItem(ctx, in, opts...) })
}

func (c DynamoDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return call(ctx, c.Model, c.Observe, "DynamoDB/Query", func() (*dynamodb.QueryOutput, error) { return c.Inner.Query(ctx, in, opts...) })
}

func (c DynamoDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return call(ctx, c.Model, c.Observe, "DynamoDB/TransactWriteItems", func() (*dynamodb.TransactWriteItemsOutput, error) {
		return c.Inner.TransactWriteItems(ctx, in, opts...)
	})
}

// SQSAPI is the SQS calls of the claims, and the seeds' algorithm's and the agents' seeding's.
type SQSAPI interface {
	claim.SQSClient
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// SQS answers Inner's calls with the model's latency; Observe, if set, hears of each.
type SQS struct {
	Inner   SQSAPI
	Model   *Model
	Observe Observer
}

func (c SQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return call(ctx, c.Model, c.Observe, "SQS/ReceiveMessage", func() (*sqs.ReceiveMessageOutput, error) { return c.Inner.ReceiveMessage(ctx, in, opts...) })
}

func (c SQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return call(ctx, c.Model, c.Observe, "SQS/DeleteMessageBatch", func() (*sqs.DeleteMessageBatchOutput, error) { return c.Inner.DeleteMessageBatch(ctx, in, opts...) })
}

func (c SQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return call(ctx, c.Model, c.Observe, "SQS/SendMessageBatch", func() (*sqs.SendMessageBatchOutput, error) { return c.Inner.SendMessageBatch(ctx, in, opts...) })
}

func (c SQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return call(ctx, c.Model, c.Observe, "SQS/ChangeMessageVisibilityBatch", func() (*sqs.ChangeMessageVisibilityBatchOutput, error) {
		return c.Inner.ChangeMessageVisibilityBatch(ctx, in, opts...)
	})
}

func (c SQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return call(ctx, c.Model, c.Observe, "SQS/GetQueueAttributes", func() (*sqs.GetQueueAttributesOutput, error) { return c.Inner.GetQueueAttributes(ctx, in, opts...) })
}

func (c SQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return call(ctx, c.Model, c.Observe, "SQS/DeleteMessage", func() (*sqs.DeleteMessageOutput, error) { return c.Inner.DeleteMessage(ctx, in, opts...) })
}

func (c SQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return call(ctx, c.Model, c.Observe, "SQS/SendMessage", func() (*sqs.SendMessageOutput, error) { return c.Inner.SendMessage(ctx, in, opts...) })
}

func (c SQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return call(ctx, c.Model, c.Observe, "SQS/GetQueueUrl", func() (*sqs.GetQueueUrlOutput, error) { return c.Inner.GetQueueUrl(ctx, in, opts...) })
}

// EC2API is the EC2 calls of the claims, and the agents'.
type EC2API interface {
	claim.EC2Client
	RunInstances(context.Context, *ec2.RunInstancesInput, ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	StopInstances(context.Context, *ec2.StopInstancesInput, ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error)
}

// EC2 answers Inner's calls with the model's latency; Observe, if set, hears of each.
type EC2 struct {
	Inner   EC2API
	Model   *Model
	Observe Observer
}

func (c EC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return call(ctx, c.Model, c.Observe, "EC2/CreateFleet", func() (*ec2.CreateFleetOutput, error) { return c.Inner.CreateFleet(ctx, in, opts...) })
}

func (c EC2) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return call(ctx, c.Model, c.Observe, "EC2/DescribeInstanceTypes", func() (*ec2.DescribeInstanceTypesOutput, error) {
		return c.Inner.DescribeInstanceTypes(ctx, in, opts...)
	})
}

func (c EC2) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, opts ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	return call(ctx, c.Model, c.Observe, "EC2/DescribeLaunchTemplates", func() (*ec2.DescribeLaunchTemplatesOutput, error) {
		return c.Inner.DescribeLaunchTemplates(ctx, in, opts...)
	})
}

func (c EC2) DescribeLaunchTemplateVersions(ctx context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, opts ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	return call(ctx, c.Model, c.Observe, "EC2/DescribeLaunchTemplateVersions", func() (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
		return c.Inner.DescribeLaunchTemplateVersions(ctx, in, opts...)
	})
}

func (c EC2) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, opts ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	return call(ctx, c.Model, c.Observe, "EC2/DescribeImages", func() (*ec2.DescribeImagesOutput, error) { return c.Inner.DescribeImages(ctx, in, opts...) })
}

func (c EC2) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return call(ctx, c.Model, c.Observe, "EC2/TerminateInstances", func() (*ec2.TerminateInstancesOutput, error) { return c.Inner.TerminateInstances(ctx, in, opts...) })
}

func (c EC2) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return call(ctx, c.Model, c.Observe, "EC2/DescribeInstances", func() (*ec2.DescribeInstancesOutput, error) { return c.Inner.DescribeInstances(ctx, in, opts...) })
}

func (c EC2) StartInstances(ctx context.Context, in *ec2.StartInstancesInput, opts ...func(*ec2.Options)) (*ec2.StartInstancesOutput, error) {
	return call(ctx, c.Model, c.Observe, "EC2/StartInstances", func() (*ec2.StartInstancesOutput, error) { return c.Inner.StartInstances(ctx, in, opts...) })
}

func (c EC2) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, opts ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	return call(ctx, c.Model, c.Observe, "EC2/RunInstances", func() (*ec2.RunInstancesOutput, error) { return c.Inner.RunInstances(ctx, in, opts...) })
}

func (c EC2) StopInstances(ctx context.Context, in *ec2.StopInstancesInput, opts ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error) {
	return call(ctx, c.Model, c.Observe, "EC2/StopInstances", func() (*ec2.StopInstancesOutput, error) { return c.Inner.StopInstances(ctx, in, opts...) })
}
