package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// The runner is served by the real agent script (run as EC2 runs it, in the
// instance stand-in, with a stub GitHub and the stub runner), and the provider fetches its GitHub tokens from the stub's REST
// API: the claim registers the runner under the run id, the destroy removes
// it from GitHub and puts the instance back in the pool. No token reaches
// the state or the logs. The credentials come from GITHUB_TOKEN and
// GITHUB_API_URL, the owner they mint for from GITHUB_REPOSITORY_OWNER, as
// in a GitHub Actions job.
func TestAccClaim_realAgent(t *testing.T) {
	skipOnRealAWS(t, "the instance stand-in runs the user data on this machine, as root, against the emulator and a stub GitHub; a real instance would need a real GitHub")
	e := newClaimEnv(t, "acc-agent")
	gh := scripttest.NewEnv(t, os.Getenv("AWS_ENDPOINT_URL"), testClients.Region)
	clients := scripttest.Clients{DynamoDB: testClients.DynamoDB, SQS: testClients.SQS, EC2: testClients.EC2}
	logPath := filepath.Join(t.TempDir(), "terraform.log")
	t.Setenv("TF_ACC_LOG_PATH", logPath)
	t.Setenv("TF_LOG", "DEBUG")

	// From the environment, so that the test's configuration (which the
	// test framework logs) holds no secret either.
	t.Setenv("GITHUB_TOKEN", gh.GitHub.APIKey)
	t.Setenv("GITHUB_API_URL", gh.GitHub.URL)
	t.Setenv("GITHUB_REPOSITORY_OWNER", "octo")
	poolConfig := strings.Replace(e.poolConfig(), "force_destroy", "github_owner      = \"octo\"\n  github_repository = \"app\"\n  force_destroy", 1)
	var instanceID string
	var ids []string // instanceID, for the shared checks
	var label string // the claim's
	startAgent := func(*terraform.State) error {
		ctx := context.Background()
		id, err := scripttest.LaunchInstance(ctx, clients, e.pool, nil)
		if err != nil {
			return err
		}
		instanceID, ids = id, []string{id}
		queue, err := testClients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(protocol.QueueName(e.pool, scripttest.SeedClass))})
		if err != nil {
			return err
		}
		if err := scripttest.PutRecord(ctx, clients, e.pool, aws.ToString(queue.QueueUrl), id, protocol.StateIdle, "", time.Now().Add(10*time.Minute)); err != nil {
			return err
		}
		cfg, err := pool.ReadConfig(ctx, testClients.DynamoDB, e.pool)
		if err != nil {
			return err
		}
		arn := protocol.InstanceARN(cfg.InstanceARNPrefix, id)
		inst := gh.StartInstance(t, gh.Options(e.pool, "octo", "app"), scripttest.InstanceConfig{InstanceID: id})
		// A warm runner in a pool has long been prepared and heartbeating.
		return await.Poll(await.Patience, func() error {
			out, err := testClients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.pool), Key: protocol.AgentKey(arn, protocol.SortKeyHeartbeat)})
			switch {
			case err != nil:
				return err
			case out.Item == nil:
				return errors.New("no heartbeat of the agent yet")
			case !strings.Contains(inst.Output(), "ready: waiting for a claim"):
				return errors.New("the agent is still preparing the instance")
			}
			return nil
		})
	}
	runner := func(check func(r scripttest.Runner, registered bool) error) func(*terraform.State) error {
		return func(*terraform.State) error {
			r, ok := gh.GitHub.Runners()[instanceID]
			return check(r, ok)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: poolConfig, Check: startAgent},
			{
				Config: poolConfig + e.claimConfig("test", `
  run_id            = "run-agent"
  fleet_fallback    = false
  registration_wait = "1m"`),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttrPtr("ec2runners_claim.test", "instance_ids.0", &instanceID),
					e.checkRecords(protocol.StateRunning, "run-agent", &ids),
					func(s *terraform.State) error {
						label = s.RootModule().Resources["ec2runners_claim.test"].Primary.Attributes["label"]
						if !strings.HasPrefix(label, "run-agent-") {
							return fmt.Errorf("claim label %q, want run-agent-<secret>", label)
						}
						return nil
					},
					runner(func(r scripttest.Runner, registered bool) error {
						if !registered || r.Labels != label || r.Target != "octo/app" {
							return fmt.Errorf("GitHub runner %+v (registered %v), want octo/app labelled %s", r, registered, label)
						}
						return nil
					}),
					// The agent asked for the newest runner at its boot: no claim had
					// told it of one. The claim lists the runner's releases as it
					// mints the token, and tells its runner.
					apiCalls(gh.GitHub, "latest-runner-release", "registration-token octo/app", "list-runner-releases"),
					noSecretsIn(gh.GitHub),
				),
			},
			{
				Config: poolConfig,
				Check: resource.ComposeTestCheckFunc(
					runner(func(r scripttest.Runner, registered bool) error {
						if registered {
							return fmt.Errorf("runner %+v still registered on GitHub after release", r)
						}
						return nil
					}),
					func(*terraform.State) error {
						want := []string{"register " + instanceID + " " + label, "run " + instanceID, "stop " + instanceID, "remove " + instanceID}
						got := slices.DeleteFunc(gh.GitHub.Events(), func(e string) bool { return strings.HasPrefix(e, "download ") })
						if !slices.Equal(got, want) {
							return fmt.Errorf("GitHub saw %v, want %v", got, want)
						}
						return nil
					},
					apiCalls(gh.GitHub, "latest-runner-release", "registration-token octo/app", "list-runner-releases", "remove-token octo/app", "list-runner-releases"),
					e.checkRecords(protocol.StateIdle, "", &ids),
					e.checkQueueHolds(&ids),
				),
			},
		},
	})
	logs, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("reading the provider's logs: %v", err)
	}
	if !strings.Contains(string(logs), "handed GitHub runner tokens") {
		t.Fatal("the provider's debug logs were not captured; the secrets check below would prove nothing")
	}
	for _, secret := range append(gh.GitHub.IssuedTokens(), gh.GitHub.APIKey) {
		if i := strings.Index(string(logs), secret); i >= 0 {
			line := string(logs)[strings.LastIndex(string(logs[:i]), "\n")+1:]
			line, _, _ = strings.Cut(line, "\n")
			t.Errorf("a GitHub token appears in the logs: %.300s", strings.ReplaceAll(line, secret, "<SECRET>"))
		}
	}
}

// apiCalls checks the calls made to the stub's REST API, in any order (a
// claim lists the runner's releases while it mints its token): one token
// per claim and per release, minted by the provider.
func apiCalls(g *scripttest.GitHub, want ...string) func(*terraform.State) error {
	return func(*terraform.State) error {
		calls := g.APICalls()
		if !slices.Equal(slices.Sorted(slices.Values(calls)), slices.Sorted(slices.Values(want))) {
			return fmt.Errorf("GitHub API calls %v, want %v", calls, want)
		}
		return nil
	}
}

// noSecretsIn fails when any issued token or the API credential is in the
// Terraform state.
func noSecretsIn(g *scripttest.GitHub) func(*terraform.State) error {
	return func(s *terraform.State) error {
		secrets := append(g.IssuedTokens(), g.APIKey)
		for addr, rs := range s.RootModule().Resources {
			for k, v := range rs.Primary.Attributes {
				for _, secret := range secrets {
					if strings.Contains(v, secret) {
						return fmt.Errorf("state attribute %s.%s holds a GitHub token", addr, k)
					}
				}
			}
		}
		return nil
	}
}
