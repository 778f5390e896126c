package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/lambdaworld"
)

// TestAccClaim_broker: with a broker, the claim resource creates, reads,
// imports and destroys its claim by invoking the broker function (here
// testdata/fakebroker, in lambdaworld) with the job's OIDC token for the
// broker's audience, and reads nothing of the pool's table: pool "ci-pool"
// exists nowhere but in the fake. Another claimant's claim of the run is
// the broker's other_claimant, shown as the direct claim shows it. Not
// parallel: it sets the job's environment.
func TestAccClaim_broker(t *testing.T) {
	skipOnRealAWS(t, "the broker is a local function")
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	if out, err := exec.Command("go", "build", "-o", bootstrap, "./testdata/fakebroker").CombinedOutput(); err != nil {
		t.Fatalf("go build of testdata/fakebroker: %v\n%s", err, out)
	}
	world, err := lambdaworld.Start(lambdaworld.Function{Name: "ci-broker", Executable: bootstrap, Timeout: lambdaworld.MaxTimeout,
		Env: map[string]string{"FAKE_REPOSITORY": "octo/app"}})
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()

	// GitHub's token endpoint, for a job with id-token: write.
	var mu sync.Mutex
	var audiences []string
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		audiences = append(audiences, r.URL.Query().Get("audience"))
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]string{"value": "jwt-for-" + r.URL.Query().Get("audience")})
	}))
	defer tokens.Close()
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_REPOSITORY", "octo/app")
	t.Setenv(broker.EnvTokenRequestURL, tokens.URL+"/token?api-version=2.0")
	t.Setenv(broker.EnvTokenRequestToken, "request-token")

	provider := fmt.Sprintf(`
provider "ec2runnersclaims" {
  %s
  endpoints {
    lambda = %q
  }
  broker {
    function_name = "ci-broker"
  }
}
`, claimsCredentials(), world.Endpoint())
	claimConfig := func(name, claimant string) string {
		return fmt.Sprintf(`
resource "ec2runners_claim" %q {
  provider       = ec2runnersclaims
  pool           = "ci-pool"
  run_id         = "run-broker"
  claimant       = %q
  instance_count = 2
}
`, name, claimant)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkBrokerClaimGone(world.Endpoint()),
		Steps: []resource.TestStep{
			{
				Config: provider + claimConfig("test", "build"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("ec2runners_claim.test", "label", "run-broker-fakelabel"),
					resource.TestCheckResourceAttr("ec2runners_claim.test", "repository", "octo/app"),
					resource.TestCheckResourceAttr("ec2runners_claim.test", "instance_ids.#", "2"),
					resource.TestCheckResourceAttr("ec2runners_claim.test", "instance_ids.0", "i-run-broker-0"),
					resource.TestCheckResourceAttr("ec2runners_claim.test", "created_count", "2"),
					func(*terraform.State) error {
						mu.Lock()
						defer mu.Unlock()
						for _, a := range audiences {
							if a != broker.DefaultAudience {
								return fmt.Errorf("tokens requested for %q, want each for %s", audiences, broker.DefaultAudience)
							}
						}
						if len(audiences) == 0 {
							return fmt.Errorf("no token requested")
						}
						return nil
					},
				),
			},
			{
				ResourceName:            "ec2runners_claim.test",
				ImportState:             true,
				ImportStateId:           "ci-pool/run-broker",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				Config:      provider + claimConfig("test", "build") + claimConfig("other", "deploy"),
				ExpectError: regexp.MustCompile(wrapped(`Run run-broker is claimed by another claimant`)),
			},
		},
	})
}

// checkBrokerClaimGone: destroyed, the claim is released in the broker.
func checkBrokerClaimGone(endpoint string) func(*terraform.State) error {
	return func(*terraform.State) error {
		c := lambda.New(lambda.Options{Region: lambdaworld.Region, BaseEndpoint: aws.String(endpoint),
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
		payload, _ := json.Marshal(broker.Request{Operation: broker.OpRead, IDToken: "check", Pool: "ci-pool", RunID: "run-broker"})
		out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("ci-broker"), Payload: payload})
		if err != nil {
			return err
		}
		var resp broker.Response
		if err := json.Unmarshal(out.Payload, &resp); err != nil || resp.Record != nil {
			return fmt.Errorf("after destroy the broker still has the claim: %s (%v)", out.Payload, err)
		}
		return nil
	}
}
