package examples

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/providermirror"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/tfcli"
)

// terragruntTimeout bounds one terragrunt command (init, dependency outputs
// and the Terraform run) on a loaded machine.
const terragruntTimeout = 5 * time.Minute

// TestTerragrunt_completeExample runs examples/complete/terragrunt with the
// real Terragrunt binary against the emulator, as the example's comments and
// README tell a user to: the claims unit and the claim module verbatim; the
// root and the pool unit are the test's (state in the emulator's S3, which
// serves plain HTTP; a pool module that needs no AWS provider). It follows a
// pool's life: run --all apply, two run ids at once in one checkout, a warm
// re-claim, a release from a fresh checkout (release jobs run on other
// machines), and a teardown whose first run --all destroy fails at the pool
// (its runners are warm) and whose retry, once they are gone, succeeds.
func TestTerragrunt_completeExample(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 (make test does)")
	}
	tg := toolPath(t, "terragrunt", ".ci/run adds ../shared/tools; elsewhere install a release from https://github.com/gruntwork-io/terragrunt/releases")
	tf := tfcli.Must(t)
	// terraform init, which Terragrunt runs, installs the provider as from
	// the registry: of the release the example's claim module pins.
	mirror, _ := providermirror.Build(t)
	ctx := context.Background()
	endpoint, stop, err := emulator.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	env := []string{
		"AWS_ENDPOINT_URL=" + endpoint, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"TG_TF_PATH=" + tf, "TG_NO_COLOR=true", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"TF_CLI_CONFIG_FILE=" + providermirror.CLIConfig(t, mirror),
	}
	for _, kv := range env[:4] {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	clients, err := awsconfig.New(ctx, awsconfig.Options{Endpoints: awsconfig.Endpoints{SQS: endpoint, DynamoDB: endpoint, EC2: endpoint, STS: endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	name := "tg-" + randomHex(t)
	lt, subnets := poolLaunchTemplate(t, clients.EC2, name)
	sim := agentsim.New(agentsim.Clients{DynamoDB: clients.DynamoDB, EC2: clients.EC2, SQS: clients.SQS}, name, agentsim.Options{
		HeartbeatInterval: time.Second, PollInterval: 250 * time.Millisecond, Logf: t.Logf,
	})
	defer sim.Stop()
	sim.WatchFleet(ctx, nil)
	t.Cleanup(func() {
		_ = (&pool.Manager{DynamoDB: clients.DynamoDB, SQS: clients.SQS, EC2: clients.EC2}).Delete(context.Background(), name, true)
	})

	checkout := terragruntLayout(t, endpoint, name, lt, subnets)
	tgRun := func(dir, runID string, args ...string) (string, error) {
		e := env
		if runID != "" {
			e = append(slices.Clone(env), "CLAIM_RUN_ID="+runID)
		}
		return runTerragrunt(tg, dir, e, args...)
	}
	must := func(out string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	runners := func(runID string) []string {
		t.Helper()
		all, err := pool.ListInstances(ctx, clients.DynamoDB, name)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, inst := range all {
			if inst.RunID == runID && inst.State == protocol.StateRunning {
				ids = append(ids, inst.ID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	claims := filepath.Join(checkout, "terragrunt", "claims")

	// A fresh account: Terragrunt creates the state bucket (--backend-bootstrap).
	must(tgRun(filepath.Join(checkout, "terragrunt"), "run-1", "run", "--all", "--non-interactive", "--backend-bootstrap", "apply"))
	if got := runners("run-1"); len(got) != 2 {
		t.Fatalf("run-1 holds %v, want 2 runners", got)
	}

	// Two workflow runs' claim jobs at once, in one checkout.
	errs := make(chan error, 2)
	for _, run := range []string{"run-2", "run-3"} {
		go func() {
			out, err := tgRun(claims, run, "apply", "-auto-approve")
			if err != nil {
				err = fmt.Errorf("%s: %w\n%s", run, err, out)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	second, third := runners("run-2"), runners("run-3")
	if len(second) != 2 || len(third) != 2 {
		t.Fatalf("run-2 holds %v and run-3 %v, want 2 runners each", second, third)
	}

	// run-2's release, then a new run gets its warm runners.
	must(tgRun(claims, "run-2", "destroy", "-auto-approve"))
	must(tgRun(claims, "run-4", "apply", "-auto-approve"))
	if got := runners("run-4"); !slices.Equal(got, second) {
		t.Errorf("run-4 holds %v, want run-2's warm runners %v", got, second)
	}

	// run-1's release job runs on another machine: a fresh checkout.
	fresh := terragruntLayout(t, endpoint, name, lt, subnets)
	must(tgRun(filepath.Join(fresh, "terragrunt", "claims"), "run-1", "destroy", "-auto-approve"))
	if got := runners("run-1"); len(got) != 0 {
		t.Errorf("run-1 still holds %v after its release", got)
	}
	must(tgRun(claims, "run-3", "destroy", "-auto-approve"))
	must(tgRun(claims, "run-4", "destroy", "-auto-approve"))

	// Teardown: the pool refuses while its runners are warm ...
	out, err := tgRun(filepath.Join(checkout, "terragrunt"), "", "run", "--all", "--non-interactive", "destroy")
	if err == nil || !strings.Contains(out, "live runner instance(s)") {
		t.Fatalf("the first run --all destroy: %v, want a failure at the pool's warm runners\n%s", err, out)
	}
	// ... they terminate themselves (idle_timeout, here at once), and the
	// retry succeeds although the pool's outputs are gone.
	sim.Stop()
	terminateRunners(t, clients, name)
	must(tgRun(filepath.Join(checkout, "terragrunt"), "", "run", "--all", "--non-interactive", "destroy"))
	if _, err := pool.ReadConfig(ctx, clients.DynamoDB, name); err == nil {
		t.Errorf("pool %s still exists after run --all destroy", name)
	}
}

// terragruntLayout is a checkout: the example's claims unit and claim module
// verbatim, and the test's root.hcl and pool unit, for pool name.
func terragruntLayout(t *testing.T, endpoint, name, launchTemplate string, subnets []string) string {
	t.Helper()
	dir := t.TempDir()
	copyTree(t, filepath.Join(examplesDir, "complete", "claim"), filepath.Join(dir, "claim"))
	copyTree(t, filepath.Join(examplesDir, "complete", "terragrunt", "claims"), filepath.Join(dir, "terragrunt", "claims"))
	for _, d := range []string{"terragrunt/pool", "pool"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The example's root.hcl, with the bucket in the emulator. Only the test
	// relaxes the TLS-only bucket policy: the emulator serves plain HTTP.
	writeFile(t, filepath.Join(dir, "terragrunt", "root.hcl"), fmt.Sprintf(`locals {
  region       = "us-east-1"
  state_bucket = "ec2runners-%[2]s"

  state_config = {
    bucket       = local.state_bucket
    region       = local.region
    use_lockfile = true

    endpoints                   = { s3 = %[1]q }
    use_path_style              = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_metadata_api_check     = true
    skip_bucket_enforced_tls    = true
  }

  default_tags = { ManagedBy = "terragrunt" }
}

remote_state {
  backend = "s3"
  generate = {
    path      = "backend.tf"
    if_exists = "overwrite_terragrunt"
  }
  config = merge(local.state_config, {
    key = "ec2runners/${path_relative_to_include()}/terraform.tfstate"
  })
}

generate "provider" {
  path      = "provider_override.tf"
  if_exists = "overwrite_terragrunt"
  contents  = <<-EOF
    provider "ec2runners" {
      region = "${local.region}"

      default_tags {
        tags = ${jsonencode(local.default_tags)}
      }
    }
  EOF
}
`, endpoint, name))
	writeFile(t, filepath.Join(dir, "terragrunt", "pool", "terragrunt.hcl"), fmt.Sprintf(`include "root" {
  path = find_in_parent_folders("root.hcl")
}

terraform {
  source = "${get_terragrunt_dir()}/../../pool"
}

inputs = {
  pool_name          = %q
  launch_template_id = %q
  subnet_ids         = %s
}
`, name, launchTemplate, hclList(subnets)))
	writeFile(t, filepath.Join(dir, "pool", "main.tf"), `terraform {
  required_providers {
    ec2runners = { source = "ec2runners/ec2runners" }
  }
}

provider "ec2runners" {}

variable "pool_name" { type = string }
variable "launch_template_id" { type = string }
variable "subnet_ids" { type = list(string) }

resource "ec2runners_pool" "this" {
  name             = var.pool_name
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
  fleet = {
    launch_template_id = var.launch_template_id
    subnet_ids         = var.subnet_ids
    instance_selection = "explicit"
  }
}

output "pool_name" { value = ec2runners_pool.this.name }
`)
	return dir
}

func hclList(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// poolLaunchTemplate makes the pool's launch template, tagged for it, with
// an image the emulator offers, and picks a subnet of the default VPC.
func poolLaunchTemplate(t *testing.T, client *ec2.Client, name string) (string, []string) {
	t.Helper()
	id, subnets, err := emulator.PoolLaunchTemplate(context.Background(), client, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
	})
	return id, subnets
}

// terminateRunners does what the pool's idle runners do at their idle
// deadline: record themselves terminated, then terminate.
func terminateRunners(t *testing.T, c *awsconfig.Clients, name string) {
	t.Helper()
	ctx := context.Background()
	all, err := pool.ListInstances(ctx, c.DynamoDB, name)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, inst := range all {
		if inst.State == protocol.StateTerminated {
			continue
		}
		inst.State, inst.RunID, inst.UpdatedAt = protocol.StateTerminated, "", protocol.FormatTime(time.Now())
		if _, err := c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(protocol.TableName(name)), Item: inst.Item()}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	if len(ids) == 0 {
		t.Fatal("the pool has no runners to terminate")
	}
	if _, err := c.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
		t.Fatal(err)
	}
}

// runTerragrunt runs terragrunt in dir and returns its output.
func runTerragrunt(tg, dir string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), terragruntTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tg, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("terragrunt %s in %s: %w", strings.Join(args, " "), dir, err)
	}
	return out.String(), err
}

func randomHex(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
