package provider

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// What a claim takes from the pool's table, where anyone who may write it
// could have changed it, is checked against what the provider is told
// outside the table: the GitHub target against the github block.

// A claim of a pool whose runners register with another owner than the
// provider's github.owner fails before any runner is touched.
func TestAccClaim_githubTargetMismatch(t *testing.T) {
	e := newClaimEnv(t, "acc-ghtarget")
	config := `
provider "ec2runners" {
  github {
    token = "ghp_never_used"
    owner = "mallory"
  }
}
` + strings.Replace(e.poolConfig(), "force_destroy", "github_owner      = \"octo\"\n  github_repository = \"app\"\n  force_destroy", 1)
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
