package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

// TestAccRunnersDataSource_basic lists a pool's runners in each state: a
// fill leaves a hot runner and a stopped one, a claim takes the hot one,
// and a second fill brings a new hot one. The CI role reads them, as a
// claim stack would.
func TestAccRunnersDataSource_basic(t *testing.T) {
	e := newClaimEnv(t, "acc-runners", tierTimings)
	ctx := context.Background()
	e.createPool(map[string]protocol.WarmTarget{"large": {Hot: 1, Stopped: 1}})
	e.sim.WatchFleet(ctx, func(string, int) agentsim.Behavior { return agentsim.Healthy })
	c := &claim.Claimer{DynamoDB: testClients.DynamoDB, SQS: testClients.SQS, EC2: testClients.EC2}
	fill := func() {
		t.Helper()
		if _, err := maintenance.Warm(ctx, c, e.pool, maintenance.WarmOptions{Timings: claim.DefaultTimings()}); err != nil {
			t.Fatal(err)
		}
	}
	fill()
	if err := e.awaitStopped(1)(nil); err != nil {
		t.Fatal(err)
	}
	res, err := c.Create(ctx, claim.Request{Pool: e.pool, RunID: "run-runners", InstanceCount: 1, ResourceClass: "large",
		UsageClass: protocol.UsageOnDemand, AllowedTypes: []string{"*"}, Timings: claim.DefaultTimings()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused != 1 {
		t.Fatalf("the claim reused %d runners, want the hot one", res.Reused)
	}
	fill()

	runner := func(state string, runID knownvalue.Check) knownvalue.Check {
		return knownvalue.ObjectExact(map[string]knownvalue.Check{
			"id":             knownvalue.StringRegexp(regexp.MustCompile(`^i-`)),
			"resource_class": knownvalue.StringExact("large"),
			"instance_type":  knownvalue.NotNull(),
			"usage_class":    knownvalue.StringExact(protocol.UsageOnDemand),
			"state":          knownvalue.StringExact(state),
			"run_id":         runID,
			"launched_at":    knownvalue.StringRegexp(regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)),
			"age":            knownvalue.StringRegexp(regexp.MustCompile(`^\d+(m\d+s|m|s)$`)),
		})
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
%s
data "ec2runners_runners" "test" {
  provider = ec2runnersclaims
  pool     = %q
}
`, e.claimsProvider(), e.pool),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.ec2runners_runners.test", tfjsonpath.New("runners"), knownvalue.SetExact([]knownvalue.Check{
					runner(claim.RunnerClaimed, knownvalue.StringExact("run-runners")),
					runner(claim.RunnerIdle, knownvalue.Null()),
					runner(claim.RunnerStopped, knownvalue.Null()),
				})),
			},
		}},
	})
}

func TestAccRunnersDataSource_notFound(t *testing.T) {
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config:      `data "ec2runners_runners" "test" { pool = "` + randomName("acc-missing") + `" }`,
			ExpectError: regexp.MustCompile(`(?s)Cannot list the runners of pool acc-missing-.*pool not found`),
		}},
	})
}
