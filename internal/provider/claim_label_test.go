package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentsim"
)

// A claim's label is known at plan time when its run id is (an output or a
// downstream unit need not mock it); a generated run id is known only at
// apply. A later plan keeps the label of a generated run id.
func TestAccClaim_labelKnownAtPlan(t *testing.T) {
	e := newClaimEnv(t, "acc-label")
	var seeded []string
	claims := e.claimConfig("named", `
  run_id         = "run-label"
  fleet_fallback = false`) + e.claimConfig("generated", `fleet_fallback = false`) + `
output "label" { value = ec2runners_claim.named.label }
`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.seed(2, agentsim.SeedSpec{}, &seeded)},
			{
				Config: e.poolConfig() + claims,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("ec2runners_claim.named", tfjsonpath.New("label"), knownvalue.StringExact("run-label")),
					plancheck.ExpectKnownOutputValue("label", knownvalue.StringExact("run-label")),
					plancheck.ExpectUnknownValue("ec2runners_claim.generated", tfjsonpath.New("label")),
				}},
			},
			{
				Config: e.poolConfig() + claims,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
		},
	})
}
