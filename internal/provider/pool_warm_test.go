package provider

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// warm's targets reach the pool config item (where releases read them),
// survive import, and go away when removed.
func TestAccPool_warm(t *testing.T) {
	name := randomName("acc-warm")
	config := func(warm string) string {
		return fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 }, xlarge = { cpu = 4, memory_mib = 8192 } }
  %s
}`, name, warm)
	}
	office := protocol.WarmTarget{Hot: 1, Schedule: []protocol.WarmWindow{
		{Days: []string{"mon", "tue", "wed", "thu", "fri"}, From: "08:00", To: "19:00", TimeZone: "Europe/Berlin", Hot: 4},
	}}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{
			{
				Config: config(`warm = {
    large  = { hot = 1, schedule = [{ days = ["mon", "tue", "wed", "thu", "fri"], from = "08:00", to = "19:00", time_zone = "Europe/Berlin", hot = 4 }] }
    xlarge = { schedule = [{ days = ["sat"], from = "00:00", to = "24:00", time_zone = "UTC", hot = 2 }] }
  }`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("warm").AtMapKey("xlarge").AtMapKey("hot"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("warm").AtMapKey("large").AtMapKey("schedule").AtSliceIndex(0).AtMapKey("time_zone"), knownvalue.StringExact("Europe/Berlin")),
				},
				Check: checkPoolConfig(name, func(cfg protocol.PoolConfig) error {
					want := map[string]protocol.WarmTarget{"large": office, "xlarge": {Schedule: []protocol.WarmWindow{
						{Days: []string{"sat"}, From: "00:00", To: "24:00", TimeZone: "UTC", Hot: 2},
					}}}
					if !reflect.DeepEqual(cfg.Warm, want) {
						return fmt.Errorf("pool config warm %+v, want %+v", cfg.Warm, want)
					}
					return nil
				}),
			},
			{
				ResourceName:            "ec2runners_pool.test",
				ImportState:             true,
				ImportStateId:           name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				Config:            config(""),
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("warm"), knownvalue.Null())},
				Check: checkPoolConfig(name, func(cfg protocol.PoolConfig) error {
					if cfg.Warm != nil {
						return fmt.Errorf("pool config still has warm %+v", cfg.Warm)
					}
					return nil
				}),
			},
		},
	})
}

// Destroying a claim of two runners in a pool whose class keeps one hot:
// one goes back with a hot deadline (a day ahead: the target has no
// schedule), the other for idle_timeout; both are in the queue.
func TestAccClaim_releaseKeepsHot(t *testing.T) {
	e := newClaimEnv(t, "acc-hot")
	e.poolSettings = `warm = { large = { hot = 1 } }`
	var seeded []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.seed(2, agentsim.SeedSpec{}, &seeded)},
			{Config: e.poolConfig() + e.claimConfig("test", `instance_count = 2`), ConfigStateChecks: counts("ec2runners_claim.test", 2, 0)},
			{
				Config: e.poolConfig(),
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateIdle, "", &seeded),
					e.checkQueueHolds(&seeded),
					func(*terraform.State) error {
						recs, err := e.records()
						if err != nil {
							return err
						}
						var hot, idle int
						for _, id := range seeded {
							until, err := protocol.ParseTime(recs[id].Threshold)
							switch {
							case err != nil:
								return err
							case time.Until(until) > protocol.MaxHotAge-time.Hour:
								hot++
							case time.Until(until) <= 7*time.Minute:
								idle++
							}
						}
						if hot != 1 || idle != 1 {
							return fmt.Errorf("%d runner(s) kept hot and %d idle for idle_timeout, want 1 and 1", hot, idle)
						}
						return nil
					},
				),
			},
		},
	})
}
