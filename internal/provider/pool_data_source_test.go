package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

func TestAccPoolDataSource_basic(t *testing.T) {
	name := randomName("acc-ds")
	var runner string
	poolConfig := fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 }, xlarge = { cpu = 4, memory_mib = 8192 } }
  max_runtime      = "45m"
  force_destroy    = true
  fleet = {
    launch_template_name = "runners"
    subnet_ids           = ["subnet-1"]
  }
}`, name)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{
			{
				Config: poolConfig,
				Check: resource.ComposeTestCheckFunc(
					seedRunner(name, "large", "idle", "", &runner),
					func(*terraform.State) error { return sendIdleMessage(name, "large", runner) },
				),
			},
			{
				// The data source reads by name alone, as a claim stack would.
				Config: poolConfig + fmt.Sprintf(`
data "ec2runners_pool" "test" { name = %q }`, name),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("table_name"), knownvalue.StringExact(name)),
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("max_runtime"), knownvalue.StringExact("45m")),
					// The emulator's (or AWS's) account, from STS, and the region.
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("instance_arn_prefix"),
						knownvalue.StringRegexp(regexp.MustCompile(`^arn:aws:ec2:`+regexp.QuoteMeta(testRegion())+`:[0-9]{12}:instance/$`))),
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("idle_timeout"), knownvalue.StringExact("7m")),
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("fleet").AtMapKey("launch_template_name"), knownvalue.StringExact("runners")),
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("resource_classes").AtMapKey("xlarge").AtMapKey("cpu"), knownvalue.Int64Exact(4)),
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("idle_messages"), knownvalue.MapExact(map[string]knownvalue.Check{
						"large": knownvalue.Int64Exact(1), "xlarge": knownvalue.Int64Exact(0),
					})),
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("instance_counts"), knownvalue.MapExact(map[string]knownvalue.Check{
						"idle": knownvalue.Int64Exact(1), "stopped": knownvalue.Int64Exact(0), "created": knownvalue.Int64Exact(0), "running": knownvalue.Int64Exact(0),
						"claimed": knownvalue.Int64Exact(0), "terminated": knownvalue.Int64Exact(0),
					})),
					statecheck.CompareValuePairs("data.ec2runners_pool.test", tfjsonpath.New("queue_urls"), "ec2runners_pool.test", tfjsonpath.New("queue_urls"), compare.ValuesSame()),
				},
			},
		},
	})
}

func TestAccPoolDataSource_notFound(t *testing.T) {
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config:      `data "ec2runners_pool" "test" { name = "` + randomName("acc-missing") + `" }`,
			ExpectError: regexp.MustCompile(`(?s)Cannot read pool acc-missing-.*pool not found`),
		}},
	})
}

// sendIdleMessage puts the idle-runner message of an instance in its class's queue.
func sendIdleMessage(pool, class, id string) error {
	ctx := context.Background()
	url, err := testClients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(protocol.QueueName(pool, class))})
	if err != nil {
		return err
	}
	msg := protocol.Message{ID: id, ResourceClass: class, InstanceType: "c6i.large", CPU: 2, MemoryMiB: 4096, UsageClass: protocol.UsageOnDemand, Threshold: "2099-01-01T00:00:00Z"}
	_, err = testClients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url.QueueUrl, MessageBody: aws.String(msg.Body())})
	return err
}
