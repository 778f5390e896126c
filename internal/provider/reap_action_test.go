package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

// TestAccReapAction_invoke runs ec2runners_reap from an action_trigger and
// with terraform apply -invoke: each time the runner past its deadline is
// terminated, reported by id, and the warm one stays. The pool is made
// outside Terraform: an apply of an ec2runners_pool reaps too, and would
// do the action's work.
func TestAccReapAction_invoke(t *testing.T) {
	e := newClaimEnv(t, "acc-reap")
	ctx := context.Background()
	m := poolManager(testClients)
	if _, err := m.Create(ctx, pool.Spec{
		Name: e.pool, ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}},
		IdleTimeout: 7 * time.Minute, MaxRuntime: 30 * time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Delete(context.Background(), e.pool, true) })
	var expired, warm []string
	seed := func(n int, idle time.Duration, ids *[]string) {
		// Past the deadline, but not by the minute after which its agent
		// terminates its instance itself.
		got, err := e.sim.SeedIdle(ctx, n, agentsim.SeedSpec{ResourceClass: "large", IdleTimeout: idle})
		*ids = append(*ids, got...)
		if err != nil {
			t.Fatal(err)
		}
	}
	action, onCreate := e.poolAction("ec2runners_reap")
	resource.ParallelTest(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			PreConfig: func() {
				seed(1, -time.Second, &expired)
				seed(1, 0, &warm)
			},
			Config: onCreate,
			Check: resource.ComposeTestCheckFunc(
				e.checkRecords(protocol.StateTerminated, "", &expired),
				checkEC2Terminated(&expired),
				e.checkRecords(protocol.StateIdle, "", &warm),
			),
		}},
	})

	expired = nil
	seed(1, -time.Second, &expired)
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "main.tf"), action)
	out, err := runTerraform(t, dir, "apply", "-invoke=action.ec2runners_reap.now", "-auto-approve")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Pool %s: terminated runners past their deadline (1): %s", e.pool, expired[0])
	if !strings.Contains(out, want) {
		t.Errorf("terraform apply -invoke reported\n%s\nwant the progress message %q", out, want)
	}
	for _, check := range []func() error{
		func() error { return e.checkRecords(protocol.StateTerminated, "", &expired)(nil) },
		func() error { return checkEC2Terminated(&expired)(nil) },
		func() error { return e.checkRecords(protocol.StateIdle, "", &warm)(nil) },
	} {
		if err := check(); err != nil {
			t.Error(err)
		}
	}
}
