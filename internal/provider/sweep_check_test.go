package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	logstypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// The sweepers take the names of every test pool, and only those: each
// prefix the tests pass to randomName or newClaimEnv (read from their
// sources, so that a new test cannot name its pool out of the sweepers'
// reach) makes a pool whose table, queues and launch templates they take.
// EC2RUNNERS_SWEEP_POOL narrows them to one pool.
func TestSweepersTakeTheTestsNames(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	// Names that make no AWS resource: a profile the provider must not find.
	noResource := map[string]bool{"no-such-profile": true}
	call := regexp.MustCompile(`(?:randomName|newClaimEnv)\((?:t, )?"([^"]+)"`)
	prefixes := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			if !noResource[m[1]] {
				prefixes[m[1]] = true
			}
		}
	}
	if len(prefixes) < 20 {
		t.Fatalf("found only %d pool prefixes in the tests' sources: %v", len(prefixes), prefixes)
	}
	for prefix := range prefixes {
		name := randomName(prefix)
		for _, res := range []string{name, protocol.QueueName(name, "large"), name + "-foreign"} {
			if !sweepsName(res) {
				t.Errorf("the sweepers would leave %s behind: test pools are named acc-<word>-<8 hex digits> (randomName)", res)
			}
		}
	}
	for _, name := range []string{"ci-runners", "acc-prod", "acc-basic-0123abc", "acc-Basic-0123abcd", "acc-basic-0123abcd9",
		"xacc-basic-0123abcd", "chaos-seq-0123abcd", "kill-0123abcd", "acc-basic-0123abcd-large-blue"} {
		if sweepsName(name) {
			t.Errorf("the sweepers would take %s, no test's", name)
		}
	}
	a, b := randomName("acc-one"), randomName("acc-two")
	t.Setenv(sweepPoolEnv, a)
	if !sweepsName(protocol.QueueName(a, "large")) || sweepsName(protocol.QueueName(b, "large")) || sweeps(b) {
		t.Errorf("with %s=%s the sweepers take another pool, or not this one", sweepPoolEnv, a)
	}
}

// What tests leave behind (a pool's table and queues, a queue of another
// name tagged with the pool, launch templates named and tagged for it, an
// instance tagged with it, the log group of its metrics) is gone after the sweepers ran, as `make sweep`
// runs them: this test binary with -sweep, against the same emulator (or
// AWS). EC2RUNNERS_SWEEP_POOL narrows them to this test's pool, so that
// they leave alone the pools of the tests running meanwhile (shown by
// another test pool's launch template, which stays).
func TestAccSweepers_removeLeftovers(t *testing.T) {
	if testClients == nil {
		t.Fatal("acceptance tests need TF_ACC=1")
	}
	ctx := context.Background()
	name, other := randomName("acc-sweep"), randomName("acc-keep")
	m := poolManager(testClients)
	if _, err := m.Create(ctx, pool.Spec{
		Name:            name,
		ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}, "xlarge": {CPU: 4, MemoryMiB: 8192}},
		IdleTimeout:     7 * time.Minute, MaxRuntime: 30 * time.Minute, MaxRunnerAge: 24 * time.Hour,
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Delete(context.Background(), name, true) })
	tagged, err := testClients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String("tagged-" + name), Tags: map[string]string{protocol.TagPool: name},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = testClients.SQS.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: tagged.QueueUrl})
	})
	launchTemplate := func(ltName, pool string) string {
		t.Helper()
		id, err := emulator.CreateLaunchTemplate(ctx, testClients.EC2, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(ltName),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(testImage(t))},
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
				{Key: aws.String(protocol.TagPool), Value: aws.String(pool)},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = testClients.EC2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
		})
		return id
	}
	named, taggedLT, kept := launchTemplate(name, "another-pool"), launchTemplate("tagged-"+name, name), launchTemplate(other, other)
	run, err := testClients.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId: aws.String(testImage(t)), InstanceType: ec2types.InstanceTypeT3Micro,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
			Tags: []ec2types.Tag{{Key: aws.String(protocol.TagPool), Value: aws.String(name)}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	instance := aws.ToString(run.Instances[0].InstanceId)
	t.Cleanup(func() {
		_, _ = testClients.EC2.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{instance}})
	})
	logGroup := func(group string) {
		t.Helper()
		if _, err := testClients.Logs.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(group)}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = testClients.Logs.DeleteLogGroup(context.Background(), &cloudwatchlogs.DeleteLogGroupInput{LogGroupName: aws.String(group)})
		})
	}
	sweptGroup, keptGroup := metricsLogGroupPrefix+name, metricsLogGroupPrefix+other
	logGroup(sweptGroup)
	logGroup(keptGroup)

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sweep := exec.CommandContext(ctx, exe, "-sweep="+testClients.Region, "-sweep-allow-failures")
	sweep.Env = append(os.Environ(), sweepPoolEnv+"="+name)
	out, err := sweep.CombinedOutput()
	t.Logf("%s -sweep=%s with %s=%s:\n%s", filepath.Base(exe), testClients.Region, sweepPoolEnv, name, out)
	if err != nil {
		t.Fatalf("the sweepers failed: %v", err)
	}

	gone := map[string]func() error{
		"table " + name: func() error {
			d, err := testClients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
			if isCode(err, "ResourceNotFoundException") || (err == nil && d.Table.TableStatus == ddbtypes.TableStatusDeleting) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		},
		"instance " + instance: func() error {
			states, err := instanceStates([]string{instance})
			if st := states[instance]; err != nil || (st != ec2types.InstanceStateNameShuttingDown && st != ec2types.InstanceStateNameTerminated) {
				return fmt.Errorf("is %q (%v)", st, err)
			}
			return nil
		},
	}
	for _, q := range []string{protocol.QueueName(name, "large"), protocol.QueueName(name, "xlarge"), "tagged-" + name} {
		gone["queue "+q] = func() error {
			_, err := testClients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)})
			if isCode(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist") {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		}
	}
	for what, id := range map[string]string{"launch template " + name: named, "launch template tagged-" + name: taggedLT} {
		gone[what] = func() error {
			if exists, err := launchTemplateExists(ctx, id); err != nil || exists {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		}
	}
	gone["log group "+sweptGroup] = func() error {
		if exists, err := logGroupExists(ctx, sweptGroup); err != nil || exists {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	}
	for what, check := range gone {
		if err := eventually(check); err != nil {
			t.Errorf("after the sweep, %s: %v", what, err)
		}
	}
	if exists, err := launchTemplateExists(ctx, kept); err != nil || !exists {
		t.Errorf("the sweep narrowed to %s removed the launch template of pool %s (%v)", name, other, err)
	}
	if exists, err := logGroupExists(ctx, keptGroup); err != nil || !exists {
		t.Errorf("the sweep narrowed to %s removed the log group of pool %s (%v)", name, other, err)
	}
}

// logGroupExists reports whether CloudWatch Logs knows the log group.
func logGroupExists(ctx context.Context, group string) (bool, error) {
	out, err := testClients.Logs.DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String(group)})
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(out.LogGroups, func(g logstypes.LogGroup) bool { return aws.ToString(g.LogGroupName) == group }), nil
}

// launchTemplateExists reports whether EC2 knows launch template id.
func launchTemplateExists(ctx context.Context, id string) (bool, error) {
	out, err := testClients.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}})
	switch {
	case isCode(err, "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateName.NotFoundException"):
		return false, nil
	case err != nil:
		return false, err
	}
	return len(out.LaunchTemplates) > 0, nil
}
