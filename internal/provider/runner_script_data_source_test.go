package provider

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
)

func TestAccRunnerScriptDataSource_basic(t *testing.T) {
	const address = "data.ec2runners_runner_script.test"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config: `
data "ec2runners_runner_script" "test" {
  pool              = "ci-runners"
  github_owner      = "octo"
  github_repository = "app"
  pre_runner_script = "dnf install -y git"
}`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(address, tfjsonpath.New("region"), knownvalue.StringExact(testClients.Region)),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("github_url"), knownvalue.StringExact("https://github.com")),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("runner_version"), knownvalue.StringExact(agentscript.DefaultRunnerVersion)),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("runner_user"), knownvalue.StringExact("runner")),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("heartbeat_interval"), knownvalue.StringExact("5s")),
			},
			Check: func(s *terraform.State) error {
				attrs := s.RootModule().Resources[address].Primary.Attributes
				content := attrs["content"]
				want, err := agentscript.Render(agentscript.Options{
					Pool: "ci-runners", Region: testClients.Region, GitHubURL: "https://github.com", GitHubOwner: "octo", GitHubRepository: "app",
					RunnerVersion: agentscript.DefaultRunnerVersion, RunnerUser: "runner", PreRunnerScript: "dnf install -y git",
					HeartbeatInterval: agentscript.DefaultHeartbeatInterval,
				})
				if err != nil || content != want {
					return fmt.Errorf("content is not the script rendered from the arguments and defaults (%v):\n%.400s", err, content)
				}
				if decoded, err := base64.StdEncoding.DecodeString(attrs["content_base64"]); err != nil || string(decoded) != content {
					return fmt.Errorf("content_base64 does not decode to content (%v)", err)
				}
				if !strings.Contains(content, "DYNAMODB_URL='https://dynamodb."+testClients.Region+".amazonaws.com'") {
					return fmt.Errorf("the script does not talk to the regional DynamoDB endpoint")
				}
				return nil
			},
		}},
	})
}

func TestAccRunnerScriptDataSource_invalidInput(t *testing.T) {
	for name, tc := range map[string]struct{ args, want string }{
		"bad pool":           {`pool = "my pool"`, `Attribute pool may contain only letters, digits`},
		"bad region":         {`region = "Mars"`, `Attribute region must be an AWS region such as eu-west-1`},
		"bad URL":            {`github_url = "github.com"`, `Attribute github_url must be an http:// or https:// URL`},
		"bad owner":          {`github_owner = "octo/app"`, `Attribute github_owner must be a GitHub user or organization name`},
		"bad repository":     {`github_repository = "a b"`, `Attribute github_repository must be a repository name`},
		"bad version":        {`runner_version = "latest"`, `Attribute runner_version must be a release version such as`},
		"bad download URL":   {`runner_download_url = "s3://bucket/runner.tgz"`, `Attribute runner_download_url must be an http:// or https:// URL`},
		"bad user":           {`runner_user = "Runner"`, `Attribute runner_user must be a user name`},
		"heartbeat too slow": {`heartbeat_interval = "30s"`, `Attribute heartbeat_interval must be a duration such as .90s., .7m. or .1h30m., from 1s to 10s`},
	} {
		t.Run(name, func(t *testing.T) {
			args := map[string]string{"pool": `pool = "ci"`, "github_owner": `github_owner = "octo"`}
			key, _, _ := strings.Cut(tc.args, " ")
			args[key] = tc.args
			var body []string
			for _, a := range args {
				body = append(body, a)
			}
			expectPlanError(t, "data \"ec2runners_runner_script\" \"test\" {\n"+strings.Join(body, "\n")+"\n}", tc.want)
		})
	}
}
