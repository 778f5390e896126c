package scripttest

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// Clients reach the emulator directly, for setting up and checking.
type Clients struct {
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
	EC2      *ec2.Client
}

// The seeded runners' size: class large of the default classes.
const (
	SeedClass        = "large"
	SeedInstanceType = "c5.large"
	seedCPU          = 2
	seedMemoryMiB    = 4096
)

// LaunchInstance starts an on-demand instance in the emulator tagged as a
// runner of pool, plus tags, from an image the emulator offers, and returns
// its id.
func LaunchInstance(ctx context.Context, c Clients, pool string, tags map[string]string) (string, error) {
	return launch(ctx, c, pool, protocol.UsageOnDemand, tags)
}

// LaunchSpotInstance is LaunchInstance for a Spot instance, which EC2 (and
// the instance stand-in's proxy, power.go) refuses to stop.
func LaunchSpotInstance(ctx context.Context, c Clients, pool string, tags map[string]string) (string, error) {
	return launch(ctx, c, pool, protocol.UsageSpot, tags)
}

func launch(ctx context.Context, c Clients, pool, usageClass string, tags map[string]string) (string, error) {
	ec2Tags := []ec2types.Tag{
		{Key: aws.String(protocol.TagPool), Value: aws.String(pool)},
		{Key: aws.String(protocol.TagAllowSelfTermination), Value: aws.String("true")},
	}
	for k, v := range tags {
		ec2Tags = append(ec2Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	image, err := emulator.Image(ctx, c.EC2)
	if err != nil {
		return "", err
	}
	in := &ec2.RunInstancesInput{
		ImageId: aws.String(image), InstanceType: ec2types.InstanceType(SeedInstanceType), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: ec2Tags}},
	}
	if usageClass == protocol.UsageSpot {
		in.InstanceMarketOptions = &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeSpot}
	}
	run, err := c.EC2.RunInstances(ctx, in)
	if err != nil {
		return "", fmt.Errorf("launching an instance: %w", err)
	}
	return aws.ToString(run.Instances[0].InstanceId), nil
}

// Record is the record of instance id, of the seeded class, on demand, in
// state for runID until threshold.
func Record(id, state, runID string, threshold time.Time) protocol.Instance {
	return protocol.Instance{
		ID: id, State: state, RunID: runID, Threshold: protocol.FormatTime(threshold),
		ResourceClass: SeedClass, InstanceType: SeedInstanceType, UsageClass: protocol.UsageOnDemand, UpdatedAt: protocol.FormatTime(time.Now()),
	}
}

// PutInstance writes rec into the pool's table, as the provider does.
func PutInstance(ctx context.Context, c Clients, pool string, rec protocol.Instance) error {
	if _, err := c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(protocol.TableName(pool)), Item: rec.Item()}); err != nil {
		return fmt.Errorf("writing the record of %s: %w", rec.ID, err)
	}
	return nil
}

// PutRecord writes the record of instance id in state for runID until
// threshold; an idle one also gets its queue message, as a release sends it.
func PutRecord(ctx context.Context, c Clients, pool, queueURL, id, state, runID string, threshold time.Time) error {
	rec := Record(id, state, runID, threshold)
	if err := PutInstance(ctx, c, pool, rec); err != nil {
		return err
	}
	if state != protocol.StateIdle {
		return nil
	}
	msg := protocol.Message{ID: id, ResourceClass: SeedClass, InstanceType: SeedInstanceType, CPU: seedCPU, MemoryMiB: seedMemoryMiB, UsageClass: protocol.UsageOnDemand, Threshold: rec.Threshold}
	if _, err := c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(msg.Body())}); err != nil {
		return fmt.Errorf("sending the message of %s: %w", id, err)
	}
	return nil
}
