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
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
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
// when nothing listens there; or, with EC2RUNNERS_TESTACC_AWS=1, at real
// AWS (realaws_test.go). With -sweep=<region>, resource.TestMain runs the
// sweepers (sweep_test.go) instead of the tests.
func TestMain(m *testing.M) {
	resource.TestMain(suite{m})
}

// suite runs the tests for resource.TestMain.
type suite struct{ m *testing.M }

func (s suite) Run() int { return runTests(s.m) }

func runTests(m *testing.M) int {
	if os.Getenv("TF_ACC") == "" {
		return m.Run()
	}
	defaults := map[string]string{
		"CHECKPOINT_DISABLE": "1",
	}
	if emulator.RealAWS() {
		if err := pointAtAWS(); err != nil {
			fmt.Fprintln(os.Stderr, "acceptance tests against AWS:", err)
			return 1
		}
	} else {
		stop, err := pointAtEmulator()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
		defaults["AWS_REGION"] = "us-east-1"
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
	// The tests' own setup and checks: unrecorded (against AWS, the
	// SDK's default chain, as the provider's).
	opts := awsconfig.Options{AccessKey: "test", SecretKey: "test"}
	if emulator.RealAWS() {
		opts = awsconfig.Options{}
	}
	var err error
	testClients, err = awsconfig.New(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "building test AWS clients:", err)
		return 1
	}
	if emulator.RealAWS() {
		if err := sayWhichAccount(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "acceptance tests against AWS:", err)
			return 1
		}
	}
	return m.Run()
}

// pointAtEmulator starts (or finds) the emulator and points the provider's
// environment at it, through the call recorder when EC2RUNNERS_AWS_CALLS is
// set. The provider's default configuration manages pools; claims use the
// claims-only configuration (claimEnv): each one's calls are recorded for
// the policy check.
func pointAtEmulator() (stop func(), err error) {
	endpoint, stopEmulator, err := emulator.Ensure(context.Background())
	if err != nil {
		return nil, fmt.Errorf("acceptance tests need the AWS emulator: %w", err)
	}
	endpoint, stopRecording, err := awsrecord.Start(context.Background(), endpoint, "provider")
	if err != nil {
		stopEmulator()
		return nil, err
	}
	os.Setenv("AWS_ENDPOINT_URL", endpoint)
	os.Setenv("AWS_ACCESS_KEY_ID", awsrecord.PoolManagementKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", awsrecord.TestSecret)
	return func() { stopRecording(); stopEmulator() }, nil
}

// randomName is a pool name unique to one test run, so tests can share an
// emulator (or a LocalStack) without resetting it.
func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}
