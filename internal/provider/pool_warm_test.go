package provider

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/audit"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
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
		{Days: []string{"mon", "tue", "wed", "thu", "fri"}, From: "08:00", To: "19:00", TimeZone: "Europe/Berlin", Hot: protocol.Count(4)},
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
						{Days: []string{"sat"}, From: "00:00", To: "24:00", TimeZone: "UTC", Hot: protocol.Count(2)},
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

// A pool whose class keeps one hot fills it at apply (a runner launched,
// ready, queued with a hot deadline a day ahead: no schedule); a claim of
// two takes it and launches the other; the plan then shows the pool lacking
// its hot runner; destroying the claim gives both back, one kept hot (the
// target holds exactly, whichever of the release and the pool's apply
// fills it), the other for idle_timeout.
func TestAccPool_warmHot(t *testing.T) {
	e := newClaimEnv(t, "acc-hot")
	e.poolSettings = `warm = { large = { hot = 1 } }`
	var hot []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				PreConfig: func() { _ = e.watchFleet(agentsim.Healthy)(nil) },
				Config:    e.poolConfig(),
				ConfigStateChecks: []statecheck.StateCheck{
					warmStatus("ec2runners_pool.test", "large", 1, 1, 0, 0),
				},
				Check: e.checkWarm(map[protocol.Tier]int{protocol.TierHot: 1}, &hot),
			},
			{
				Config:             e.poolConfig() + e.claimConfig("test", `instance_count = 2`),
				ConfigStateChecks:  counts("ec2runners_claim.test", 1, 1),
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ec2runners_pool.test", plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue("ec2runners_pool.test", tfjsonpath.New("warm_status")),
				}},
			},
			{
				Config:            e.poolConfig(),
				ConfigStateChecks: []statecheck.StateCheck{warmStatus("ec2runners_pool.test", "large", 1, 1, 0, 0)},
				Check:             e.checkWarm(map[protocol.Tier]int{protocol.TierHot: 1}, nil),
			},
		},
	})
}

// warmStatus checks a class's counts in the pool's warm_status.
func warmStatus(address, class string, hot, hotTarget, stopped, stoppedTarget int64) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(address, tfjsonpath.New("warm_status").AtMapKey(class), knownvalue.ObjectExact(map[string]knownvalue.Check{
		"hot": knownvalue.Int64Exact(hot), "hot_target": knownvalue.Int64Exact(hotTarget),
		"stopped": knownvalue.Int64Exact(stopped), "stopped_target": knownvalue.Int64Exact(stoppedTarget),
	}))
}

// checkWarm checks the pool's idle runners: how many are in each tier (hot:
// idle past a day less an hour; stopped: with a stopped time), that every
// idle runner not yet in its stopped time is in the queue, and nothing
// else; it appends the hot ones to hot when not nil.
func (e *claimEnv) checkWarm(want map[protocol.Tier]int, hot *[]string) func(*terraform.State) error {
	return func(*terraform.State) error {
		recs, err := e.records()
		if err != nil {
			return err
		}
		got := map[protocol.Tier]int{}
		var queued []string
		for id, r := range recs {
			if r.State != protocol.StateIdle {
				continue
			}
			until, err := protocol.ParseTime(r.Threshold)
			switch {
			case err != nil:
				return err
			case r.StopUntil != "":
				got[protocol.TierStopped]++
				if r.Stopped(time.Now()) {
					continue // found through its slot: no message
				}
			case time.Until(until) > protocol.MaxHotAge-time.Hour:
				got[protocol.TierHot]++
				if hot != nil {
					*hot = append(*hot, id)
				}
			}
			queued = append(queued, id)
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("warm runners by tier %v, want %v", got, want)
		}
		return e.checkQueueHolds(&queued)(nil)
	}
}

// tierTimings make the simulated agents stop and resume in seconds: the
// grace past a deadline, the boot after a start, and their self-checks.
func tierTimings(o *agentsim.Options) {
	o.SelfTerminationGrace, o.BootDelay, o.SelfCheckInterval = 2*time.Second, time.Second, time.Second
}

// The tiers end to end: the pool's apply fills both targets (a hot runner
// queued once ready, a stopped one that prepares and stops itself); a claim
// of three takes the hot one, starts the stopped one and launches the
// third, in one apply, and the plan then shows the pool lacking; destroying
// the claim restores both targets. The audit finds nothing amiss after each.
func TestAccPool_warmTiers(t *testing.T) {
	e := newClaimEnv(t, "acc-tiers", tierTimings)
	e.poolSettings = `warm = { large = { hot = 1, stopped = 1 } }`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				PreConfig:         func() { _ = e.watchFleet(agentsim.Healthy)(nil) },
				Config:            e.poolConfig(),
				ConfigStateChecks: []statecheck.StateCheck{warmStatus("ec2runners_pool.test", "large", 1, 1, 1, 1)},
				Check: resource.ComposeTestCheckFunc(
					e.checkWarm(map[protocol.Tier]int{protocol.TierHot: 1, protocol.TierStopped: 1}, nil),
					e.awaitStopped(1),
					e.checkAudit(),
				),
			},
			{
				Config: e.poolConfig() + e.claimConfig("test", `instance_count = 3`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("reused_count"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("started_count"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("created_count"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("instances"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectPartial(map[string]knownvalue.Check{"source": knownvalue.StringExact("pool")}),
						knownvalue.ObjectPartial(map[string]knownvalue.Check{"source": knownvalue.StringExact("stopped")}),
						knownvalue.ObjectPartial(map[string]knownvalue.Check{"source": knownvalue.StringExact("fleet")}),
					})),
				},
				Check: e.checkAudit(),
				// The claim took both warm runners: the pool lacks them, and
				// its plan says so.
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue("ec2runners_pool.test", tfjsonpath.New("warm_status")),
				}},
			},
			{
				Config:            e.poolConfig(),
				ConfigStateChecks: []statecheck.StateCheck{warmStatus("ec2runners_pool.test", "large", 1, 1, 1, 1)},
				Check: resource.ComposeTestCheckFunc(
					e.checkWarm(map[protocol.Tier]int{protocol.TierHot: 1, protocol.TierStopped: 1}, nil),
					e.checkAudit(),
				),
			},
		},
	})
}

// awaitStopped waits until n of the pool's instances are stopped in EC2: a
// claim starts only those EC2 says are stopped.
func (e *claimEnv) awaitStopped(n int) func(*terraform.State) error {
	return func(*terraform.State) error {
		return await.Poll(await.Patience, func() error {
			live, err := pool.LiveInstances(context.Background(), testClients.EC2, e.pool, ec2types.Filter{
				Name: aws.String("instance-state-name"), Values: []string{string(ec2types.InstanceStateNameStopped)},
			})
			if err != nil {
				return err
			}
			if len(live) != n {
				return fmt.Errorf("%d instance(s) stopped, want %d", len(live), n)
			}
			return nil
		})
	}
}

// checkAudit runs the pool audit: every runner owned by one claim, or idle
// with its message or in its stopped time, or terminated; nothing untracked.
func (e *claimEnv) checkAudit() func(*terraform.State) error {
	return func(*terraform.State) error {
		rep, err := audit.Pool(context.Background(), audit.Clients{DynamoDB: testClients.DynamoDB, SQS: testClients.SQS, EC2: testClients.EC2}, e.pool)
		if err != nil {
			return err
		}
		if !rep.OK() {
			return fmt.Errorf("audit: %s", rep)
		}
		return nil
	}
}

// A schedule window open now raises the hot target: the apply fills it, the
// runner kept until the window closes; with the window on other days only,
// the target is the base one (none) and the pool lacks nothing: the runner
// already kept stays until its window closes.
func TestAccPool_warmSchedule(t *testing.T) {
	e := newClaimEnv(t, "acc-sched", tierTimings)
	zone, today, closes := openWindow(t, time.Now())
	window := func(days string) string {
		return fmt.Sprintf(`warm = { large = { schedule = [{ days = [%s], from = "00:00", to = "24:00", time_zone = %q, hot = 1 }] } }`, days, zone)
	}
	var others []string
	for _, d := range protocol.WeekDays {
		if d != today {
			others = append(others, strconv.Quote(d))
		}
	}
	e.poolSettings = window(strconv.Quote(today))
	todayOpen := e.poolConfig()
	e.poolSettings = window(strings.Join(others, ", "))
	otherDays := e.poolConfig()
	var hot []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				PreConfig:         func() { _ = e.watchFleet(agentsim.Healthy)(nil) },
				Config:            todayOpen,
				ConfigStateChecks: []statecheck.StateCheck{warmStatus("ec2runners_pool.test", "large", 1, 1, 0, 0)},
				Check: resource.ComposeTestCheckFunc(
					func(*terraform.State) error {
						recs, err := e.records()
						if err != nil {
							return err
						}
						for id, r := range recs {
							if r.State == protocol.StateIdle {
								hot = append(hot, id)
							}
						}
						if len(hot) != 1 || recs[hot[0]].Threshold != protocol.FormatTime(closes) {
							return fmt.Errorf("idle runners %v, want one kept hot until the window closes at %s", hot, protocol.FormatTime(closes))
						}
						return nil
					},
					e.checkQueueHolds(&hot),
				),
			},
			{
				// The runner kept for today's window keeps its slot to the
				// end: more than the target, nothing lacks.
				Config:            otherDays,
				ConfigStateChecks: []statecheck.StateCheck{warmStatus("ec2runners_pool.test", "large", 1, 0, 0, 0)},
			},
		},
	})
}

// openWindow picks a fixed-offset time zone in which now is at least two
// hours from midnight, so that a whole-day window of today is open for the
// whole test: the zone, today's day name in it, and when its day ends.
func openWindow(t *testing.T, now time.Time) (zone, day string, closes time.Time) {
	t.Helper()
	for _, zone := range []string{"UTC", "Etc/GMT-12", "Etc/GMT+12"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		local := now.In(loc)
		if h := local.Hour(); h >= 2 && h < 22 {
			midnight := time.Date(local.Year(), local.Month(), local.Day()+1, 0, 0, 0, 0, loc)
			return zone, protocol.WeekDays[local.Weekday()], midnight
		}
	}
	t.Fatal("no zone puts now two hours from midnight")
	return "", "", time.Time{}
}

// A warm runner of an outdated launch template version is replaced at the
// pool's next apply: the pool launches $Latest, a new version appears, the
// stopped runner of the old one is retired and a new one launched.
func TestAccPool_warmReplacesOutdated(t *testing.T) {
	e := newClaimEnv(t, "acc-outdated", tierTimings)
	var first []string
	newVersion := func() {
		_, err := testClients.EC2.CreateLaunchTemplateVersion(context.Background(), &ec2.CreateLaunchTemplateVersionInput{
			LaunchTemplateId:   aws.String(e.launchTemplate),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(testImage(t))},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	stoppedIDs := func(ids *[]string, version string) func(*terraform.State) error {
		return func(*terraform.State) error {
			recs, err := e.records()
			if err != nil {
				return err
			}
			var got []string
			for id, r := range recs {
				if r.State == protocol.StateIdle && r.StopUntil != "" {
					if r.TemplateVersion != version {
						return fmt.Errorf("%s is of launch template version %q, want %s", id, r.TemplateVersion, version)
					}
					got = append(got, id)
				}
			}
			if len(got) != 1 {
				return fmt.Errorf("stopped tier %v, want one runner", got)
			}
			*ids = got
			return nil
		}
	}
	var second []string
	e.poolSettings = `warm = { large = { stopped = 1 } }`
	before := e.poolConfig()
	// $Latest: a new template version makes the runners of the old one
	// outdated; the pool's apply (this change) then replaces them.
	latest := strings.Replace(before, `instance_selection = "explicit"`, `instance_selection = "explicit"
    launch_template_version = "$Latest"`, 1)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				PreConfig: func() { _ = e.watchFleet(agentsim.Healthy)(nil) },
				Config:    before,
				Check:     stoppedIDs(&first, "1"),
			},
			{
				PreConfig: newVersion,
				Config:    latest,
				Check: resource.ComposeTestCheckFunc(
					stoppedIDs(&second, "2"),
					func(*terraform.State) error {
						recs, err := e.records()
						if err != nil {
							return err
						}
						if r := recs[first[0]]; r.State != protocol.StateTerminated {
							return fmt.Errorf("the outdated runner %s is %s, want terminated", first[0], r.State)
						}
						return nil
					},
					e.checkAudit(),
				),
			},
		},
	})
}

// A stopped runner that does not come back healthy after its start is
// terminated, and the claim launches another instead, within its apply.
// The pool is made and filled outside Terraform, so that its plan (which
// would show the stopped tier lacking, unless a claim's top-up came first)
// is not part of the test.
func TestAccClaim_stoppedRunnerNotBackReplaced(t *testing.T) {
	e := newClaimEnv(t, "acc-noresume", tierTimings)
	ctx := context.Background()
	e.createPool(map[string]protocol.WarmTarget{"large": {Stopped: 1}})
	// The fill's runner, the first the pool launches, never comes back; the
	// claim's replacement is healthy.
	e.sim.WatchFleet(ctx, func(_ string, index int) agentsim.Behavior {
		if index == 0 {
			return agentsim.NoResume
		}
		return agentsim.Healthy
	})
	res, err := maintenance.Warm(ctx, &claim.Claimer{DynamoDB: testClients.DynamoDB, SQS: testClients.SQS, EC2: testClients.EC2}, e.pool, maintenance.WarmOptions{Timings: claim.DefaultTimings()})
	if err != nil || len(res.Launched) != 1 {
		t.Fatalf("filling the pool: launched %v, %v", res.Launched, err)
	}
	stopped := res.Launched
	if err := e.awaitStopped(1)(nil); err != nil {
		t.Fatal(err)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
%s
resource "ec2runners_claim" "test" {
  provider              = ec2runnersclaims
  pool                  = %q
  instance_count        = 1
  fleet_validation_wait = "30s"
}
`, e.claimsProvider(), e.pool),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("started_count"), knownvalue.Int64Exact(0)),
				statecheck.ExpectKnownValue("ec2runners_claim.test", tfjsonpath.New("created_count"), knownvalue.Int64Exact(1)),
			},
			Check: resource.ComposeTestCheckFunc(
				func(*terraform.State) error {
					recs, err := e.records()
					if r := recs[stopped[0]]; err == nil && r.State != protocol.StateTerminated {
						return fmt.Errorf("the stopped runner that never came back is %s, want terminated", r.State)
					}
					return err
				},
				checkEC2Terminated(&stopped),
				e.checkAudit(),
			),
		}},
	})
}
