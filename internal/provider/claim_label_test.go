package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentsim"
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
