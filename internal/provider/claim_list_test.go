package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck/queryfilter"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

// TestAccClaim_recoverLost follows the guide "Recovering lost claims": a
// claim is applied and its state lost (a removed block forgets it);
// `terraform query` finds it among the pool's claims (a claim of another
// run id stays out), `-generate-config-out` writes its configuration, and
// applying that adopts it unchanged; destroying it then puts its runners
// back in the pool, warm.
func TestAccClaim_recoverLost(t *testing.T) {
	e := newClaimEnv(t, "acc-recover")
	var seeded, lost []string
	kept := e.claimConfig("kept", `
  run_id         = "job-kept"
  fleet_fallback = false`)
	query := fmt.Sprintf(`
list "ec2runners_claim" "lost" {
  provider         = ec2runnersclaims
  include_resource = true
  config {
    pool          = %q
    state         = "complete"
    run_id_prefix = "run-"
  }
}
`, e.pool)
	lostIdentity := map[string]knownvalue.Check{"pool": knownvalue.StringExact(e.pool), "run_id": knownvalue.StringExact("run-lost")}
	adopted := t.TempDir() // the generated configuration's, with the test's
	resource.ParallelTest(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.seed(3, agentsim.SeedSpec{}, &seeded)},
			{
				Config: e.poolConfig() + kept + e.claimConfig("lost", `
  run_id         = "run-lost"
  instance_count = 2
  fleet_fallback = false`),
				Check: captureIDs("ec2runners_claim.lost", &lost),
			},
			{
				// The state is lost; the runners stay claimed.
				Config: e.poolConfig() + kept + `
removed {
  from = ec2runners_claim.lost
  lifecycle {
    destroy = false
  }
}
`,
				Check: e.checkRecords(protocol.StateRunning, "run-lost", &lost),
			},
			{
				Query:  true,
				Config: query,
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength("ec2runners_claim.lost", 1),
					querycheck.ExpectIdentity("ec2runners_claim.lost", lostIdentity),
					querycheck.ExpectResourceDisplayName("ec2runners_claim.lost", queryfilter.ByResourceIdentity(lostIdentity),
						knownvalue.StringRegexp(regexp.MustCompile(`^run-lost: holds 2 of 2 large runners, complete, \S+ old$`))),
					querycheck.ExpectResourceKnownValues("ec2runners_claim.lost", queryfilter.ByResourceIdentity(lostIdentity), []querycheck.KnownValueCheck{
						{Path: tfjsonpath.New("instance_ids"), KnownValue: knownvalue.ListSizeExact(2)},
						{Path: tfjsonpath.New("reused_count"), KnownValue: knownvalue.Int64Exact(2)},
					}),
				},
			},
			{
				// terraform query -generate-config-out, then apply what it wrote.
				PreConfig: func() {
					writeTestFile(t, filepath.Join(adopted, "main.tf"), e.poolConfig()+kept)
					writeTestFile(t, filepath.Join(adopted, "lost.tfquery.hcl"), query)
					generated, err := generateConfig(t, adopted)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("generated configuration:\n%s", generated)
					if err := os.Remove(filepath.Join(adopted, "lost.tfquery.hcl")); err != nil {
						t.Fatal(err)
					}
				},
				ConfigDirectory: func(config.TestStepConfigRequest) string { return adopted },
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ec2runners_claim.lost_0", plancheck.ResourceActionNoop),
				}},
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateRunning, "run-lost", &lost),
					func(s *terraform.State) error {
						ids, err := stateIDs(s, "ec2runners_claim.lost_0")
						if err == nil && len(ids) != 2 {
							err = fmt.Errorf("the adopted claim holds %v, want %v", ids, lost)
						}
						return err
					},
				),
			},
			{
				// Destroying the adopted claim releases its runners, warm.
				Config: e.poolConfig() + kept,
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateIdle, "", &lost),
					e.checkQueueHolds(&lost),
				),
			},
		},
	})
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
