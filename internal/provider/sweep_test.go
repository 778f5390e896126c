package provider

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// Sweepers, in terraform-provider-aws's style: `go test ./internal/provider
// -sweep=<region>` (make sweep) runs them instead of the tests, and removes
// what the acceptance tests named or tagged and left behind (a test killed
// mid-run, a failed destroy): the EC2 instances tagged ec2runners:pool with
// a test pool's name, the pools' DynamoDB tables and SQS queues (by name,
// or a queue by its ec2runners:pool tag), the launch templates the tests
// made, and the log groups of the pools' metrics (/ec2runners/<pool>). Against real AWS with EC2RUNNERS_TESTACC_AWS=1, else in the
// emulator. A test pool is a name randomName makes: acc-<word>-<8 hex
// digits>; EC2RUNNERS_SWEEP_POOL narrows a sweep to one of them.

// sweepPoolEnv names the one test pool a sweep removes (unset: every one).
const sweepPoolEnv = "EC2RUNNERS_SWEEP_POOL"

var (
	// testPool is the shape of randomName's pool names.
	testPool = regexp.MustCompile(`^acc-[a-z0-9]+-[0-9a-f]{8}$`)
	// testPoolResource is a name the tests give a pool's resources: the
	// pool's (its table, a launch template), <pool>-<class> (its queues)
	// or <pool>-<what> (another launch template).
	testPoolResource = regexp.MustCompile(`^(acc-[a-z0-9]+-[0-9a-f]{8})(-[A-Za-z0-9_]+)?$`)
)

// sweeps reports whether the sweepers remove what belongs to pool.
func sweeps(pool string) bool {
	only := os.Getenv(sweepPoolEnv)
	return testPool.MatchString(pool) && (only == "" || pool == only)
}

// sweepsName reports whether a resource's name makes it a swept pool's.
func sweepsName(name string) bool {
	m := testPoolResource.FindStringSubmatch(name)
	return m != nil && sweeps(m[1])
}

func init() {
	resource.AddTestSweepers("ec2runners_instances", &resource.Sweeper{
		Name: "ec2runners_instances",
		F:    sweepInstances,
	})
	// The rest once the instances are going: nothing then uses them.
	for name, f := range map[string]resource.SweeperFunc{
		"ec2runners_queues":           sweepQueues,
		"ec2runners_tables":           sweepTables,
		"ec2runners_launch_templates": sweepLaunchTemplates,
		"ec2runners_log_groups":       sweepLogGroups,
	} {
		resource.AddTestSweepers(name, &resource.Sweeper{Name: name, Dependencies: []string{"ec2runners_instances"}, F: f})
	}
}

// sweepClients are clients for region: AWS's, by the SDK's default chain,
// with EC2RUNNERS_TESTACC_AWS=1; otherwise the emulator's, through its
// front (emulator.Ensure). Call done when finished.
func sweepClients(region string) (c *awsconfig.Clients, done func(), err error) {
	ctx := context.Background()
	if emulator.RealAWS() {
		if err := pointAtAWS(); err != nil {
			return nil, nil, err
		}
		c, err := awsconfig.New(ctx, awsconfig.Options{Region: region})
		return c, func() {}, err
	}
	endpoint, stop, err := emulator.Ensure(ctx)
	if err != nil {
		return nil, nil, err
	}
	c, err = awsconfig.New(ctx, awsconfig.Options{
		Region: region, AccessKey: "test", SecretKey: "test",
		Endpoints: awsconfig.Endpoints{SQS: endpoint, DynamoDB: endpoint, EC2: endpoint, STS: endpoint, Logs: endpoint},
	})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

// sweepInstances terminates the instances, pending, running or stopped,
// tagged ec2runners:pool with a swept pool's name.
func sweepInstances(region string) error {
	c, done, err := sweepClients(region)
	if err != nil {
		return err
	}
	defer done()
	ctx := context.Background()
	var ids []string
	p := ec2.NewDescribeInstancesPaginator(c.EC2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag-key"), Values: []string{protocol.TagPool}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
	}})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing instances: %w", err)
		}
		for _, r := range out.Reservations {
			for _, inst := range r.Instances {
				if pool := tagValue(inst.Tags, protocol.TagPool); sweeps(pool) {
					log.Printf("[INFO] sweeper: terminating instance %s of pool %s (%s)", aws.ToString(inst.InstanceId), pool, inst.State.Name)
					ids = append(ids, aws.ToString(inst.InstanceId))
				}
			}
		}
	}
	var errs []error
	for batch := range slices.Chunk(ids, 50) {
		if _, err := c.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: batch}); err != nil {
			errs = append(errs, fmt.Errorf("terminating %v: %w", batch, err))
		}
	}
	return errors.Join(errs...)
}

// sweepQueues deletes the queues of swept pools: by name (<pool>-<class>),
// or by their ec2runners:pool tag.
func sweepQueues(region string) error {
	c, done, err := sweepClients(region)
	if err != nil {
		return err
	}
	defer done()
	ctx := context.Background()
	var errs []error
	p := sqs.NewListQueuesPaginator(c.SQS, &sqs.ListQueuesInput{MaxResults: aws.Int32(1000)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing queues: %w", err)
		}
		for _, url := range out.QueueUrls {
			name := url[strings.LastIndex(url, "/")+1:]
			if !sweepsName(name) {
				tags, err := c.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
				if isCode(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist") {
					continue
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("the tags of queue %s: %w", name, err))
					continue
				}
				if !sweeps(tags.Tags[protocol.TagPool]) {
					continue
				}
			}
			log.Printf("[INFO] sweeper: deleting queue %s", name)
			_, err := c.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
			if err != nil && !isCode(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist") {
				errs = append(errs, fmt.Errorf("deleting queue %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// sweepTables deletes the tables of swept pools (a pool's table is named
// as the pool).
func sweepTables(region string) error {
	c, done, err := sweepClients(region)
	if err != nil {
		return err
	}
	defer done()
	ctx := context.Background()
	var errs []error
	p := dynamodb.NewListTablesPaginator(c.DynamoDB, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing tables: %w", err)
		}
		for _, name := range out.TableNames {
			if !sweeps(name) {
				continue
			}
			log.Printf("[INFO] sweeper: deleting table %s", name)
			_, err := c.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
			if isCode(err, "ResourceInUseException") {
				// Being deleted already is as good; being created is not.
				d, derr := c.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
				if derr == nil && d.Table.TableStatus == ddbtypes.TableStatusDeleting {
					err = nil
				}
			}
			if err != nil && !isCode(err, "ResourceNotFoundException") {
				errs = append(errs, fmt.Errorf("deleting table %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// sweepLaunchTemplates deletes the launch templates the tests made: named
// after a swept pool, or tagged ec2runners:pool with its name.
func sweepLaunchTemplates(region string) error {
	c, done, err := sweepClients(region)
	if err != nil {
		return err
	}
	defer done()
	ctx := context.Background()
	var errs []error
	// The largest page: moto answers a smaller one, 15 by default, without
	// a NextToken for the rest.
	p := ec2.NewDescribeLaunchTemplatesPaginator(c.EC2, &ec2.DescribeLaunchTemplatesInput{MaxResults: aws.Int32(200)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing launch templates: %w", err)
		}
		for _, lt := range out.LaunchTemplates {
			name, id := aws.ToString(lt.LaunchTemplateName), aws.ToString(lt.LaunchTemplateId)
			if !sweepsName(name) && !sweeps(tagValue(lt.Tags, protocol.TagPool)) {
				continue
			}
			log.Printf("[INFO] sweeper: deleting launch template %s (%s)", name, id)
			_, err := c.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
			if err != nil && !isCode(err, "InvalidLaunchTemplateId.NotFound") {
				errs = append(errs, fmt.Errorf("deleting launch template %s (%s): %w", name, id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// metricsLogGroupPrefix is where the tests' pools publish their metrics:
// /ec2runners/<pool>, as examples/complete names it.
const metricsLogGroupPrefix = "/ec2runners/"

// sweepLogGroups deletes the log groups of swept pools' metrics.
func sweepLogGroups(region string) error {
	c, done, err := sweepClients(region)
	if err != nil {
		return err
	}
	defer done()
	ctx := context.Background()
	var errs []error
	p := cloudwatchlogs.NewDescribeLogGroupsPaginator(c.Logs, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String(metricsLogGroupPrefix + "acc-")})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing log groups: %w", err)
		}
		for _, g := range out.LogGroups {
			name := aws.ToString(g.LogGroupName)
			if !sweeps(strings.TrimPrefix(name, metricsLogGroupPrefix)) {
				continue
			}
			log.Printf("[INFO] sweeper: deleting log group %s", name)
			_, err := c.Logs.DeleteLogGroup(ctx, &cloudwatchlogs.DeleteLogGroupInput{LogGroupName: aws.String(name)})
			if err != nil && !isCode(err, "ResourceNotFoundException") {
				errs = append(errs, fmt.Errorf("deleting log group %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// isCode reports whether err is an AWS error with one of codes.
func isCode(err error, codes ...string) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && slices.Contains(codes, apiErr.ErrorCode())
}
