package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
)

// Read never writes: what `terraform plan`, refresh, data sources and
// `terraform query` run (Read, ModifyPlan, a data source's Read, List) uses
// the pool logic through reader and readManager, whose clients refuse every
// write the pool logic could make before it reaches AWS. Maintenance
// (reaping, filling, topping up) runs where a user asked for a change:
// claims, releases, the pool's apply and the actions.

// errReadOnly is a write refused on a read path.
var errReadOnly = errors.New("a read makes no writes (this is a bug in the provider)")

func refused(action string) error { return fmt.Errorf("%s refused: %w", action, errReadOnly) }

// reader runs the pool logic's reads with clients that refuse writes,
// logging to ctx.
func (d *providerData) reader(ctx context.Context) *claim.Claimer {
	c := readOnlyClients(d.clients)
	return &claim.Claimer{DynamoDB: c.db, SQS: c.sqs, EC2: c.ec2, DefaultTags: d.defaultTags, Log: tflogAdapter(ctx)}
}

// readManager reads pools with clients that refuse writes.
func (d *providerData) readManager() *pool.Manager {
	c := readOnlyClients(d.clients)
	return &pool.Manager{DynamoDB: c.db, SQS: c.sqs, EC2: c.ec2, STS: d.clients.STS, Region: d.clients.Region}
}

type readOnly struct {
	db  readOnlyDynamoDB
	sqs readOnlySQS
	ec2 readOnlyEC2
}

func readOnlyClients(c *awsconfig.Clients) readOnly {
	return readOnly{db: readOnlyDynamoDB{c.DynamoDB}, sqs: readOnlySQS{c.SQS}, ec2: readOnlyEC2{c.EC2}}
}

// readOnlyDynamoDB passes DynamoDB's reads through and refuses the writes
// of claim.DynamoDBClient and pool.DynamoDBClient.
type readOnlyDynamoDB struct{ *dynamodb.Client }

func (readOnlyDynamoDB) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, refused("dynamodb:PutItem")
}

func (readOnlyDynamoDB) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, refused("dynamodb:UpdateItem")
}

func (readOnlyDynamoDB) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, refused("dynamodb:DeleteItem")
}

func (readOnlyDynamoDB) BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return nil, refused("dynamodb:BatchWriteItem")
}

func (readOnlyDynamoDB) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, refused("dynamodb:TransactWriteItems")
}

func (readOnlyDynamoDB) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return nil, refused("dynamodb:CreateTable")
}

func (readOnlyDynamoDB) DeleteTable(context.Context, *dynamodb.DeleteTableInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error) {
	return nil, refused("dynamodb:DeleteTable")
}

func (readOnlyDynamoDB) TagResource(context.Context, *dynamodb.TagResourceInput, ...func(*dynamodb.Options)) (*dynamodb.TagResourceOutput, error) {
	return nil, refused("dynamodb:TagResource")
}

func (readOnlyDynamoDB) UntagResource(context.Context, *dynamodb.UntagResourceInput, ...func(*dynamodb.Options)) (*dynamodb.UntagResourceOutput, error) {
	return nil, refused("dynamodb:UntagResource")
}

func (readOnlyDynamoDB) UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return nil, refused("dynamodb:UpdateTimeToLive")
}

// readOnlySQS passes SQS's reads through and refuses the writes of
// claim.SQSClient and pool.SQSClient; a receive is a write (it hides the
// messages it returns).
type readOnlySQS struct{ *sqs.Client }

func (readOnlySQS) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return nil, refused("sqs:ReceiveMessage")
}

func (readOnlySQS) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return nil, refused("sqs:DeleteMessage")
}

func (readOnlySQS) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, refused("sqs:SendMessage")
}

func (readOnlySQS) ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return nil, refused("sqs:ChangeMessageVisibility")
}

func (readOnlySQS) CreateQueue(context.Context, *sqs.CreateQueueInput, ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	return nil, refused("sqs:CreateQueue")
}

func (readOnlySQS) DeleteQueue(context.Context, *sqs.DeleteQueueInput, ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	return nil, refused("sqs:DeleteQueue")
}

func (readOnlySQS) TagQueue(context.Context, *sqs.TagQueueInput, ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	return nil, refused("sqs:TagQueue")
}

func (readOnlySQS) UntagQueue(context.Context, *sqs.UntagQueueInput, ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error) {
	return nil, refused("sqs:UntagQueue")
}

// readOnlyEC2 passes EC2's describes through and refuses the writes of
// claim.EC2Client and pool.EC2Client.
type readOnlyEC2 struct{ *ec2.Client }

func (readOnlyEC2) CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return nil, refused("ec2:CreateFleet")
}

func (readOnlyEC2) TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return nil, refused("ec2:TerminateInstances")
}

func (readOnlyEC2) StartInstances(context.Context, *ec2.StartInstancesInput, ...func(*ec2.Options)) (*ec2.StartInstancesOutput, error) {
	return nil, refused("ec2:StartInstances")
}
