package provider

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

func counts(address string, reused, created int) []statecheck.StateCheck {
	return []statecheck.StateCheck{
		statecheck.ExpectKnownValue(address, tfjsonpath.New("reused_count"), knownvalue.Int64Exact(int64(reused))),
		statecheck.ExpectKnownValue(address, tfjsonpath.New("created_count"), knownvalue.Int64Exact(int64(created))),
		statecheck.ExpectKnownValue(address, tfjsonpath.New("instance_ids"), knownvalue.ListSizeExact(reused+created)),
	}
}

func TestAccClaim_reuse(t *testing.T) {
	e := newClaimEnv(t, "acc-reuse")
	var seeded []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.seed(2, agentsim.SeedSpec{}, &seeded)},
			{
				Config: e.poolConfig() + e.claimConfig("test", `
  run_id         = "run-reuse"
  instance_count = 2
  fleet_fallback = false`),
				ConfigStateChecks: append(counts("ec2runners_claim.test", 2, 0),
					statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("label"), knownvalue.StringRegexp(regexp.MustCompile(`^run-reuse-[a-z2-7]{13}$`))),
					statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("id"), knownvalue.StringExact(e.pool+"/run-reuse")),
					statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("instances").AtSliceIndex(0).AtMapKey("source"), knownvalue.StringExact("pool")),
				),
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateRunning, "run-reuse", &seeded),
					func(s *terraform.State) error {
						ids, err := stateIDs(s, "ec2runners_claim.test")
						sort.Strings(ids)
						want := slices.Sorted(slices.Values(seeded))
						if err == nil && !slices.Equal(ids, want) {
							err = fmt.Errorf("claim holds %v, want the seeded %v", ids, want)
						}
						return err
					},
					func(*terraform.State) error {
						for _, id := range seeded {
							if regs := e.sim.Registrations(id); !slices.Equal(regs, []string{"run-reuse"}) {
								return fmt.Errorf("%s registered for %v", id, regs)
							}
						}
						return e.sim.Err()
					},
				),
			},
		},
	})
}

func TestAccClaim_mismatchStaysInPool(t *testing.T) {
	e := newClaimEnv(t, "acc-mismatch")
	var seeded, created []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: resource.ComposeTestCheckFunc(
				e.seed(1, agentsim.SeedSpec{InstanceType: "m6i.large"}, &seeded),
				e.seed(1, agentsim.SeedSpec{UsageClass: protocol.UsageSpot}, &seeded),
				e.watchFleet(agentsim.Healthy),
			)},
			{
				Config: e.poolConfig() + e.claimConfig("test", `
  allowed_instance_types = ["c*"]`),
				ConfigStateChecks: counts("ec2runners_claim.test", 0, 1),
				Check: resource.ComposeTestCheckFunc(
					captureIDs("ec2runners_claim.test", &created),
					e.checkRecords(protocol.StateIdle, "", &seeded),
					e.checkQueueHolds(&seeded),
				),
			},
		},
	})
}

func TestAccClaim_discardsExpiredAndMalformed(t *testing.T) {
	e := newClaimEnv(t, "acc-discard")
	var expired, none []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: resource.ComposeTestCheckFunc(
				e.seed(1, agentsim.SeedSpec{IdleTimeout: -time.Minute}, &expired),
				e.sendRaw(`{"id": "i-broken", "resourceClass": "large"`),
				e.sendRaw(`{"id":"i-0123","resourceClass":"large","instanceType":"c6i.large","cpu":4,"mmem":8192,"usageClass":"on-demand","threshold":"2099-01-01T00:00:00Z"}`),
				e.watchFleet(agentsim.Healthy),
			)},
			{
				Config:            e.poolConfig() + e.claimConfig("test", ""),
				ConfigStateChecks: counts("ec2runners_claim.test", 0, 1),
				Check:             e.checkQueueHolds(&none),
			},
		},
	})
}

func TestAccClaim_emptyPoolUsesFleet(t *testing.T) {
	e := newClaimEnv(t, "acc-fleet")
	var created []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.watchFleet(agentsim.Healthy)},
			{
				Config: e.poolConfig() + e.claimConfig("test", `
  run_id         = "run-fleet"
  instance_count = 2`),
				ConfigStateChecks: append(counts("ec2runners_claim.test", 0, 2),
					statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("instances").AtSliceIndex(1).AtMapKey("source"), knownvalue.StringExact("fleet")),
					statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("instances").AtSliceIndex(1).AtMapKey("usage_class"), knownvalue.StringExact("on-demand")),
				),
				Check: resource.ComposeTestCheckFunc(
					captureIDs("ec2runners_claim.test", &created),
					e.checkRecords(protocol.StateRunning, "run-fleet", &created),
				),
			},
		},
	})
}

func TestAccClaim_mixedReuseAndFleet(t *testing.T) {
	e := newClaimEnv(t, "acc-mixed")
	var seeded []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: resource.ComposeTestCheckFunc(
				e.seed(1, agentsim.SeedSpec{}, &seeded),
				e.watchFleet(agentsim.Healthy),
			)},
			{
				Config:            e.poolConfig() + e.claimConfig("test", `instance_count = 3`),
				ConfigStateChecks: counts("ec2runners_claim.test", 1, 2),
			},
		},
	})
}

// Warm runners that fail their checks are replaced: a dead one (no
// heartbeat) is terminated; a live one that has not registered when
// registration_wait ends is given back to the pool, and terminated only if
// it does not confirm that release either.
func TestAccClaim_unhealthyRunnerReplaced(t *testing.T) {
	e := newClaimEnv(t, "acc-unhealthy", func(o *agentsim.Options) { o.RegisterDelay = 25 * time.Second })
	var sick, silent, slow []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: resource.ComposeTestCheckFunc(
				e.seed(1, agentsim.SeedSpec{Behavior: agentsim.NoHeartbeat}, &sick),
				e.seed(1, agentsim.SeedSpec{Behavior: agentsim.NeverRegisters}, &silent),
				e.seed(1, agentsim.SeedSpec{Behavior: agentsim.SlowRegister}, &slow),
				e.watchFleet(agentsim.Healthy),
			)},
			{
				Config: e.poolConfig() + e.claimConfig("test", `
  run_id            = "run-sick"
  instance_count    = 2
  registration_wait = "15s"
  release_wait      = "45s"`),
				ConfigStateChecks: counts("ec2runners_claim.test", 0, 2),
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateTerminated, "run-sick", &sick),
					checkEC2Terminated(&sick),
					// Given back, it never confirmed its release.
					e.checkRecords(protocol.StateTerminated, "", &silent),
					checkEC2Terminated(&silent),
					// Given back, it registered late, then left the run.
					e.checkRecords(protocol.StateIdle, "", &slow),
					e.checkQueueHolds(&slow),
				),
			},
		},
	})
}

func TestAccClaim_neverRegisteringFleetInstanceFailsClaim(t *testing.T) {
	e := newClaimEnv(t, "acc-noreg")
	var seeded []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: resource.ComposeTestCheckFunc(
				e.seed(1, agentsim.SeedSpec{}, &seeded),
				e.watchFleet(agentsim.NeverRegisters),
			)},
			{
				Config: e.poolConfig() + e.claimConfig("test", `
  run_id                = "run-noreg"
  instance_count        = 2
  fleet_validation_wait = "4s"`),
				ExpectError: regexp.MustCompile(wrapped(`(?s)claim of 2 large runner\(s\) for run run-noreg .*failed: .*no UD_REG_OK for run run-noreg.*reused 1, created 1`)),
			},
			{
				// Nothing is orphaned: the warm runner is back in the pool,
				// the launched one terminated, no claim record is left.
				Config: e.poolConfig(),
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateIdle, "", &seeded),
					e.checkQueueHolds(&seeded),
					e.checkNoneHeldBy("run-noreg"),
					e.checkLaunchedTerminated("run-noreg", 1),
				),
			},
		},
	})
}

func TestAccClaim_destroyReturnsRunnersForReuse(t *testing.T) {
	e := newClaimEnv(t, "acc-cycle")
	var first, second []string
	claim := e.claimConfig("test", `instance_count = 2`)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.watchFleet(agentsim.Healthy)},
			{
				Config:            e.poolConfig() + claim,
				ConfigStateChecks: counts("ec2runners_claim.test", 0, 2),
				Check:             captureIDs("ec2runners_claim.test", &first),
			},
			{
				Config: e.poolConfig(), // destroys the claim: its runners go back
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateIdle, "", &first),
					e.checkQueueHolds(&first),
				),
			},
			{
				Config:            e.poolConfig() + claim,
				ConfigStateChecks: counts("ec2runners_claim.test", 2, 0),
				Check: resource.ComposeTestCheckFunc(
					captureIDs("ec2runners_claim.test", &second),
					func(*terraform.State) error {
						if !slices.Equal(slices.Sorted(slices.Values(first)), slices.Sorted(slices.Values(second))) {
							return fmt.Errorf("second claim holds %v, want the first's %v", second, first)
						}
						return nil
					},
				),
			},
		},
	})
}

func TestAccClaim_import(t *testing.T) {
	e := newClaimEnv(t, "acc-claimimport")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.watchFleet(agentsim.Healthy)},
			{Config: e.poolConfig() + e.claimConfig("test", `
  run_id      = "run-import"
  max_runtime = "20m"`)},
			{
				ResourceName:            "ec2runners_claim.test",
				ImportState:             true,
				ImportStateId:           e.pool + "/run-import",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				ResourceName:  "ec2runners_claim.test",
				ImportState:   true,
				ImportStateId: "run-import",
				ExpectError:   regexp.MustCompile(`Import a claim as <pool>/<run_id>`),
			},
			{
				ResourceName:  "ec2runners_claim.test",
				ImportState:   true,
				ImportStateId: e.pool + "/Run-import",
				ExpectError:   regexp.MustCompile(wrapped(`run id "Run-import" must be lower case`)),
			},
		},
	})
}

// TestAccClaim_durationSpelling: a claim's durations keep the spelling of
// the configuration in the state, though its record holds them as
// durations: a refresh shows no change, which would replace the claim.
func TestAccClaim_durationSpelling(t *testing.T) {
	e := newClaimEnv(t, "acc-claimspelling")
	config := e.poolConfig() + e.claimConfig("test", `
  max_runtime           = "1200s"
  heartbeat_max_age     = "0.5m"
  registration_wait     = "60s"
  fleet_validation_wait = "240s"
  release_wait          = "1m30s"`)
	spelt := func(attribute, want string) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New(attribute), knownvalue.StringExact(want))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.watchFleet(agentsim.Healthy)},
			{Config: config},
			{
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				ConfigStateChecks: []statecheck.StateCheck{
					spelt("max_runtime", "1200s"), spelt("heartbeat_max_age", "0.5m"), spelt("registration_wait", "60s"),
					spelt("fleet_validation_wait", "240s"), spelt("release_wait", "1m30s"),
				},
			},
		},
	})
}

// TestAccClaim_race applies 8 claims of 2 at once against 10 idle runners:
// every claim succeeds, each runner is claimed at most once, and every warm
// runner no claim took is still idle in the pool with its message. The
// claims see AWS as it is, not as the emulator is (the whole realism
// layer): every SQS message is delivered twice, receives are sampled,
// visibility timeouts run out mid-claim, ClientTokens are honoured,
// DynamoDB refuses writes meeting a transaction, EC2 knows new instances
// late, and the agents' clocks run a minute behind the provider's. So a claim can find
// the queue empty while other claims hold the last messages in flight, and
// launch instead: a warm runner missed is slower, never lost; and a
// claimed runner's message deleted with a superseded handle stays behind,
// stale, for the next claim to drop.
func TestAccClaim_race(t *testing.T) {
	skipOnRealAWS(t, "the fault proxy's realism layer plays AWS's semantics in front of the emulator; it forwards to one endpoint, not to AWS's")
	e := newClaimEnv(t, "acc-race", func(o *agentsim.Options) { o.ClockSkew = -time.Minute })
	proxy, err := faultproxy.New(os.Getenv("AWS_ENDPOINT_URL"), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	proxy.SetRealism(faultproxy.WholeRealism())
	e.claimsSettings = fmt.Sprintf(`endpoints {
    dynamodb = %[1]q
    ec2      = %[1]q
    sqs      = %[1]q
    sts      = %[1]q
  }`, proxy.URL)
	var seeded []string
	claims := ""
	for i := range 8 {
		claims += e.claimConfig(fmt.Sprintf("c%d", i), `instance_count = 2`)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: resource.ComposeTestCheckFunc(
				e.seed(10, agentsim.SeedSpec{}, &seeded),
				e.watchFleet(agentsim.Healthy),
			)},
			{
				Config: e.poolConfig() + claims,
				Check: func(s *terraform.State) error {
					owner := map[string]string{}
					reused, created := 0, 0
					for i := range 8 {
						addr := fmt.Sprintf("ec2runners_claim.c%d", i)
						ids, err := stateIDs(s, addr)
						if err != nil {
							return err
						}
						if len(ids) != 2 {
							return fmt.Errorf("%s holds %v", addr, ids)
						}
						for _, id := range ids {
							if prev, dup := owner[id]; dup {
								return fmt.Errorf("instance %s claimed by both %s and %s", id, prev, addr)
							}
							owner[id] = addr
							if slices.Contains(seeded, id) {
								reused++
							} else {
								created++
							}
						}
					}
					if reused+created != 16 || reused == 0 {
						return fmt.Errorf("reused %d and created %d, want 16 in all, warm ones among them", reused, created)
					}
					var untaken []string
					for _, id := range seeded {
						if _, taken := owner[id]; !taken {
							untaken = append(untaken, id)
						}
					}
					if err := e.checkRecords(protocol.StateIdle, "", &untaken)(s); err != nil {
						return err
					}
					if err := e.checkQueueHoldsAtLeast(&untaken)(s); err != nil {
						return err
					}
					if st := proxy.Stats(); st.Redelivered == 0 || len(st.RealismErrors) > 0 {
						return fmt.Errorf("%d SQS messages delivered twice (errors %v): the realism did not work", st.Redelivered, st.RealismErrors)
					}
					return nil
				},
			},
		},
	})
}

// checkNoneHeldBy asserts that no instance record is claimed, created or
// running for a run.
func (e *claimEnv) checkNoneHeldBy(runID string) func(*terraform.State) error {
	return func(*terraform.State) error {
		recs, err := e.records()
		if err != nil {
			return err
		}
		var held []string
		for id, r := range recs {
			if r.RunID == runID && r.State != protocol.StateTerminated {
				held = append(held, id+" ("+r.State+")")
			}
		}
		if len(held) > 0 {
			return fmt.Errorf("run %s still holds %s", runID, strings.Join(held, ", "))
		}
		return nil
	}
}

func checkEC2Terminated(ids *[]string) func(*terraform.State) error {
	return func(*terraform.State) error {
		states, err := instanceStates(*ids)
		if err != nil {
			return err
		}
		for _, id := range *ids {
			if st := states[id]; st != ec2types.InstanceStateNameTerminated && st != ec2types.InstanceStateNameShuttingDown {
				return fmt.Errorf("instance %s is %q, want terminated", id, st)
			}
		}
		return nil
	}
}

// checkLaunchedTerminated asserts that the fleet launched n instances for a
// run and that all of them are terminated.
func (e *claimEnv) checkLaunchedTerminated(runID string, n int) func(*terraform.State) error {
	return func(*terraform.State) error {
		out, err := testClients.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + protocol.TagPool), Values: []string{e.pool}},
			{Name: aws.String("tag:" + protocol.TagInitialRunID), Values: []string{runID}},
		}})
		if err != nil {
			return err
		}
		var ids []string
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				ids = append(ids, aws.ToString(i.InstanceId))
			}
		}
		if len(ids) != n {
			return fmt.Errorf("the fleet launched %v for run %s, want %d instance(s)", ids, runID, n)
		}
		return checkEC2Terminated(&ids)(nil)
	}
}

// TestAccClaim_disappears: a claim whose record was deleted behind
// Terraform's back leaves the state, and is planned again.
func TestAccClaim_disappears(t *testing.T) {
	e := newClaimEnv(t, "acc-claimgone")
	config := e.poolConfig() + e.claimConfig("test", `run_id = "run-gone"`)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.watchFleet(agentsim.Healthy)},
			{
				Config: config,
				Check: func(*terraform.State) error {
					_, err := testClients.DynamoDB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
						TableName: aws.String(protocol.TableName(e.pool)), Key: protocol.Key(protocol.TypeClaim, "run-gone"),
					})
					return err
				},
				ExpectNonEmptyPlan: true,
			},
		},
	})
}
