package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

// TestAccWarmAction_invoke runs ec2runners_warm from an action_trigger and
// with terraform apply -invoke: the first fills the pool's targets (a hot
// runner queued, a stopped one), the second, after a claim took them,
// fills them again and reports the counts. The pool is made outside
// Terraform: a pool's apply fills its targets too, and would do the
// action's work.
func TestAccWarmAction_invoke(t *testing.T) {
	e := newClaimEnv(t, "acc-warmact", tierTimings)
	ctx := context.Background()
	e.createPool(map[string]protocol.WarmTarget{"large": {Hot: 1, Stopped: 1}})
	e.sim.WatchFleet(ctx, func(string, int) agentsim.Behavior { return agentsim.Healthy })
	counts := func(want maintenance.TierCounts) func(*terraform.State) error {
		return func(*terraform.State) error {
			got, err := maintenance.WarmStatus(ctx, &claim.Claimer{DynamoDB: testClients.DynamoDB, SQS: testClients.SQS, EC2: testClients.EC2}, e.pool)
			if err != nil {
				return err
			}
			if got["large"] != want {
				return fmt.Errorf("warm status %+v, want %+v", got["large"], want)
			}
			return nil
		}
	}
	full := maintenance.TierCounts{Hot: 1, HotTarget: 1, Stopped: 1, StoppedTarget: 1}
	action, onCreate := e.poolAction("ec2runners_warm")
	resource.ParallelTest(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config: onCreate,
			Check:  resource.ComposeTestCheckFunc(counts(full), e.awaitStopped(1), e.checkAudit()),
		}},
	})

	// A claim takes both (the pool's forced delete ends them); the action
	// fills them again.
	c := &claim.Claimer{DynamoDB: testClients.DynamoDB, SQS: testClients.SQS, EC2: testClients.EC2}
	res, err := c.Create(ctx, claim.Request{Pool: e.pool, RunID: "run-warm-action", InstanceCount: 2, ResourceClass: "large",
		UsageClass: protocol.UsageOnDemand, AllowedTypes: []string{"*"}, Timings: claim.DefaultTimings()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused != 1 || res.Started != 1 {
		t.Fatalf("the claim reused %d and started %d, want the hot and the stopped runner", res.Reused, res.Started)
	}
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "main.tf"), action)
	out, err := runTerraform(t, dir, "apply", "-invoke=action.ec2runners_warm.now", "-auto-approve")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Pool %s, class large: hot 0 -> 1 of 1, stopped 0 -> 1 of 1", e.pool)
	if !strings.Contains(out, want) {
		t.Errorf("terraform apply -invoke reported\n%s\nwant the progress message %q", out, want)
	}
	if err := counts(full)(nil); err != nil {
		t.Error(err)
	}
}
