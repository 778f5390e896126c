package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// A warm fill that cannot launch tells the user why at apply: the pool's
// launch template is tagged for another pool, so the pool's apply launches
// nothing, and warns, naming the class, its counts and the launch
// template check. The apply itself succeeds: the pool is in place.
func TestAccPool_warmFillCannotLaunchWarns(t *testing.T) {
	e := newClaimEnv(t, "acc-warmwarn")
	e.launchTemplate = foreignTemplate(t, e.pool)
	e.poolSettings = `warm = { large = { hot = 1, stopped = 1 } }`
	t.Cleanup(func() { _ = poolManager(testClients).Delete(context.Background(), e.pool, true) })
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "main.tf"), e.poolConfig())
	out, err := runTerraform(t, dir, "apply", "-auto-approve", "-input=false")
	if err != nil {
		t.Fatal(err)
	}
	wantWarning(t, out, fmt.Sprintf("Warning: Pool %s: class large lacks warm runners", e.pool),
		"The fill left class large with 0 of 1 hot and 0 of 1 stopped runners",
		fmt.Sprintf("launch template %s does not carry the tag ec2runners:pool = %s", e.launchTemplate, e.pool),
		"The pool is in place; the next plan shows what lacks, and the next apply tries again.")
	out2, err := testClients.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + protocol.TagPool), Values: []string{e.pool}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out2.Reservations) != 0 {
		t.Errorf("the pool's apply launched %+v from a template not tagged for it", out2.Reservations)
	}
}

// The ec2runners_warm action warns the same way, from an action_trigger
// (whose apply goes on) and from terraform apply -invoke.
func TestAccWarmAction_cannotLaunchWarns(t *testing.T) {
	e := newClaimEnv(t, "acc-warmactwarn")
	e.launchTemplate = foreignTemplate(t, e.pool)
	e.createPool(map[string]protocol.WarmTarget{"large": {Hot: 1}})
	empty := func(*terraform.State) error {
		got, err := maintenance.WarmStatus(context.Background(), &claim.Claimer{DynamoDB: testClients.DynamoDB, SQS: testClients.SQS, EC2: testClients.EC2}, e.pool)
		if err != nil {
			return err
		}
		if want := (maintenance.TierCounts{HotTarget: 1}); got["large"] != want {
			return fmt.Errorf("warm status %+v, want %+v", got["large"], want)
		}
		return nil
	}
	action, onCreate := e.poolAction("ec2runners_warm")
	resource.ParallelTest(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config: onCreate,
			Check:  empty,
		}},
	})
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "main.tf"), action)
	out, err := runTerraform(t, dir, "apply", "-invoke=action.ec2runners_warm.now", "-auto-approve")
	if err != nil {
		t.Fatal(err)
	}
	// Terraform 1.15 shows an action's warning under a summary of its own,
	// the action's summary and detail below it.
	wantWarning(t, out, "Warning: Warning when invoking action", fmt.Sprintf("Pool %s: class large lacks warm runners", e.pool),
		"The fill left class large with 0 of 1 hot runners:",
		fmt.Sprintf("launch template %s does not carry the tag ec2runners:pool = %s", e.launchTemplate, e.pool),
		"Invoke the action again once that is fixed.")
	if err := empty(nil); err != nil {
		t.Error(err)
	}
}

// foreignTemplate makes a launch template tagged for another pool than
// poolName, deleted at the test's end.
func foreignTemplate(t *testing.T, poolName string) string {
	t.Helper()
	id, err := emulator.CreateLaunchTemplate(context.Background(), testClients.EC2, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(poolName + "-foreign"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(testImage(t))},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: aws.String(protocol.TagPool), Value: aws.String("another-pool")},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = testClients.EC2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
	})
	return id
}

// wantWarning checks that Terraform's output says each of want, whatever
// its line wrapping.
func wantWarning(t *testing.T, out string, want ...string) {
	t.Helper()
	flat := strings.Join(strings.Fields(out), " ")
	for _, w := range want {
		if !strings.Contains(flat, strings.Join(strings.Fields(w), " ")) {
			t.Errorf("terraform said\n%s\nwant %q", out, w)
		}
	}
}
