package provider

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// What a claim takes from the pool's table, where anyone who may write it
// could have changed it, is checked against what the provider is told
// outside the table: the GitHub target against the github block, the
// launch template against its pool tag.

// A claim of a pool whose runners register with another owner than the
// provider's github.owner fails before any runner is touched.
func TestAccClaim_githubTargetMismatch(t *testing.T) {
	e := newClaimEnv(t, "acc-ghtarget")
	e.claimsSettings = `
  github {
    token = "ghp_never_used"
    owner = "mallory"
  }`
	config := strings.Replace(e.poolConfig(), "force_destroy", "github_owner      = \"octo\"\n  github_repository = \"app\"\n  force_destroy", 1)
	var seeded []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: config, Check: e.seed(1, agentsim.SeedSpec{}, &seeded)},
			{
				Config:      config + e.claimConfig("test", `fleet_fallback = false`),
				ExpectError: regexp.MustCompile(wrapped(`registers its runners with GitHub octo/app, but the provider's github block mints tokens only for github.owner = "mallory" and github.repository = any repository of the owner`)),
			},
			{Config: config, Check: e.checkRecords(protocol.StateIdle, "", &seeded)},
		},
	})
}

// A claim does not launch a template that is not tagged for its pool.
func TestAccClaim_launchTemplateOfAnotherPool(t *testing.T) {
	e := newClaimEnv(t, "acc-untagged")
	ltID, err := emulator.CreateLaunchTemplate(context.Background(), testClients.EC2, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(e.pool + "-foreign"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(testImage(t))},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: aws.String(protocol.TagPool), Value: aws.String("another-pool")},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	foreign := ltID
	t.Cleanup(func() {
		_, _ = testClients.EC2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(foreign)})
	})
	config := strings.Replace(e.poolConfig(), e.launchTemplate, foreign, 1)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: config},
			{
				Config:      config + e.claimConfig("test", `run_id = "run-foreign"`),
				ExpectError: regexp.MustCompile(wrapped(`launch template ` + foreign + ` does not carry the tag ec2runners:pool = ` + e.pool)),
			},
			{Config: config, Check: e.checkLaunchedTerminated("run-foreign", 0)},
		},
	})
}
