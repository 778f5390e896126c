package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// A claim's label is its run id, '-' and 13 random characters: known only
// after apply, kept by later plans, and new with each claim, so that a
// second claim of the same run id gets another label than the first.
func TestAccClaim_labelHasASecret(t *testing.T) {
	e := newClaimEnv(t, "acc-label")
	var seeded []string
	claim := e.claimConfig("named", `
  run_id         = "run-label"
  fleet_fallback = false`) + `
output "label" { value = ec2runners_claim.named.label }
`
	label := knownvalue.StringRegexp(regexp.MustCompile(`^run-label-[a-z2-7]{13}$`))
	labels := statecheck.CompareValue(compare.ValuesDiffer())
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.seed(1, agentsim.SeedSpec{}, &seeded)},
			{
				Config: e.poolConfig() + claim,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue("ec2runners_claim.named", tfjsonpath.New("label")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ec2runners_claim.named", tfjsonpath.New("label"), label),
					statecheck.ExpectKnownOutputValue("label", label),
					labels.AddStateValue("ec2runners_claim.named", tfjsonpath.New("label")),
				},
			},
			{
				Config: e.poolConfig() + claim,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
			{Config: e.poolConfig()}, // released: the runner is back in the pool
			{
				Config: e.poolConfig() + claim,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ec2runners_claim.named", tfjsonpath.New("label"), label),
					labels.AddStateValue("ec2runners_claim.named", tfjsonpath.New("label")),
				},
			},
		},
	})
}

// A runner group is an organization's: a claim of a pool whose runners
// register with no organization is refused at plan time.
func TestAccClaim_runnerGroupNeedsAnOrganization(t *testing.T) {
	e := newClaimEnv(t, "acc-group")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig()},
			{
				Config:      e.poolConfig() + e.claimConfig("test", `runner_group = "Trusted builds"`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(wrapped(`Attribute runner_group: runner group "Trusted builds": pool ` + e.pool + ` registers its runners with no GitHub owner`)),
			},
		},
	})
}

// A claim whose runner group does not admit its repository fails before it
// takes a runner, naming the group, the repository and what to change:
// GitHub would send none of the repository's jobs to its runners. The
// provider's credentials read the organization's runner groups.
func TestAccClaim_runnerGroupMustAdmitTheRepository(t *testing.T) {
	skipOnRealAWS(t, "the GitHub is the stub, on this machine")
	gh := scripttest.NewGitHub(t)
	gh.AddRunnerGroup("octo", "Trusted builds", scripttest.GroupAccess{SelectedRepositories: []string{"octo/infra"}})
	e := newClaimEnv(t, "acc-grpaccess")
	e.claimsSettings = fmt.Sprintf(`
  github {
    token    = %q
    base_url = %q
    owner    = "octo"
  }`, gh.APIKey, gh.URL)
	config := strings.Replace(e.poolConfig(), "force_destroy", "github_owner  = \"octo\"\n  force_destroy", 1)
	var seeded []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: config, Check: e.seed(1, agentsim.SeedSpec{}, &seeded)},
			{
				Config: config + e.claimConfig("test", `
  repository     = "octo/app"
  runner_group   = "Trusted builds"
  fleet_fallback = false`),
				ExpectError: regexp.MustCompile(wrapped(`runner group "Trusted builds" of organization octo admits only selected repositories, and octo/app is not one of them`)),
			},
			{Config: config, Check: e.checkRecords(protocol.StateIdle, "", &seeded)},
		},
	})
}
