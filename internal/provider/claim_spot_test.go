package provider

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

// TestAccClaim_spotFallback: EC2 short of spot capacity, as the fault
// proxy answers CreateFleet with EC2's own capacity errors (the emulator
// always fills a fleet). A spot claim of 2 that EC2 has 1 spot instance
// for (a partial fill, InsufficientInstanceCapacity) takes the spot one and
// an on-demand one, and its state says which is which; the ClientTokens
// are honoured as AWS does, so the on-demand fleet must not reuse the spot
// fleet's. Released, each goes back to the pool as what it is: a later
// spot claim takes the spot runner only, an on-demand claim the on-demand
// one. A spot claim without a fallback fails on EC2's error, leaving
// nothing behind.
func TestAccClaim_spotFallback(t *testing.T) {
	skipOnRealAWS(t, "the fault proxy makes EC2 short of spot capacity in front of the emulator; AWS's capacity is what it is")
	e := newClaimEnv(t, "acc-spot")
	proxy, err := faultproxy.New(os.Getenv("AWS_ENDPOINT_URL"), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	proxy.SetRealism(faultproxy.Realism{ClientTokens: true})
	e.claimsSettings = fmt.Sprintf(`endpoints {
    dynamodb = %[1]q
    ec2      = %[1]q
    sqs      = %[1]q
    sts      = %[1]q
  }`, proxy.URL)
	var fallback []string // the spot claim's: [spot, on-demand]
	spotOne, onDemandOne := func() []string { return fallback[:1] }, func() []string { return fallback[1:] }
	first := e.claimConfig("spot", `
  run_id         = "run-spot"
  usage_class    = "spot"
  instance_count = 2`)
	second := e.claimConfig("spot2", `
  run_id         = "run-spot2"
  usage_class    = "spot"
  instance_count = 2`)
	onDemand := e.claimConfig("od", `run_id = "run-od"`)
	strict := e.claimConfig("strict", `
  run_id        = "run-strict"
  usage_class   = "spot"
  spot_fallback = "none"`)
	claimAt := func(name string, i int, source, usage string) []statecheck.StateCheck {
		at := tfjsonpath.New("instances").AtSliceIndex(i)
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue("ec2runners_claim."+name, at.AtMapKey("source"), knownvalue.StringExact(source)),
			statecheck.ExpectKnownValue("ec2runners_claim."+name, at.AtMapKey("usage_class"), knownvalue.StringExact(usage)),
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig(), Check: e.watchFleet(agentsim.Healthy)},
			{
				PreConfig: func() { proxy.SetShortages(faultproxy.SpotShortage(1, faultproxy.InsufficientInstanceCapacity)) },
				Config:    e.poolConfig() + first,
				ConfigStateChecks: append(append(counts("ec2runners_claim.spot", 0, 2),
					statecheck.ExpectKnownValue("ec2runners_claim.spot", tfjsonpath.New("spot_fallback"), knownvalue.StringExact("on-demand"))),
					append(claimAt("spot", 0, "fleet", protocol.UsageSpot), claimAt("spot", 1, "fleet", protocol.UsageOnDemand)...)...),
				Check: resource.ComposeTestCheckFunc(
					captureIDs("ec2runners_claim.spot", &fallback),
					e.checkUsageClasses(&fallback, protocol.UsageSpot, protocol.UsageOnDemand),
					func(*terraform.State) error {
						if n := proxy.Stats().FleetsShort; n != 1 {
							return fmt.Errorf("%d fleets short of spot capacity, want the claim's one", n)
						}
						return nil
					},
				),
			},
			{
				// Destroyed: both back in the pool, each as what it is.
				Config: e.poolConfig(),
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateIdle, "", &fallback),
					e.checkQueueHolds(&fallback),
					e.checkQueuedUsageClasses(&fallback, protocol.UsageSpot, protocol.UsageOnDemand),
				),
			},
			{
				// No spot capacity at all now: a spot claim of 2 takes the
				// spot runner from the pool, not the on-demand one, and
				// launches the other on-demand (a spot fleet that launched
				// nothing, then an on-demand one for as many: with the
				// same ClientToken, EC2 would answer the spot fleet's
				// answer again).
				PreConfig: func() { proxy.SetShortages(faultproxy.SpotShortage(0, faultproxy.MaxSpotInstanceCountExceeded)) },
				Config:    e.poolConfig() + second,
				ConfigStateChecks: append(append(counts("ec2runners_claim.spot2", 1, 1),
					claimAt("spot2", 0, "pool", protocol.UsageSpot)...), claimAt("spot2", 1, "fleet", protocol.UsageOnDemand)...),
				Check: resource.ComposeTestCheckFunc(
					func(s *terraform.State) error {
						ids, err := stateIDs(s, "ec2runners_claim.spot2")
						if err == nil && (len(ids) != 2 || ids[0] != spotOne()[0] || ids[1] == onDemandOne()[0]) {
							err = fmt.Errorf("spot2 holds %v, want %s and a new instance", ids, spotOne()[0])
						}
						return err
					},
					func(s *terraform.State) error {
						ids := onDemandOne()
						return e.checkRecords(protocol.StateIdle, "", &ids)(s)
					},
				),
			},
			{
				Config: e.poolConfig() + second + onDemand,
				ConfigStateChecks: append(append(counts("ec2runners_claim.od", 1, 0), claimAt("od", 0, "pool", protocol.UsageOnDemand)...),
					// Nothing to fall back from.
					statecheck.ExpectKnownValue("ec2runners_claim.od", tfjsonpath.New("spot_fallback"), knownvalue.Null())),
				Check: checkClaimHolds("ec2runners_claim.od", onDemandOne),
			},
			{
				// Without a fallback, EC2's error fails the claim.
				Config:      e.poolConfig() + second + onDemand + strict,
				ExpectError: regexp.MustCompile(wrapped(`CreateFleet launched 0 of 1 spot instance\(s\) \(MaxSpotInstanceCountExceeded: Max spot instance count exceeded\)`)),
			},
			{
				Config: e.poolConfig() + second + onDemand,
				Check: resource.ComposeTestCheckFunc(
					e.checkNoneHeldBy("run-strict"),
					e.checkLaunchedTerminated("run-strict", 0),
				),
			},
		},
	})
}

// checkUsageClasses asserts the usage classes of instances' records, in
// order.
func (e *claimEnv) checkUsageClasses(ids *[]string, usage ...string) func(*terraform.State) error {
	return func(*terraform.State) error {
		recs, err := e.records()
		if err != nil {
			return err
		}
		if len(*ids) != len(usage) {
			return fmt.Errorf("instances %v, want %d", *ids, len(usage))
		}
		for i, id := range *ids {
			if r := recs[id]; r.UsageClass != usage[i] {
				return fmt.Errorf("instance %s: record of usage class %q, want %s", id, r.UsageClass, usage[i])
			}
		}
		return nil
	}
}

// checkQueuedUsageClasses asserts the usage classes the queue's messages of
// instances carry, in order.
func (e *claimEnv) checkQueuedUsageClasses(ids *[]string, usage ...string) func(*terraform.State) error {
	return func(*terraform.State) error {
		msgs, err := e.queueMessages()
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, m := range msgs {
			got[m.ID] = m.UsageClass
		}
		for i, id := range *ids {
			if got[id] != usage[i] {
				return fmt.Errorf("the message of %s says usage class %q, want %s (queue %v)", id, got[id], usage[i], got)
			}
		}
		return nil
	}
}

// checkClaimHolds asserts that a claim holds exactly the instances want
// returns.
func checkClaimHolds(address string, want func() []string) func(*terraform.State) error {
	return func(s *terraform.State) error {
		ids, err := stateIDs(s, address)
		if err == nil && fmt.Sprint(ids) != fmt.Sprint(want()) {
			err = fmt.Errorf("%s holds %v, want %v", address, ids, want())
		}
		return err
	}
}
