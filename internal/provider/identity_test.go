package provider

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

// TestAccPool_identity: the pool's identity is its name, the same after
// create, refresh and an in-place update, and an import block with that
// identity adopts the pool without changes.
func TestAccPool_identity(t *testing.T) {
	name := randomName("acc-poolid")
	config := func(idle string) string {
		return fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
  idle_timeout     = %q
}`, name, idle)
	}
	identity := []statecheck.StateCheck{
		statecheck.ExpectIdentity("ec2runners_pool.test", map[string]knownvalue.Check{"name": knownvalue.StringExact(name)}),
	}
	resource.ParallelTest(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_12_0)},
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{
			{Config: config("5m"), ConfigStateChecks: identity},
			{RefreshState: true},
			{Config: config("6m"), ConfigStateChecks: identity},
			{
				ResourceName:    "ec2runners_pool.test",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity,
			},
			{
				ResourceName:           "ec2runners_pool.test",
				ImportState:            true,
				ImportStateKind:        resource.ImportBlockWithResourceIdentity,
				ImportStateConfigExact: true,
				Config: config("6m") + `
import {
  to       = ec2runners_pool.test
  identity = { name = "no such pool!" }
}`,
				ExpectError: regexp.MustCompile(wrapped(`Import a pool by its name \(the import ID, or identity.name\)`)),
			},
		},
	})
}

// TestAccClaim_identity: the claim's identity is its pool and run id (also
// a generated one), the same after create, refresh and an in-place update,
// and an import block with that identity adopts the claim without changes.
func TestAccClaim_identity(t *testing.T) {
	e := newClaimEnv(t, "acc-claimid")
	claim := func(create string) string {
		return e.poolConfig() + e.claimConfig("test", fmt.Sprintf(`
  timeouts {
    create = %q
  }`, create))
	}
	identity := []statecheck.StateCheck{
		statecheck.ExpectIdentity("ec2runners_claim.test", map[string]knownvalue.Check{
			"pool":   knownvalue.StringExact(e.pool),
			"run_id": knownvalue.StringRegexp(regexp.MustCompile(`^run-[0-9a-f]{16}$`)),
		}),
		statecheck.ExpectIdentityValueMatchesState("ec2runners_claim.test", tfjsonpath.New("run_id")),
	}
	resource.ParallelTest(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_12_0)},
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.watchFleet(agentsim.Healthy)},
			{Config: claim("20m"), ConfigStateChecks: identity},
			{RefreshState: true},
			{Config: claim("21m"), ConfigStateChecks: identity},
			{
				// Timeouts are configuration, never imported.
				Config:          e.poolConfig() + e.claimConfig("test", ""),
				ResourceName:    "ec2runners_claim.test",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity,
			},
			{
				ResourceName:           "ec2runners_claim.test",
				ImportState:            true,
				ImportStateKind:        resource.ImportBlockWithResourceIdentity,
				ImportStateConfigExact: true,
				Config: claim("21m") + fmt.Sprintf(`
import {
  to       = ec2runners_claim.test
  identity = { pool = %q, run_id = "Run-1" }
}`, e.pool),
				ExpectError: regexp.MustCompile(wrapped(`run id "Run-1" must be lower case`)),
			},
		},
	})
}
