package provider

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

// The instances a claim's fleet launches carry the provider's default_tags
// (cost allocation), besides the pool's own tags, which a default tag of
// the same key does not replace.
func TestAccClaim_fleetInstancesCarryDefaultTags(t *testing.T) {
	e := newClaimEnv(t, "acc-tags")
	// The claims' provider configuration launches, so its default_tags count.
	e.claimsSettings = `default_tags {
    tags = { CostCenter = "ci-42", team = "platform", InitialRunId = "not-the-run" }
  }`
	config := e.poolConfig()
	var launched []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: config, Check: e.watchFleet(agentsim.Healthy)},
			{
				Config: config + e.claimConfig("test", `
  run_id         = "run-tags"
  instance_count = 1`),
				Check: resource.ComposeTestCheckFunc(
					captureIDs("ec2runners_claim.test", &launched),
					checkInstanceTags(&launched, map[string]string{
						"CostCenter": "ci-42", "team": "platform",
						protocol.TagInitialRunID: "run-tags", protocol.TagPool: e.pool, protocol.TagAllowSelfTermination: "true",
					}),
				),
			},
		},
	})
}

// checkInstanceTags asserts that each instance has exactly the tags want.
func checkInstanceTags(ids *[]string, want map[string]string) func(*terraform.State) error {
	return func(*terraform.State) error {
		if len(*ids) == 0 {
			return fmt.Errorf("no instances to check")
		}
		out, err := testClients.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: *ids})
		if err != nil {
			return err
		}
		for _, r := range out.Reservations {
			for _, inst := range r.Instances {
				got := map[string]string{}
				for _, tg := range inst.Tags {
					got[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
				}
				if !maps.Equal(got, want) {
					return fmt.Errorf("instance %s has tags %v, want %v", aws.ToString(inst.InstanceId), got, want)
				}
			}
		}
		return nil
	}
}
