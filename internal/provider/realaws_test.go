package provider

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// The acceptance suite against real AWS (`make testacc-aws` with
// EC2RUNNERS_TESTACC_AWS=1; emulator.RealAWS): the provider, Terraform and
// the tests' own clients use the SDK's default chain and AWS_REGION, as a
// user's would; nothing starts or reaches the emulator, and no call is
// recorded. Launch templates use the newest Amazon Linux 2023
// (emulator.Image), in the default VPC's subnets (emulator.DefaultSubnets).
// The few tests that need what only this machine or the emulator has skip,
// with the reason (skipOnRealAWS); every other test runs as against the
// emulator.

// realAWSPatience is how long the tests wait for what AWS does in its own
// time (instances starting and stopping take a minute or two there), unless
// EC2RUNNERS_TEST_PATIENCE says otherwise.
const realAWSPatience = 5 * time.Minute

// pointAtAWS refuses an environment that would send the tests elsewhere,
// and gives them AWS's patience.
func pointAtAWS() error {
	for _, kv := range os.Environ() {
		if name, value, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "AWS_ENDPOINT_URL") && value != "" {
			return fmt.Errorf("%s is set (%s): unset it to run against AWS, or unset %s to run against that emulator", name, value, emulator.EnvRealAWS)
		}
	}
	if os.Getenv(await.PatienceEnv) == "" {
		await.Patience = realAWSPatience
	}
	return nil
}

// sayWhichAccount checks the credentials and says where the tests run.
func sayWhichAccount(ctx context.Context) error {
	id, err := testClients.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return fmt.Errorf("checking the AWS credentials (STS GetCallerIdentity): %w", err)
	}
	fmt.Fprintf(os.Stderr, "acceptance tests against AWS: account %s, region %s, as %s\n",
		aws.ToString(id.Account), testClients.Region, aws.ToString(id.Arn))
	return nil
}

// eventually runs check until it passes, for up to await.Patience, against
// real AWS, where a deletion takes a while to show (a deleted SQS queue
// answers for up to 60 seconds); against the emulator, once.
func eventually(check func() error) error {
	if !emulator.RealAWS() {
		return check()
	}
	return await.Poll(await.Patience, check)
}

// testRegion is the region the tests run in ("" without TF_ACC, when they
// skip).
func testRegion() string {
	if testClients == nil {
		return ""
	}
	return testClients.Region
}

// skipOnRealAWS skips t against real AWS, saying why; against the emulator
// (CI) it never skips.
func skipOnRealAWS(t testing.TB, why string) {
	t.Helper()
	if emulator.RealAWS() {
		t.Skipf("skipped against real AWS (%s=1): %s", emulator.EnvRealAWS, why)
	}
}

// claimsCredentials are the claims-only configuration's credentials: the
// recorder's claims key against the emulator (its calls are recorded apart
// from the pool's), none against AWS (the default chain's, as the pool's).
func claimsCredentials() string {
	if emulator.RealAWS() {
		return ""
	}
	return fmt.Sprintf("access_key = %q\n  secret_key = %q", awsrecord.ClaimsKey, awsrecord.TestSecret)
}

// Against real AWS the suite refuses an endpoint that would send it
// elsewhere, claims use the default chain's credentials, and the tests that
// cannot run there skip; against the emulator none of that happens.
func TestRealAWSMode(t *testing.T) {
	defer func(p time.Duration) { await.Patience = p }(await.Patience)
	skipped := func() bool {
		r := &skipRecorder{TB: t}
		skipOnRealAWS(r, "a reason")
		return r.skipped
	}
	t.Setenv(emulator.EnvRealAWS, "")
	if skipped() || !strings.Contains(claimsCredentials(), awsrecord.ClaimsKey) {
		t.Errorf("against the emulator: a test skipped, or claims lack the recorder's key (%q)", claimsCredentials())
	}

	t.Setenv(emulator.EnvRealAWS, "1")
	t.Setenv(await.PatienceEnv, "")
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "AWS_ENDPOINT_URL") {
			t.Setenv(name, "") // the emulator's, with TF_ACC
		}
	}
	if !skipped() || claimsCredentials() != "" {
		t.Errorf("against AWS: a test ran that cannot, or claims carry credentials (%q)", claimsCredentials())
	}
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:4566")
	if err := pointAtAWS(); err == nil || !strings.Contains(err.Error(), "AWS_ENDPOINT_URL_DYNAMODB is set") {
		t.Errorf("pointAtAWS with an endpoint set: %v", err)
	}
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "")
	if err := pointAtAWS(); err != nil || await.Patience != realAWSPatience {
		t.Errorf("pointAtAWS = %v, patience %s; want nil and %s", err, await.Patience, realAWSPatience)
	}
}

// skipRecorder is a test that notes a skip instead of skipping.
type skipRecorder struct {
	testing.TB
	skipped bool
}

func (r *skipRecorder) Helper()              {}
func (r *skipRecorder) Skipf(string, ...any) { r.skipped = true }
