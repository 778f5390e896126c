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
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// A pool keeps its GitHub credential in its account, in an SSM
// SecureString or a Secrets Manager secret: claims whose provider has no
// github block, nor GitHub credentials in the environment, mint their
// runners' tokens with it at the stub GitHub (the claim's registration
// token, the release's removal token). A claim whose role may not read the
// credential fails before it touches a runner, and says what to grant.
func TestAccClaim_storedGitHubCredential(t *testing.T) {
	skipOnRealAWS(t, "the stored credential is the stub GitHub's, on this machine")
	stores := []struct {
		name      string
		attribute string // in github_credential
		endpoint  string // in the provider's endpoints block
		action    string // the read a role may be denied
		grant     string // what the claim's error says to grant
		put       func(t *testing.T, name, value string)
		describe  string // how errors name the credential
		nameOf    string // the credential's name, of the pool's name
	}{
		{
			name: "ssm", attribute: "ssm_parameter", endpoint: "ssm", action: "ssm:GetParameter",
			grant: "ssm:GetParameter on it", put: putParameter, describe: "SSM parameter ", nameOf: "/ec2runners/%s/github",
		},
		{
			name: "secrets_manager", attribute: "secrets_manager_secret", endpoint: "secretsmanager", action: "secretsmanager:GetSecretValue",
			grant: "secretsmanager:GetSecretValue on it", put: putSecret, describe: "Secrets Manager secret ", nameOf: "ec2runners/%s/github",
		},
	}
	for _, store := range stores {
		t.Run(store.name, func(t *testing.T) {
			gh := scripttest.NewGitHub(t)
			t.Setenv("GITHUB_TOKEN", "")
			t.Setenv("GITHUB_APP_ID", "")
			t.Setenv("GITHUB_REPOSITORY_OWNER", "")
			t.Setenv("GITHUB_API_URL", gh.URL)
			e := newClaimEnv(t, "acc-cred")
			name := fmt.Sprintf(store.nameOf, e.pool)
			credential, err := json.Marshal(map[string]string{"owner": "octo", "repository": "app", "token": gh.APIKey})
			if err != nil {
				t.Fatal(err)
			}
			store.put(t, name, string(credential))
			e.poolSettings = fmt.Sprintf(`github_owner      = "octo"
  github_repository = "app"
  github_credential = { %s = %q }`, store.attribute, name)
			poolConfig := e.poolConfig()
			claim := e.claimConfig("test", `
  run_id         = "run-cred"
  fleet_fallback = false`)
			e.claimsSettings = fmt.Sprintf("endpoints {\n    %s = %q\n  }", store.endpoint, denyingEndpoint(t, store.action))
			denied := e.poolConfig() + claim
			var ids []string
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testProviders,
				Steps: []resource.TestStep{
					{Config: poolConfig, Check: e.seed(1, agentsim.SeedSpec{}, &ids)},
					{
						Config: denied,
						ExpectError: regexp.MustCompile(wrapped(`no registration token can be minted for them: this provider's AWS role may not read the pool's GitHub credential, ` +
							regexp.QuoteMeta(store.describe+name) + `: grant the role ` + regexp.QuoteMeta(store.grant) +
							` \(and kms:Decrypt on its key, when that is a customer managed key\), or configure the provider's github block`)),
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
							handedIssuedToken(gh, e.pool, "octo/app", &ids),
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
		})
	}
}

// putParameter stores value in the SecureString name, deleted when the
// test ends.
func putParameter(t *testing.T, name, value string) {
	t.Helper()
	if _, err := testClients.SSM.PutParameter(context.Background(), &ssm.PutParameterInput{
		Name: aws.String(name), Type: ssmtypes.ParameterTypeSecureString, Value: aws.String(value),
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = testClients.SSM.DeleteParameter(context.Background(), &ssm.DeleteParameterInput{Name: aws.String(name)})
	})
}

// putSecret stores value as the text of the secret name, deleted when the
// test ends.
func putSecret(t *testing.T, name, value string) {
	t.Helper()
	if _, err := testClients.SecretsManager.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
		Name: aws.String(name), SecretString: aws.String(value),
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = testClients.SecretsManager.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{
			SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true),
		})
	})
}

// denyingEndpoint is an endpoint of a JSON-protocol service (SSM, Secrets
// Manager) that answers every request as AWS answers a role without action
// (the emulator checks no permission).
func denyingEndpoint(t *testing.T, action string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"__type":  "AccessDeniedException",
			"message": "User: arn:aws:sts::000000000000:assumed-role/ci/claims is not authorized to perform: " + action + " because no identity-based policy allows the " + action + " action",
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// handedIssuedToken checks that each runner holds a registration token the
// stub GitHub issued, for target.
func handedIssuedToken(gh *scripttest.GitHub, poolName, target string, ids *[]string) func(*terraform.State) error {
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
			if !slices.Contains(gh.IssuedTokens(), tok.Token) || tok.Target != target {
				return fmt.Errorf("%s holds a registration token for %s, want one the stub GitHub issued for %s", id, tok.Target, target)
			}
		}
		return nil
	}
}
