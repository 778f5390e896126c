// Command demo runs the provider end to end on the local AWS emulator (make
// demo): a pool, a claim of two runners from the empty pool (launched by the
// fleet), its release back to the pool, and a second claim that reuses the
// same runners. No instance boots in the emulator, so simulated agents
// (internal/testworld/agentsim) play the runners' part of the protocol.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

const poolName = "demo-pool"

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

type demo struct {
	dir  string
	env  []string
	vars []string
}

type instance struct {
	ID           string `json:"id"`
	InstanceType string `json:"instance_type"`
	Source       string `json:"source"`
}

func run(ctx context.Context) error {
	step("Starting the AWS emulator (moto on 127.0.0.1:4566)")
	endpoint, stop, err := emulator.Ensure(ctx)
	if err != nil {
		return err
	}
	defer stop()
	for k, v := range map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	clients, err := awsconfig.New(ctx, awsconfig.Options{Endpoints: awsconfig.Endpoints{SQS: endpoint, DynamoDB: endpoint, EC2: endpoint, STS: endpoint}})
	if err != nil {
		return err
	}

	step("Building the provider")
	d, err := setUp(ctx, endpoint)
	if err != nil {
		return err
	}
	defer os.RemoveAll(d.dir)

	lt, subnets, err := launchTemplate(ctx, clients.EC2)
	if err != nil {
		return err
	}
	d.vars = []string{"-var", "endpoint=" + endpoint, "-var", "launch_template_id=" + lt, "-var", "subnet_ids=" + jsonList(subnets)}

	sim := agentsim.New(agentsim.Clients{DynamoDB: clients.DynamoDB, EC2: clients.EC2, SQS: clients.SQS}, poolName, agentsim.Options{
		HeartbeatInterval: 2 * time.Second, PollInterval: time.Second,
	})
	defer sim.Stop()
	sim.WatchFleet(ctx, nil)

	step("terraform apply: the pool")
	if _, err := d.apply(false); err != nil {
		return err
	}
	defer func() {
		step("terraform destroy")
		if err := d.terraform("destroy", "-auto-approve"); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()

	step("terraform apply: claim 2 runners (the pool is empty: EC2 CreateFleet launches them)")
	first, took1, err := d.claim()
	if err != nil {
		return err
	}
	report(first, took1)

	step("terraform apply: the claim is destroyed, its runners go back to the pool")
	if _, err := d.apply(false); err != nil {
		return err
	}
	idle, _ := d.output("idle_runners")
	fmt.Printf("    idle runners in the pool: %s\n", idle)

	step("terraform apply: claim 2 runners again (warm runners from the pool)")
	second, took2, err := d.claim()
	if err != nil {
		return err
	}
	report(second, took2)

	same := slices.Equal(ids(first), ids(second))
	step("Summary")
	fmt.Printf("    first claim:  %5.1fs  %s\n", took1.Seconds(), sources(first))
	fmt.Printf("    second claim: %5.1fs  %s\n", took2.Seconds(), sources(second))
	fmt.Printf("    same instances reused: %t\n", same)
	if !same {
		return fmt.Errorf("the second claim did not reuse the first claim's runners")
	}
	return nil
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

// setUp builds the provider and a Terraform working directory that uses it
// through dev_overrides (terraform init cannot run offline).
func setUp(ctx context.Context, endpoint string) (*demo, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ec2runners-demo-")
	if err != nil {
		return nil, err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "bin", "terraform-provider-ec2runners"), ".")
	build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building the provider: %w", err)
	}
	rc := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"registry.terraform.io/ec2runners/ec2runners\" = %q\n  }\n  direct {}\n}\n", filepath.Join(dir, "bin"))
	if err := os.WriteFile(filepath.Join(dir, "terraformrc"), []byte(rc), 0o600); err != nil {
		return nil, err
	}
	tf, err := os.ReadFile(filepath.Join(root, "examples", "demo", "main.tf"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), tf, 0o600); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "terraformrc"), "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	return &demo{dir: dir, env: env}, nil
}

func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the repository")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// launchTemplate makes the runners' launch template, tagged for the pool
// (claims launch no other), with an image the emulator offers, and picks
// subnets of the default VPC. A template an earlier demo left is replaced.
func launchTemplate(ctx context.Context, client *ec2.Client) (string, []string, error) {
	name := aws.String("ec2runners-demo")
	lts, err := client.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("launch-template-name"), Values: []string{*name}}}})
	if err != nil {
		return "", nil, err
	}
	for _, lt := range lts.LaunchTemplates {
		if _, err := client.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId}); err != nil {
			return "", nil, err
		}
	}
	image, err := emulator.Image(ctx, client)
	if err != nil {
		return "", nil, err
	}
	id, err := emulator.CreateLaunchTemplate(ctx, client, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: name, LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: aws.String(protocol.TagPool), Value: aws.String(poolName)},
		}}},
	})
	if err != nil {
		return "", nil, err
	}
	subnets, err := emulator.DefaultSubnets(ctx, client, 2)
	return id, subnets, err
}

func (d *demo) terraform(args ...string) error {
	cmd := exec.Command("terraform", append(append(args, "-input=false", "-no-color"), d.vars...)...)
	cmd.Dir, cmd.Env = d.dir, d.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	for _, line := range strings.Split(out.String(), "\n") {
		// The progress lines; everything when terraform failed.
		if err != nil || strings.HasPrefix(line, "ec2runners_") || strings.HasPrefix(line, "Apply complete") || strings.HasPrefix(line, "Destroy complete") {
			fmt.Println("    " + line)
		}
	}
	return err
}

func (d *demo) apply(claim bool) (time.Duration, error) {
	start := time.Now()
	err := d.terraform("apply", "-auto-approve", "-var", fmt.Sprintf("claim=%t", claim))
	return time.Since(start), err
}

func (d *demo) claim() ([]instance, time.Duration, error) {
	took, err := d.apply(true)
	if err != nil {
		return nil, 0, err
	}
	raw, err := d.output("instances")
	if err != nil {
		return nil, 0, err
	}
	var insts []instance
	if err := json.Unmarshal([]byte(raw), &insts); err != nil {
		return nil, 0, err
	}
	label, _ := d.output("runs_on")
	fmt.Printf("    jobs run on: runs-on: %s\n", strings.Trim(label, `"`))
	return insts, took, nil
}

func (d *demo) output(name string) (string, error) {
	cmd := exec.Command("terraform", "output", "-json", name)
	cmd.Dir, cmd.Env = d.dir, d.env
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

func report(insts []instance, took time.Duration) {
	fmt.Printf("    took %.1fs\n", took.Seconds())
	for _, i := range insts {
		fmt.Printf("    %s  %-10s from the %s\n", i.ID, i.InstanceType, i.Source)
	}
}

func ids(insts []instance) []string {
	out := make([]string, len(insts))
	for i, inst := range insts {
		out[i] = inst.ID
	}
	slices.Sort(out)
	return out
}

func sources(insts []instance) string {
	n := map[string]int{}
	for _, i := range insts {
		n[i.Source]++
	}
	return fmt.Sprintf("%d from the pool, %d from the fleet", n["pool"], n["fleet"])
}

func jsonList(values []string) string {
	b, _ := json.Marshal(values)
	return string(b)
}
