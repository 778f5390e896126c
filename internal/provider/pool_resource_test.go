package provider

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

func TestAccPool_basic(t *testing.T) {
	name := randomName("acc-basic")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`resource "ec2runners_pool" "test" { name = %q }`, name),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("id"), knownvalue.StringExact(name)),
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("table_name"), knownvalue.StringExact(name)),
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("idle_timeout"), knownvalue.StringExact("7m")),
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("max_runtime"), knownvalue.StringExact("30m")),
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("force_destroy"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("resource_classes").AtMapKey("12xlarge"),
					knownvalue.ObjectExact(map[string]knownvalue.Check{"cpu": knownvalue.Int64Exact(48), "memory_mib": knownvalue.Int64Exact(98304)})),
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("queue_urls"), knownvalue.MapSizeExact(7)),
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("queue_arns").AtMapKey("large"),
					knownvalue.StringRegexp(regexp.MustCompile(`^arn:aws:sqs:[a-z0-9-]+:\d{12}:`+name+`-large$`))),
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("table_arn"),
					knownvalue.StringRegexp(regexp.MustCompile(`^arn:aws:dynamodb:[a-z0-9-]+:\d{12}:table/`+name+`$`))),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				checkQueues(name, "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"),
				checkPoolConfig(name, func(cfg protocol.PoolConfig) error {
					if len(cfg.ResourceClasses) != 7 || time.Duration(cfg.IdleTimeout) != 7*time.Minute || time.Duration(cfg.MaxRuntime) != 30*time.Minute || cfg.Fleet != nil || len(cfg.QueueURLs) != 7 {
						return fmt.Errorf("unexpected pool config %+v", cfg)
					}
					return nil
				}),
			),
		}},
	})
}

func TestAccPool_update(t *testing.T) {
	name := randomName("acc-update")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{
			{
				Config: fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { small = { cpu = 2, memory_mib = 4096 }, medium = { cpu = 4, memory_mib = 8192 } }
  tags             = { team = "ci" }
}`, name),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkQueues(name, "small", "medium"),
					checkQueueTags(name, "small", map[string]string{"team": "ci"}),
				),
			},
			{
				Config: fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { small = { cpu = 2, memory_mib = 4096 }, big = { cpu = 8, memory_mib = 16384 } }
  idle_timeout     = "10m"
  max_runtime      = "1h"
  tags             = { team = "platform", cost = "ci" }
  fleet = {
    launch_template_name = "runners"
    subnet_ids           = ["subnet-1", "subnet-2"]
    instance_selection   = "explicit"
  }
}`, name),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ec2runners_pool.test", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("queue_urls"), knownvalue.MapSizeExact(2)),
					statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("fleet").AtMapKey("launch_template_version"), knownvalue.StringExact("$Default")),
					statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("tags_all"), knownvalue.MapExact(map[string]knownvalue.Check{
						"team": knownvalue.StringExact("platform"), "cost": knownvalue.StringExact("ci"),
					})),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkQueues(name, "small", "big"),
					checkQueueGone(name, "medium"),
					checkQueueTags(name, "big", map[string]string{"team": "platform", "cost": "ci"}),
					checkQueueTags(name, "small", map[string]string{"team": "platform", "cost": "ci"}),
					checkPoolConfig(name, func(cfg protocol.PoolConfig) error {
						f := cfg.Fleet
						if time.Duration(cfg.IdleTimeout) != 10*time.Minute || time.Duration(cfg.MaxRuntime) != time.Hour ||
							f == nil || f.LaunchTemplateName != "runners" || f.InstanceSelection != "explicit" || len(f.SubnetIDs) != 2 ||
							cfg.ResourceClasses["big"].CPU != 8 || len(cfg.QueueURLs) != 2 {
							return fmt.Errorf("pool config not updated: %+v (fleet %+v)", cfg, f)
						}
						return nil
					}),
				),
			},
		},
	})
}

// TestAccPool_durationSpelling: durations keep the spelling of the
// configuration in the state, though the pool holds them as durations, so
// neither the apply nor a refresh shows a change.
func TestAccPool_durationSpelling(t *testing.T) {
	name := randomName("acc-spelling")
	config := fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
  idle_timeout     = "420s"
  max_runtime      = "1.5h"
  max_runner_age   = "10080m"
}`, name)
	spelt := func(attribute, want string) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New(attribute), knownvalue.StringExact(want))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{
			{
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check: checkPoolConfig(name, func(cfg protocol.PoolConfig) error {
					if time.Duration(cfg.IdleTimeout) != 7*time.Minute || time.Duration(cfg.MaxRuntime) != 90*time.Minute || time.Duration(cfg.MaxRunnerAge) != 7*24*time.Hour {
						return fmt.Errorf("pool config durations %+v", cfg)
					}
					return nil
				}),
			},
			{
				Config:            config,
				ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				ConfigStateChecks: []statecheck.StateCheck{spelt("idle_timeout", "420s"), spelt("max_runtime", "1.5h"), spelt("max_runner_age", "10080m")},
			},
		},
	})
}

func TestAccPool_import(t *testing.T) {
	name := randomName("acc-import")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{
			{
				Config: fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
  idle_timeout     = "5m"
  tags             = { env = "test" }
  github_owner     = "octo"
  fleet = {
    launch_template_id = "lt-0123456789abcdef0"
    subnet_ids         = ["subnet-a"]
  }
}`, name),
			},
			{
				ResourceName:            "ec2runners_pool.test",
				ImportState:             true,
				ImportStateId:           name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				ResourceName:  "ec2runners_pool.test",
				ImportState:   true,
				ImportStateId: "no such pool!",
				ExpectError:   regexp.MustCompile(`Import a pool by its name`),
			},
		},
	})
}

func TestAccPool_disappears(t *testing.T) {
	name := randomName("acc-gone")
	config := fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 }, xlarge = { cpu = 4, memory_mib = 8192 } }
}`, name)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{
			{
				// A queue deleted behind Terraform's back is planned back.
				Config:             config,
				Check:              deleteQueueOutside(name, "xlarge"),
				ExpectNonEmptyPlan: true,
			},
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ec2runners_pool.test", plancheck.ResourceActionUpdate),
				}},
				Check: checkQueues(name, "large", "xlarge"),
			},
			{
				// A table deleted behind Terraform's back removes the pool from state.
				Config:             config,
				Check:              deletePoolOutside(name),
				ExpectNonEmptyPlan: true,
			},
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ec2runners_pool.test", plancheck.ResourceActionCreate),
				}},
				Check: checkQueues(name, "large", "xlarge"),
			},
		},
	})
}

// TestAccPool_anotherPoolsQueue: a queue of the pool's name that another
// pool's tags claim is not taken over: the apply fails naming its owner,
// leaves the queue as it was, and leaves no table behind.
func TestAccPool_anotherPoolsQueue(t *testing.T) {
	if testClients == nil {
		t.Fatal("acceptance tests need TF_ACC=1")
	}
	name := randomName("acc-owner")
	ctx := context.Background()
	owner := map[string]string{protocol.TagPool: "other", protocol.TagClass: "large"}
	q, err := testClients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(protocol.QueueName(name, "large")), Tags: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = testClients.SQS.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
	})
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
  tags             = { team = "ci" }
}`, name),
			ExpectError: regexp.MustCompile(wrapped(`already exists and belongs to pool "other", resource class "large" \(its ec2runners:pool and ec2runners:class tags\), not to pool ` + name)),
		}},
	})
	tags, err := testClients.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: q.QueueUrl})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(tags.Tags, owner) {
		t.Errorf("the other pool's queue is now tagged %v, want %v", tags.Tags, owner)
	}
	if _, err := testClients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}); err == nil {
		t.Errorf("the failed apply left the table %s behind", name)
	}
}

func TestAccPool_forceDestroy(t *testing.T) {
	name := randomName("acc-force")
	config := func(force bool) string {
		return fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 }, xlarge = { cpu = 4, memory_mib = 8192 } }
  force_destroy    = %t
}`, name, force)
	}
	var idle, running string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: resource.ComposeAggregateTestCheckFunc(
			checkPoolDestroyed,
			func(*terraform.State) error { return checkInstancesTerminated(idle, running) },
		),
		Steps: []resource.TestStep{
			{
				Config: config(false),
				Check: resource.ComposeTestCheckFunc(
					seedRunner(name, "large", protocol.StateIdle, "", &idle),
					seedRunner(name, "xlarge", protocol.StateRunning, "run-42", &running),
				),
			},
			{
				Config:      config(false),
				Destroy:     true,
				ExpectError: regexp.MustCompile(`(?s)still has 2 live runner\s+instance\(s\):(.*\(idle\).*\(running,\s+run\s+run-42\)|.*\(running,\s+run\s+run-42\).*\(idle\)).*force_destroy`),
			},
			{
				// Removing a class that holds a runner is refused too.
				Config: fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
}`, name),
				ExpectError: regexp.MustCompile(`(?s)resource class "xlarge" still has.*1\s+live\s+instance`),
			},
			{
				Config: config(true),
			},
		},
	})
}

func TestAccPool_timeouts(t *testing.T) {
	name := randomName("acc-timeouts")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
  timeouts {
    create = "5m"
    delete = "5m"
  }
}`, name),
			Check: checkQueues(name, "large"),
		}},
	})
}

// checkPoolDestroyed verifies that no table or queue of a pool in state is left.
func checkPoolDestroyed(s *terraform.State) error {
	ctx := context.Background()
	for _, rs := range s.RootModule().Resources {
		if rs.Type != "ec2runners_pool" {
			continue
		}
		name := rs.Primary.ID
		_, err := testClients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err == nil {
			return fmt.Errorf("table %s still exists", name)
		}
		for k, url := range rs.Primary.Attributes {
			if regexp.MustCompile(`^queue_urls\.`).MatchString(k) {
				// AWS answers for a deleted queue for up to 60 s.
				if err := eventually(func() error {
					if _, err := testClients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url)}); err == nil {
						return fmt.Errorf("queue %s still exists", url)
					}
					return nil
				}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkQueues(pool string, classes ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, class := range classes {
			if _, err := testClients.SQS.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(protocol.QueueName(pool, class))}); err != nil {
				return fmt.Errorf("queue of class %s: %w", class, err)
			}
		}
		return nil
	}
}

func checkQueueGone(pool, class string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if _, err := testClients.SQS.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(protocol.QueueName(pool, class))}); err == nil {
			return fmt.Errorf("queue of removed class %s still exists", class)
		}
		return nil
	}
}

// checkQueueTags checks the tags of a class's queue: want and the owner tags.
func checkQueueTags(pool, class string, want map[string]string) resource.TestCheckFunc {
	want = maps.Clone(want)
	want[protocol.TagPool], want[protocol.TagClass] = pool, class
	return func(*terraform.State) error {
		ctx := context.Background()
		url, err := testClients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(protocol.QueueName(pool, class))})
		if err != nil {
			return err
		}
		out, err := testClients.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url.QueueUrl})
		if err != nil {
			return err
		}
		if fmt.Sprint(out.Tags) != fmt.Sprint(want) {
			return fmt.Errorf("queue %s tags = %v, want %v", class, out.Tags, want)
		}
		return nil
	}
}

func checkPoolConfig(pool string, check func(protocol.PoolConfig) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		cfg, err := readPoolConfig(pool)
		if err != nil {
			return err
		}
		return check(cfg)
	}
}

func readPoolConfig(name string) (protocol.PoolConfig, error) {
	return pool.ReadConfig(context.Background(), testClients.DynamoDB, name)
}

func deleteQueueOutside(pool, class string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		url, err := testClients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(protocol.QueueName(pool, class))})
		if err != nil {
			return err
		}
		_, err = testClients.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: url.QueueUrl})
		return err
	}
}

func deletePoolOutside(name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		return poolManager(testClients).Delete(context.Background(), name, false)
	}
}

// seedRunner launches an instance in the emulator and records it in the pool
// as a runner in the given state, as a claim or a release would have.
func seedRunner(pool, class, state, runID string, id *string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		image, err := emulator.Image(ctx, testClients.EC2)
		if err != nil {
			return err
		}
		out, err := testClients.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
			ImageId: aws.String(image), InstanceType: ec2types.InstanceTypeC6iLarge,
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
			// Tagged as a claim's launch tags it: the pool's policy may
			// terminate only its own instances.
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
				Tags: []ec2types.Tag{{Key: aws.String(protocol.TagPool), Value: aws.String(pool)}}}},
		})
		if err != nil {
			return err
		}
		*id = aws.ToString(out.Instances[0].InstanceId)
		now := time.Now()
		inst := protocol.Instance{
			ID: *id, State: state, RunID: runID, Threshold: protocol.FormatTime(now.Add(10 * time.Minute)),
			ResourceClass: class, InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, UpdatedAt: protocol.FormatTime(now),
		}
		_, err = testClients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(pool), Item: inst.Item()})
		return err
	}
}

func checkInstancesTerminated(ids ...string) error {
	out, err := testClients.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return err
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			if st := inst.State.Name; st != ec2types.InstanceStateNameTerminated && st != ec2types.InstanceStateNameShuttingDown {
				return fmt.Errorf("instance %s is %s, want terminated", aws.ToString(inst.InstanceId), st)
			}
		}
	}
	return nil
}

// The GitHub target, and where the pool keeps its GitHub credential, are
// recorded in the pool config, where claims find them, and change in place.
func TestAccPool_githubTarget(t *testing.T) {
	name := randomName("acc-github")
	config := func(target string) string {
		return fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
  %s
}

data "ec2runners_pool" "test" {
  name = ec2runners_pool.test.name
}`, name, target)
	}
	target := func(want *protocol.GitHubTarget, wantCred ...protocol.GitHubCredential) resource.TestCheckFunc {
		return checkPoolConfig(name, func(cfg protocol.PoolConfig) error {
			if (cfg.GitHub == nil) != (want == nil) || (want != nil && *cfg.GitHub != *want) {
				return fmt.Errorf("pool config GitHub target %+v, want %+v", cfg.GitHub, want)
			}
			if (cfg.GitHubCredential == nil) != (len(wantCred) == 0) || (len(wantCred) > 0 && *cfg.GitHubCredential != wantCred[0]) {
				return fmt.Errorf("pool config GitHub credential %+v, want %+v", cfg.GitHubCredential, wantCred)
			}
			return nil
		})
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{
			{
				Config: config(`github_owner = "octo"
  github_repository = "app"`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("github_owner"), knownvalue.StringExact("octo")),
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("github_repository"), knownvalue.StringExact("app")),
				},
				Check: target(&protocol.GitHubTarget{Owner: "octo", Repository: "app"}),
			},
			{
				Config: config(`github_owner = "octo"
  github_repository = "app"
  github_credential = { ssm_parameter = "/ec2runners/app/github" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ec2runners_pool.test", plancheck.ResourceActionUpdate),
				}},
				Check: target(&protocol.GitHubTarget{Owner: "octo", Repository: "app"}, protocol.GitHubCredential{SSMParameter: "/ec2runners/app/github"}),
			},
			{
				Config: config(`github_owner = "octo-org"
  github_credential = { secrets_manager_secret = "ec2runners/octo-org/github" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ec2runners_pool.test", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("github_repository"), knownvalue.Null()),
					statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("github_credential").AtMapKey("ssm_parameter"), knownvalue.Null()),
				},
				Check: target(&protocol.GitHubTarget{Owner: "octo-org"}, protocol.GitHubCredential{SecretsManagerSecret: "ec2runners/octo-org/github"}),
			},
			{
				ResourceName: "ec2runners_pool.test", ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"force_destroy"},
			},
			{
				Config: config(""),
				Check:  target(nil),
			},
		},
	})
}
