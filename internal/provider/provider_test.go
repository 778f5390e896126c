package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/emulator"
)

// testProviders runs the provider in-process for acceptance tests. Claims
// use a second server of it, ec2runnersclaims (as google-beta serves
// google_* resources): Terraform reaches an in-process provider through one
// reattached server, which keeps only the last of several configurations,
// so the claims-only configuration needs a server of its own.
var testProviders = map[string]func() (tfprotov6.ProviderServer, error){
	"ec2runners":       providerserver.NewProtocol6WithError(New("test")()),
	"ec2runnersclaims": providerserver.NewProtocol6WithError(New("test")()),
}

// testClients talk to the same endpoint as the provider under test, to
// check results and to change things behind Terraform's back.
var testClients *awsconfig.Clients

// TestMain points acceptance tests at the emulator: AWS_ENDPOINT_URL when set
// (e.g. a LocalStack), else a moto server on 127.0.0.1:4566, started here
// when nothing listens there.
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Getenv("TF_ACC") == "" {
		return m.Run()
	}
	endpoint, stop, err := emulator.Ensure(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "acceptance tests need the AWS emulator:", err)
		return 1
	}
	defer stop()
	// The provider's default configuration manages pools; claims use the
	// claims-only configuration (claimEnv): with EC2RUNNERS_AWS_CALLS set,
	// each one's calls are recorded for the policy check.
	endpoint, stopRecording, err := awsrecord.Start(context.Background(), endpoint, "provider")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopRecording()
	os.Setenv("AWS_ENDPOINT_URL", endpoint)
	os.Setenv("AWS_ACCESS_KEY_ID", awsrecord.PoolManagementKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", awsrecord.TestSecret)
	defaults := map[string]string{
		"AWS_REGION":         "us-east-1",
		"CHECKPOINT_DISABLE": "1",
	}
	if tf, err := exec.LookPath("terraform"); err == nil {
		defaults["TF_ACC_TERRAFORM_PATH"] = tf
	}
	if _, err := os.Stat(os.Getenv("TF_CLI_CONFIG_FILE")); err != nil {
		// An empty CLI config: no user settings, no warning about a missing ~/.terraformrc.
		f, err := os.CreateTemp("", "ec2runners-acc-*.tfrc")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		f.Close()
		defer os.Remove(f.Name())
		os.Setenv("TF_CLI_CONFIG_FILE", f.Name())
	}
	for k, v := range defaults {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		fmt.Fprintln(os.Stderr, "acceptance tests need Terraform: put terraform on PATH or set TF_ACC_TERRAFORM_PATH (nothing can be downloaded)")
		return 1
	}
	// The tests' own setup and checks: unrecorded.
	testClients, err = awsconfig.New(context.Background(), awsconfig.Options{AccessKey: "test", SecretKey: "test"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "building test AWS clients:", err)
		return 1
	}
	return m.Run()
}

// randomName is a pool name unique to one test run, so tests can share an
// emulator (or a LocalStack) without resetting it.
func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}
