package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript/scripttest"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// A pool keeps its GitHub credential in an SSM SecureString: claims whose
// provider has no github block, nor GitHub credentials in the
// environment, mint their runners' tokens with it at the stub GitHub (the
// claim's registration token, the release's removal token). A claim whose
// role may not read the parameter fails before it touches a runner, and
// says what to grant.
func TestAccClaim_storedGitHubCredential(t *testing.T) {
	skipOnRealAWS(t, "the stored credential is the stub GitHub's, on this machine")
	gh := scripttest.NewGitHub(t)
	t.Setenv("GITHUB_TOKEN", "")
	t.Setenv("GITHUB_APP_ID", "")
	t.Setenv("GITHUB_REPOSITORY_OWNER", "")
	t.Setenv("GITHUB_API_URL", gh.URL)
	e := newClaimEnv(t, "acc-cred")
	param := "/ec2runners/" + e.pool + "/github"
	putCredential(t, param, map[string]string{"owner": "octo", "repository": "app", "token": gh.APIKey})
	e.poolSettings = fmt.Sprintf(`github_owner      = "octo"
  github_repository = "app"
  github_credential = { ssm_parameter = %q }`, param)
	poolConfig := e.poolConfig()
	claim := e.claimConfig("test", `
  run_id         = "run-cred"
  fleet_fallback = false`)
	e.claimsSettings = fmt.Sprintf("endpoints {\n    ssm = %q\n  }", denyingSSM(t))
	denied := e.poolConfig() + claim
	var ids []string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: poolConfig, Check: e.seed(1, agentsim.SeedSpec{}, &ids)},
			{
				Config: denied,
				ExpectError: regexp.MustCompile(wrapped(`no registration token can be minted for them: this provider's AWS role may not read the pool's GitHub credential, SSM parameter ` +
					regexp.QuoteMeta(param) + `: grant the role ssm:GetParameter on it \(and kms:Decrypt on its key, when that is a customer managed key\), or configure the provider's github block`)),
			},
			{
				Config: poolConfig,
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateIdle, "", &ids),
					apiCalls(gh),
				),
			},
			{
				Config: poolConfig + claim,
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateRunning, "run-cred", &ids),
					apiCalls(gh, "registration-token octo/app", "list-runner-releases"),
					handedIssuedToken(gh, e.pool, &ids),
				),
			},
			{
				Config: poolConfig,
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateIdle, "", &ids),
					apiCalls(gh, "registration-token octo/app", "list-runner-releases", "remove-token octo/app", "list-runner-releases"),
				),
			},
		},
	})
}

// putCredential stores the credential's JSON in the SecureString name,
// deleted when the test ends.
func putCredential(t *testing.T, name string, credential map[string]string) {
	t.Helper()
	value, err := json.Marshal(credential)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testClients.SSM.PutParameter(context.Background(), &ssm.PutParameterInput{
		Name: aws.String(name), Type: ssmtypes.ParameterTypeSecureString, Value: aws.String(string(value)),
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = testClients.SSM.DeleteParameter(context.Background(), &ssm.DeleteParameterInput{Name: aws.String(name)})
	})
}

// denyingSSM is an SSM endpoint that answers every request as AWS answers
// a role without ssm:GetParameter (the emulator checks no permission).
func denyingSSM(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"__type":  "AccessDeniedException",
			"message": "User: arn:aws:sts::000000000000:assumed-role/ci/claims is not authorized to perform: ssm:GetParameter because no identity-based policy allows the ssm:GetParameter action",
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// handedIssuedToken checks that each runner holds a registration token the
// stub GitHub issued.
func handedIssuedToken(gh *scripttest.GitHub, poolName string, ids *[]string) func(*terraform.State) error {
	return func(*terraform.State) error {
		ctx := context.Background()
		cfg, err := pool.ReadConfig(ctx, testClients.DynamoDB, poolName)
		if err != nil {
			return err
		}
		for _, id := range *ids {
			out, err := testClients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(poolName),
				Key: protocol.AgentKey(protocol.InstanceARN(cfg.InstanceARNPrefix, id), protocol.SortKeyRegistrationToken)})
			if err != nil {
				return err
			}
			tok, err := protocol.RunnerTokenFromItem(out.Item)
			if err != nil {
				return fmt.Errorf("%s's registration token: %w", id, err)
			}
			if !slices.Contains(gh.IssuedTokens(), tok.Token) || tok.Target != "octo/app" {
				return fmt.Errorf("%s holds a registration token for %s the stub GitHub did not issue", id, tok.Target)
			}
		}
		return nil
	}
}
