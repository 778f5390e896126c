package provider

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// claimEnv is one claim test's world: a pool name, a launch template and
// subnets in the emulator, and simulated agents for the pool's instances.
type claimEnv struct {
	t              *testing.T
	pool           string
	launchTemplate string
	subnets        []string
	sim            *agentsim.Sim
	claimsSettings string // more settings of the claims' provider configuration
	// claimsKey is the access key of the claims' provider configuration,
	// against the emulator ("": awsrecord.ClaimsKey, see claimsCredentials).
	claimsKey    string
	poolSettings string // more arguments of the pool
}

// newClaimEnv makes a launch template and simulated agents (their options
// changed by tune) for a pool of its own.
func newClaimEnv(t *testing.T, prefix string, tune ...func(*agentsim.Options)) *claimEnv {
	t.Helper()
	if testClients == nil {
		t.Fatal("acceptance tests need TF_ACC=1")
	}
	ctx := context.Background()
	e := &claimEnv{t: t, pool: randomName(prefix)}
	ltID, err := emulator.CreateLaunchTemplate(ctx, testClients.EC2, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(e.pool),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(testImage(t))},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: aws.String(protocol.TagPool), Value: aws.String(e.pool)},
		}}},
	})
	if err != nil {
		t.Fatalf("creating launch template: %v", err)
	}
	e.launchTemplate = ltID
	if e.subnets, err = emulator.DefaultSubnets(ctx, testClients.EC2, 2); err != nil {
		t.Fatal(err)
	}
	opts := agentsim.Options{
		HeartbeatInterval: time.Second, PollInterval: 250 * time.Millisecond, SelfCheckInterval: 5 * time.Second,
		Logf: t.Logf,
	}
	for _, f := range tune {
		f(&opts)
	}
	e.sim = agentsim.New(agentsim.Clients{DynamoDB: testClients.DynamoDB, EC2: testClients.EC2, SQS: testClients.SQS}, e.pool, opts)
	t.Cleanup(func() {
		e.sim.Stop()
		_, _ = testClients.EC2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(e.launchTemplate)})
	})
	return e
}

// testImage is an image the emulator offers (against real AWS, Amazon Linux
// 2023), for launch templates.
func testImage(t *testing.T) string {
	t.Helper()
	image, err := emulator.Image(context.Background(), testClients.EC2)
	if err != nil {
		t.Fatal(err)
	}
	return image
}

// createPool makes the test's pool outside Terraform, with fleet settings
// and warm targets (for tests where the pool's own plan and apply, which
// fill its targets, must not take part), and deletes it with its runners
// at the end.
func (e *claimEnv) createPool(warm map[string]protocol.WarmTarget) {
	e.t.Helper()
	m := poolManager(testClients)
	if _, err := m.Create(context.Background(), pool.Spec{
		Name: e.pool, ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}},
		IdleTimeout: 7 * time.Minute, MaxRuntime: 30 * time.Minute, MaxRunnerAge: 24 * time.Hour,
		Fleet: &protocol.FleetConfig{LaunchTemplateID: e.launchTemplate, LaunchTemplateVersion: "$Default", SubnetIDs: e.subnets, InstanceSelection: protocol.SelectionExplicit},
		Warm:  warm,
	}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = m.Delete(context.Background(), e.pool, true) })
}

// poolConfig is the pool resource of the test (one large class, explicit
// instance selection: the emulator does not do attribute-based selection)
// and the provider configuration of its claims.
func (e *claimEnv) poolConfig() string {
	return e.claimsProvider() + fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
  force_destroy    = true
  fleet = {
    launch_template_id = %q
    subnet_ids         = [%s]
    instance_selection = "explicit"
  }
  %s
}
`, e.pool, e.launchTemplate, quoteList(e.subnets), e.poolSettings)
}

// claimsProvider is the provider configuration of the test's claims, a
// claims-only role of its own (its calls are recorded apart from the
// pool's, see awsrecord; against real AWS, the default chain's), or the
// role of claimsKey, with the test's claimsSettings.
func (e *claimEnv) claimsProvider() string {
	credentials := claimsCredentials()
	if e.claimsKey != "" {
		credentials = fmt.Sprintf("access_key = %q\n  secret_key = %q", e.claimsKey, awsrecord.TestSecret)
	}
	return fmt.Sprintf(`
provider "ec2runnersclaims" {
  %s
  %s
}
`, credentials, e.claimsSettings)
}

// claimConfig is a claim of the test pool named name, with extra arguments.
func (e *claimEnv) claimConfig(name, args string) string {
	return fmt.Sprintf(`
resource "ec2runners_claim" %q {
  provider = ec2runnersclaims
  pool     = ec2runners_pool.test.name
  %s
}
`, name, args)
}

func quoteList(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// seed makes n idle runners in the pool, as a Check of the step that
// created the pool, and appends their ids to ids.
func (e *claimEnv) seed(n int, spec agentsim.SeedSpec, ids *[]string) func(*terraform.State) error {
	return func(*terraform.State) error {
		if spec.ResourceClass == "" {
			spec.ResourceClass = "large"
		}
		got, err := e.sim.SeedIdle(context.Background(), n, spec)
		*ids = append(*ids, got...)
		return err
	}
}

// watchFleet gives every instance the claim's fleet launches an agent.
func (e *claimEnv) watchFleet(b agentsim.Behavior) func(*terraform.State) error {
	return func(*terraform.State) error {
		e.sim.WatchFleet(context.Background(), func(string, int) agentsim.Behavior { return b })
		return nil
	}
}

func (e *claimEnv) records() (map[string]protocol.Instance, error) {
	all, err := pool.ListInstances(context.Background(), testClients.DynamoDB, e.pool)
	if err != nil {
		return nil, err
	}
	out := map[string]protocol.Instance{}
	for _, inst := range all {
		out[inst.ID] = inst
	}
	return out, nil
}

// checkRecords asserts the state (and run id, "" when unowned) of instances.
func (e *claimEnv) checkRecords(state, runID string, ids *[]string) func(*terraform.State) error {
	return func(*terraform.State) error {
		recs, err := e.records()
		if err != nil {
			return err
		}
		for _, id := range *ids {
			r, ok := recs[id]
			if !ok || r.State != state || r.RunID != runID {
				return fmt.Errorf("instance %s: record %+v, want state %s run %q", id, r, state, runID)
			}
		}
		return nil
	}
}

// queueMessages peeks at the visible and delayed messages: it waits out the
// requeue delay, receives, and makes what it received visible again.
func (e *claimEnv) queueMessages() ([]protocol.Message, error) {
	ctx := context.Background()
	url, err := testClients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(protocol.QueueName(e.pool, "large"))})
	if err != nil {
		return nil, err
	}
	time.Sleep(3 * time.Second) // requeued messages carry a 2 s delay
	out, err := testClients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: url.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
	})
	if err != nil {
		return nil, err
	}
	var msgs []protocol.Message
	var entries []sqstypes.ChangeMessageVisibilityBatchRequestEntry
	for i, m := range out.Messages {
		// ReceiveMessage drops a zero VisibilityTimeout; this call sends it.
		entries = append(entries, sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
		msg, err := protocol.ParseMessage(aws.ToString(m.Body))
		if err != nil {
			msg = protocol.Message{ID: "malformed:" + aws.ToString(m.Body)}
		}
		msgs = append(msgs, msg)
	}
	if len(entries) > 0 {
		if _, err := testClients.SQS.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: url.QueueUrl, Entries: entries}); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

// checkQueueHolds asserts that the queue holds exactly the messages of ids.
func (e *claimEnv) checkQueueHolds(ids *[]string) func(*terraform.State) error {
	return func(*terraform.State) error {
		msgs, err := e.queueMessages()
		if err != nil {
			return err
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.ID)
		}
		want := append([]string(nil), *ids...)
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Errorf("queue holds %v, want %v", got, want)
		}
		return nil
	}
}

// checkQueueHoldsAtLeast is checkQueueHolds under AWS's semantics: the
// queue holds every one of ids; any other message must be stale, naming a
// runner that is not idle (a delete with a superseded receipt handle
// deletes nothing, and the next claim that receives it drops it).
func (e *claimEnv) checkQueueHoldsAtLeast(ids *[]string) func(*terraform.State) error {
	return func(*terraform.State) error {
		msgs, err := e.queueMessages()
		if err != nil {
			return err
		}
		recs, err := e.records()
		if err != nil {
			return err
		}
		held := map[string]bool{}
		for _, m := range msgs {
			held[m.ID] = true
			if !slices.Contains(*ids, m.ID) && recs[m.ID].State == protocol.StateIdle {
				return fmt.Errorf("the queue holds a message for %s, idle but not expected in the pool", m.ID)
			}
		}
		for _, id := range *ids {
			if !held[id] {
				return fmt.Errorf("idle runner %s has no message in the queue", id)
			}
		}
		return nil
	}
}

// sendRaw puts an arbitrary body in the class's queue.
func (e *claimEnv) sendRaw(body string) func(*terraform.State) error {
	return func(*terraform.State) error {
		ctx := context.Background()
		url, err := testClients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(protocol.QueueName(e.pool, "large"))})
		if err != nil {
			return err
		}
		_, err = testClients.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url.QueueUrl, Entries: []sqstypes.SendMessageBatchRequestEntry{
			{Id: aws.String("0"), MessageBody: aws.String(body)},
		}})
		return err
	}
}

// instanceStates reads the EC2 state of instances.
func instanceStates(ids []string) (map[string]ec2types.InstanceStateName, error) {
	out, err := testClients.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return nil, err
	}
	states := map[string]ec2types.InstanceStateName{}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			states[aws.ToString(i.InstanceId)] = i.State.Name
		}
	}
	return states, nil
}

// stateIDs reads the instance ids of a claim from Terraform state.
func stateIDs(s *terraform.State, address string) ([]string, error) {
	rs, ok := s.RootModule().Resources[address]
	if !ok {
		return nil, fmt.Errorf("%s not in state", address)
	}
	n, _ := strconv.Atoi(rs.Primary.Attributes["instance_ids.#"])
	ids := make([]string, n)
	for i := range ids {
		ids[i] = rs.Primary.Attributes[fmt.Sprintf("instance_ids.%d", i)]
	}
	return ids, nil
}

// captureIDs stores a claim's instance ids for later steps.
func captureIDs(address string, into *[]string) func(*terraform.State) error {
	return func(s *terraform.State) error {
		ids, err := stateIDs(s, address)
		*into = ids
		return err
	}
}

// poolAction is the configuration of the action kind (ec2runners_reap or
// ec2runners_warm), named "now", on the test's pool; and the same with a
// resource that triggers it when created.
func (e *claimEnv) poolAction(kind string) (action, onCreate string) {
	action = fmt.Sprintf(`
%s
action %q "now" {
  provider = ec2runnersclaims
  config {
    pool = %q
  }
}
`, e.claimsProvider(), kind, e.pool)
	return action, action + fmt.Sprintf(`
resource "terraform_data" "trigger" {
  lifecycle {
    action_trigger {
      events  = [after_create]
      actions = [action.%s.now]
    }
  }
}
`, kind)
}
