package provider

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// TestAccProvider_endpointsAndDefaultTags configures everything in the
// provider block instead of the environment (against real AWS, its regional
// endpoints, with the environment's credentials). Not parallel: it unsets
// process-wide variables.
func TestAccProvider_endpointsAndDefaultTags(t *testing.T) {
	emulatorURL := os.Getenv("AWS_ENDPOINT_URL")
	region, credentials := "us-east-1", "access_key = \"test\"\n  secret_key = \"test\""
	endpoint := func(string) string { return emulatorURL }
	if emulator.RealAWS() {
		region, credentials = testRegion(), ""
		endpoint = func(service string) string { return "https://" + service + "." + region + ".amazonaws.com" }
	} else {
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	}
	endpoints := fmt.Sprintf(`sqs      = %q
    dynamodb = %q
    ec2      = %q
    sts      = %q`, endpoint("sqs"), endpoint("dynamodb"), endpoint("ec2"), endpoint("sts"))
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_REGION", "")
	name := randomName("acc-provider")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
provider "ec2runners" {
  region     = %[1]q
  %[2]s
  max_retries = 5
  endpoints {
    %[3]s
  }
  default_tags {
    tags = { owner = "platform", env = "default" }
  }
}

resource "ec2runners_pool" "test" {
  name             = %[4]q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
  tags             = { env = "ci" }
}`, region, credentials, endpoints, name),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("tags_all"), knownvalue.MapExact(map[string]knownvalue.Check{
					"owner": knownvalue.StringExact("platform"), "env": knownvalue.StringExact("ci"),
				})),
				statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("tags"), knownvalue.MapExact(map[string]knownvalue.Check{
					"env": knownvalue.StringExact("ci"),
				})),
			},
			Check: checkQueueTags(name, "large", map[string]string{"owner": "platform", "env": "ci"}),
		}},
	})
}

// TestAccProvider_missingRegion: no region anywhere is a clear error.
func TestAccProvider_missingRegion(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", empty)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config:      `data "ec2runners_pool" "test" { name = "any" }`,
			ExpectError: regexp.MustCompile(wrapped(`no AWS region is set: set the provider's region argument, the AWS_REGION environment variable`)),
		}},
	})
}

// TestAccProvider_invalidEndpoint: endpoint URLs are checked at plan time.
func TestAccProvider_invalidEndpoint(t *testing.T) {
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config: `
provider "ec2runners" {
  endpoints { sqs = "localhost:4566" }
}
data "ec2runners_pool" "test" { name = "any" }`,
			ExpectError: regexp.MustCompile(wrapped(`Attribute endpoints.sqs must be an http:// or https:// URL`)),
		}},
	})
}

// TestAccProvider_unknownRegion: a region that is only known after apply is
// refused instead of silently falling back to the default chain.
func TestAccProvider_unknownRegion(t *testing.T) {
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config: `
resource "terraform_data" "region" {
  input = "us-east-1"
}
provider "ec2runners" {
  region = terraform_data.region.output
}
data "ec2runners_pool" "test" { name = "any" }`,
			ExpectError: regexp.MustCompile(wrapped(`Attribute region must be known when Terraform plans`)),
		}},
	})
}

func TestAccProvider_githubSettingsInvalid(t *testing.T) {
	const dataSource = `
data "ec2runners_runner_script" "test" {
  pool         = "ci-runners"
  github_owner = "octo"
}`
	for name, tc := range map[string]struct{ block, want string }{
		"token and app": {
			`token = "ghp_x"
    app_id = 1
    installation_id = 2
    private_key = "key"`,
			`Attribute "github.app_id" cannot be specified when "github.token" is specified`,
		},
		"app without key": {
			`app_id = 1
    installation_id = 2`,
			`Attribute "github.private_key" must be specified when "github.app_id" is\s+specified`,
		},
		"app id zero": {
			`app_id = 0
    installation_id = 2
    private_key = "key"`,
			`Attribute github.app_id value must be at least 1`,
		},
		"key not PEM": {
			`app_id = 1
    installation_id = 2
    private_key = "not a key"`,
			`github.private_key: not a PEM-encoded RSA private key`,
		},
		"installation id zero": {
			`app_id = 1
    installation_id = 0
    private_key = "key"`,
			`Attribute github.installation_id value must be at least 1, got: 0`,
		},
		"negative app id": {
			`app_id = -1
    installation_id = 2
    private_key = "key"`,
			`Attribute github.app_id value must be at least 1, got: -1`,
		},
		"app id not a number": {
			`app_id = "my-app"
    installation_id = 2
    private_key = "key"`,
			`Inappropriate value for attribute "app_id": a number is required`,
		},
		"key without app": {
			`private_key = "key"`,
			`Attribute "github.app_id" must be specified when "github.private_key" is\s+specified`,
		},
		"installation without app": {
			`installation_id = 2`,
			`Attribute "github.app_id" must be specified when "github.installation_id"\s+is specified`,
		},
		"app without installation": {
			`app_id = 1
    private_key = "key"`,
			`Attribute "github.installation_id" must be specified when "github.app_id" is\s+specified`,
		},
		"base URL without scheme": {
			`token = "ghp_x"
    base_url = "ghe.example.com/api/v3"`,
			`Attribute github.base_url: "ghe.example.com/api/v3" is not a URL such as https://github.example.com; use https:// \(http:// only to a loopback host: 127.0.0.0/8, ::1 or localhost\)`,
		},
		"bad base URL": {
			`token = "ghp_x"
    base_url = "api.github.com"`,
			`Attribute github.base_url: "api.github.com" is not a URL`,
		},
		"base URL over plain http": {
			`token = "ghp_x"
    base_url = "http://ghe.example.com/api/v3"`,
			`Attribute github.base_url: "http://ghe.example.com/api/v3" uses plain http:// to a host that is not loopback, so tokens or the runner could be read or changed on the way; use https:// \(http:// only to a loopback host: 127.0.0.0/8, ::1 or localhost\)`,
		},
		"owner not a GitHub name": {
			`token = "ghp_x"
    owner = "-octo"`,
			`Attribute github.owner must be a GitHub user or organization name`,
		},
		"repository with owner": {
			`token = "ghp_x"
    owner = "octo"
    repository = "octo/app"`,
			`Attribute github.repository must be a repository name`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			expectPlanError(t, "provider \"ec2runners\" {\n  github {\n    "+tc.block+"\n  }\n}\n"+dataSource, tc.want)
		})
	}
}

// github.owner defaults to GITHUB_REPOSITORY_OWNER, which is checked like
// the attribute. Not parallel: it sets process-wide variables.
func TestAccProvider_githubOwnerFromEnvironmentInvalid(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghp_x")
	t.Setenv("GITHUB_REPOSITORY_OWNER", "octo org")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config: `
data "ec2runners_runner_script" "test" {
  pool         = "ci-runners"
  github_owner = "octo"
}`,
			ExpectError: regexp.MustCompile(wrapped(`GITHUB_REPOSITORY_OWNER, which is "octo org": not a GitHub user or organization name`)),
		}},
	})
}

// A GitHub App with a valid key configures; its tokens are fetched only by claims.
func TestAccProvider_githubApp(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
provider "ec2runners" {
  github {
    app_id          = 12345
    installation_id = 678
    private_key     = %q
    base_url        = "https://ghe.example.com/api/v3"
  }
}

data "ec2runners_runner_script" "test" {
  pool         = "ci-runners"
  github_owner = "octo"
  github_url   = "https://ghe.example.com"
}`, pemKey),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.ec2runners_runner_script.test", tfjsonpath.New("github_url"), knownvalue.StringExact("https://ghe.example.com")),
			},
		}},
	})
}
