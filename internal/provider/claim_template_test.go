package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// TestAccClaim_newLaunchTemplateRetiresOld: a user upgrades the runners'
// AMI, either with a new default version of the launch template, or as
// Terraform does when it replaces the aws_launch_template: a new template
// (a new id, version 1 again), the pool applied with its id. Either way,
// the runner launched from the old one and waiting in the pool is not
// handed to the next claim but retired, and the runner a claim still holds
// is terminated when it is released instead of going back to the pool;
// the claim launches from the new template.
func TestAccClaim_newLaunchTemplateRetiresOld(t *testing.T) {
	for _, replaced := range []bool{false, true} {
		name := "new default version"
		if replaced {
			name = "replaced template"
		}
		t.Run(name, func(t *testing.T) {
			e := newClaimEnv(t, "acc-lt")
			ctx := context.Background()
			oldTemplate := e.launchTemplate
			// upgrade makes the new template or version, and returns the
			// template and version the pool launches from then on.
			newTemplate, newVersion := oldTemplate, "2"
			upgrade := func() {
				if !replaced {
					out, err := testClients.EC2.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{
						LaunchTemplateId:   aws.String(oldTemplate),
						LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(testImage(t))},
					})
					if err == nil {
						_, err = testClients.EC2.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: aws.String(oldTemplate),
							DefaultVersion: aws.String(fmt.Sprint(aws.ToInt64(out.LaunchTemplateVersion.VersionNumber)))})
					}
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				id, err := emulator.CreateLaunchTemplate(ctx, testClients.EC2, &ec2.CreateLaunchTemplateInput{
					LaunchTemplateName: aws.String(e.pool + "-new"),
					LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(testImage(t))},
					TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
						{Key: aws.String(protocol.TagPool), Value: aws.String(e.pool)},
					}}},
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					_, _ = testClients.EC2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
				})
				newTemplate, newVersion = id, "1"
				e.launchTemplate = id // the pool's configuration from now on
			}
			var pooled, held, fresh []string
			c1 := e.claimConfig("c1", `run_id = "run-lt-1"`)
			c2 := e.claimConfig("c2", `run_id = "run-lt-2"`)
			c3 := e.claimConfig("c3", `run_id = "run-lt-3"`)
			before := e.poolConfig()
			// After the upgrade, the pool's configuration names the new
			// template, made in the step's PreConfig: written there, read
			// from files.
			after, final := filepath.Join(t.TempDir(), "main.tf"), filepath.Join(t.TempDir(), "main.tf")
			file := func(path string) func(config.TestStepConfigRequest) string {
				return func(config.TestStepConfigRequest) string { return path }
			}
			// Until PreConfig: the test case is validated with its files
			// (one naming a provider would be refused there, the test case
			// naming its providers).
			writeTestFile(t, after, "# written by the step's PreConfig\n")
			writeTestFile(t, final, "# written by the step's PreConfig\n")
			resource.ParallelTest(t, resource.TestCase{
				ProtoV6ProviderFactories: testProviders,
				Steps: []resource.TestStep{
					{Config: before, Check: e.watchFleet(agentsim.Healthy)},
					{
						Config: before + c1 + c2,
						Check: resource.ComposeTestCheckFunc(
							captureIDs("ec2runners_claim.c1", &pooled),
							captureIDs("ec2runners_claim.c2", &held),
							e.checkLaunchedFrom(&pooled, oldTemplate, "1"),
							e.checkLaunchedFrom(&held, oldTemplate, "1"),
						),
					},
					{
						// c1's runner waits in the pool, its message naming
						// its template.
						Config: before + c2,
						Check: resource.ComposeTestCheckFunc(
							e.checkRecords(protocol.StateIdle, "", &pooled),
							e.checkQueuedFrom(&pooled, oldTemplate, "1"),
						),
					},
					{
						// The next claim is not handed the old runner: it
						// is retired, and the claim launches from the new
						// template.
						PreConfig: func() {
							upgrade()
							writeTestFile(t, after, e.poolConfig()+c2+c3)
							writeTestFile(t, final, e.poolConfig()+c3)
						},
						ConfigFile:        file(after),
						ConfigStateChecks: counts("ec2runners_claim.c3", 0, 1),
						Check: resource.ComposeTestCheckFunc(
							captureIDs("ec2runners_claim.c3", &fresh),
							e.checkRecords(protocol.StateTerminated, "", &pooled),
							checkEC2Terminated(&pooled),
							func(s *terraform.State) error { return e.checkLaunchedFrom(&fresh, newTemplate, newVersion)(s) },
						),
					},
					{
						// c2's runner, released, is terminated instead of
						// going back to the pool.
						ConfigFile: file(final),
						Check: resource.ComposeTestCheckFunc(
							e.checkRecords(protocol.StateTerminated, "run-lt-2", &held),
							checkEC2Terminated(&held),
							e.checkQueueHolds(&[]string{}),
						),
					},
				},
			})
		})
	}
}

// checkLaunchedFrom asserts that the records of instances say they were
// launched from template and version.
func (e *claimEnv) checkLaunchedFrom(ids *[]string, template, version string) func(*terraform.State) error {
	return func(*terraform.State) error {
		recs, err := e.records()
		if err != nil {
			return err
		}
		for _, id := range *ids {
			if r := recs[id]; r.TemplateID != template || r.TemplateVersion != version {
				return fmt.Errorf("instance %s: record says launch template %q version %q, want %s version %s", id, r.TemplateID, r.TemplateVersion, template, version)
			}
		}
		return nil
	}
}

// checkQueuedFrom asserts that the queue's messages of instances name the
// template and version.
func (e *claimEnv) checkQueuedFrom(ids *[]string, template, version string) func(*terraform.State) error {
	return func(*terraform.State) error {
		msgs, err := e.queueMessages()
		if err != nil {
			return err
		}
		var found []string
		for _, m := range msgs {
			for _, id := range *ids {
				if m.ID == id {
					if m.TemplateID != template || m.TemplateVersion != version {
						return fmt.Errorf("the message of %s names launch template %q version %q, want %s version %s", id, m.TemplateID, m.TemplateVersion, template, version)
					}
					found = append(found, id)
				}
			}
		}
		if len(found) != len(*ids) {
			return fmt.Errorf("the queue holds messages of %v, want %v", found, *ids)
		}
		return nil
	}
}
