package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

func TestAccRunnerScriptDataSource_basic(t *testing.T) {
	const address = "data.ec2runners_runner_script.test"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config: `
data "ec2runners_runner_script" "test" {
  pool                = "ci-runners"
  github_owner        = "octo"
  github_repository   = "app"
  pre_runner_script   = "dnf install -y git"
  runner_version      = "2.329.0"
  runner_download_url = "https://mirror.example.com/actions-runner-linux-x64-2.329.0.tar.gz"
  runner_sha256       = "` + testRunnerSHA256 + `"
  broker_function     = "ci-runners-broker"
}`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(address, tfjsonpath.New("region"), knownvalue.StringExact(testRegion())),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("github_url"), knownvalue.StringExact("https://github.com")),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("runner_version"), knownvalue.StringExact("2.329.0")),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("runner_user"), knownvalue.StringExact("runner")),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("heartbeat_interval"), knownvalue.StringExact("5s")),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("agent_version"), knownvalue.StringExact("test")),
			},
			Check: func(s *terraform.State) error {
				attrs := s.RootModule().Resources[address].Primary.Attributes
				content := attrs["content"]
				want, err := agentscript.Render(agentscript.Options{
					Pool: "ci-runners", Region: testClients.Region, GitHubURL: "https://github.com", GitHubOwner: "octo", GitHubRepository: "app",
					RunnerVersion: "2.329.0", RunnerUser: "runner", PreRunnerScript: "dnf install -y git",
					RunnerDownloadURL: "https://mirror.example.com/actions-runner-linux-x64-2.329.0.tar.gz", RunnerSHA256: testRunnerSHA256,
					HeartbeatInterval: agentscript.DefaultHeartbeatInterval, BrokerFunction: "ci-runners-broker", Agent: agentscript.Built("test"),
				})
				if err != nil || content != want {
					return fmt.Errorf("content is not the script rendered from the arguments and defaults (%v):\n%.400s", err, content)
				}
				if decoded, err := base64.StdEncoding.DecodeString(attrs["content_base64"]); err != nil || string(decoded) != content {
					return fmt.Errorf("content_base64 does not decode to content (%v)", err)
				}
				if !strings.Contains(content, `"sha256":"`+testRunnerSHA256+`"`) {
					return fmt.Errorf("the agent's configuration in the script does not pin runner_sha256")
				}
				return nil
			},
		}},
	})
}

const testRunnerSHA256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestAccRunnerScriptDataSource_sensitive: pre_runner_script ends up in the
// script, so Terraform treats the script as sensitive: an output of it
// without sensitive = true is an error, and plans hide it.
func TestAccRunnerScriptDataSource_sensitive(t *testing.T) {
	const script = `
data "ec2runners_runner_script" "test" {
  pool              = "ci-runners"
  github_owner      = "octo"
  pre_runner_script = "echo secret-token"
}
`
	for _, attr := range []string{"content", "content_base64"} {
		t.Run(attr, func(t *testing.T) {
			expectPlanError(t, script+`output "script" { value = data.ec2runners_runner_script.test.`+attr+` }`,
				`(?s)Output refers to sensitive values.*output "script"`)
		})
	}
	t.Run("sensitive output", func(t *testing.T) {
		resource.ParallelTest(t, resource.TestCase{
			ProtoV6ProviderFactories: testProviders,
			Steps: []resource.TestStep{{
				Config: script + `output "script" {
  value     = data.ec2runners_runner_script.test.content
  sensitive = true
}`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectSensitiveValue("data.ec2runners_runner_script.test", tfjsonpath.New("content")),
					statecheck.ExpectSensitiveValue("data.ec2runners_runner_script.test", tfjsonpath.New("content_base64")),
					statecheck.ExpectSensitiveValue("data.ec2runners_runner_script.test", tfjsonpath.New("pre_runner_script")),
				},
			}},
		})
	})
}

func TestAccRunnerScriptDataSource_invalidInput(t *testing.T) {
	for name, tc := range map[string]struct{ args, want string }{
		"bad pool":             {`pool = "my pool"`, `Attribute pool may contain only letters, digits`},
		"bad region":           {`region = "Mars"`, `Attribute region must be an AWS region such as eu-west-1`},
		"bad URL":              {`github_url = "github.com"`, `Attribute github_url: "github.com" is not a URL such as https://github.example.com; use https:// \(http:// only to a loopback host: 127.0.0.0/8, ::1 or localhost\)`},
		"plain http URL":       {`github_url = "http://ghe.example.com"`, `Attribute github_url: "http://ghe.example.com" uses plain http:// to a host that is not loopback, so tokens or the runner could be read or changed on the way; use https:// \(http:// only to a loopback host: 127.0.0.0/8, ::1 or localhost\)`},
		"bad owner":            {`github_owner = "octo/app"`, `Attribute github_owner must be a GitHub user or organization name`},
		"bad repository":       {`github_repository = "a b"`, `Attribute github_repository must be a repository name`},
		"bad version":          {`runner_version = "latest"`, `Attribute runner_version: runner version "latest" is not a release version such as 2.329.0`},
		"version too old":      {`runner_version = "2.328.0"`, `Attribute runner_version: 2.328.0 is older than 2.329.0, the oldest runner GitHub lets register`},
		"mirror of no version": {`runner_download_url = "https://mirror.example.com/runner.tar.gz"`, `(?s)Attribute "runner_version" must be specified when "runner_download_url" is\s+specified`},
		"digest of no version": {`runner_sha256 = "` + strings.Repeat("a", 64) + `"`, `(?s)Attribute "runner_version" must be specified when "runner_sha256" is\s+specified`},
		"URL too long":         {`github_url = "https://ghe.example.com/` + strings.Repeat("a", 500) + `"`, `Attribute github_url string length must be at most 512`},
		"plain http agent":     {`agent_download_url = "http://mirror.internal/ec2runners"`, `Attribute agent_download_url: "http://mirror.internal/ec2runners" uses plain http://`},
		"bad download URL":     {`runner_download_url = "s3://bucket/runner.tgz"`, `Attribute runner_download_url: "s3://bucket/runner.tgz" is not an https:// URL; use https:// \(http:// only to a loopback host`},
		"plain http mirror":    {`runner_download_url = "http://mirror.internal/runner.tar.gz"`, `Attribute runner_download_url: "http://mirror.internal/runner.tar.gz" uses plain http:// to a host that is not loopback`},
		"http to 128.0.0.1":    {`runner_download_url = "http://128.0.0.1/runner.tar.gz"`, `Attribute runner_download_url: "http://128.0.0.1/runner.tar.gz" uses plain http://`},
		"short sha256":         {`runner_sha256 = "abc123"`, `Attribute runner_sha256 must be a SHA-256 digest: 64 hexadecimal digits, got: abc123`},
		"sha256 not hex":       {`runner_sha256 = "` + strings.Repeat("g", 64) + `"`, `Attribute runner_sha256 must be a SHA-256 digest: 64 hexadecimal digits`},
		"sha256 too long":      {`runner_sha256 = "` + strings.Repeat("a", 65) + `"`, `Attribute runner_sha256 must be a SHA-256 digest: 64 hexadecimal digits`},
		"bad user":             {`runner_user = "Runner"`, `Attribute runner_user must be a user name`},
		"heartbeat too slow":   {`heartbeat_interval = "30s"`, `Attribute heartbeat_interval must be a duration such as .90s., .7m. or .1h30m., from 1s to 10s`},
		"broker not Lambda's":  {`broker_function = "arn:aws:s3:::ci-runners-broker"`, `Attribute broker_function must be a Lambda function's name \(1-64 characters of A-Z a-z 0-9 _ -\) or its ARN`},

		"empty pool":                 {`pool = ""`, `Attribute pool string length must be between 3 and 40, got: 0`},
		"empty region":               {`region = ""`, `Attribute region must be an AWS region such as eu-west-1, got: `},
		"region with a zone":         {`region = "eu-west-1a"`, `Attribute region must be an AWS region such as eu-west-1, got: eu-west-1a`},
		"URL without host":           {`github_url = "https://"`, `Attribute github_url: "https://" is not a URL`},
		"empty owner":                {`github_owner = ""`, `Attribute github_owner must be a GitHub user or organization name: 1-39 letters, digits or '-', not starting with '-', got: `},
		"owner too long":             {`github_owner = "` + strings.Repeat("o", 40) + `"`, `Attribute github_owner must be a GitHub user or organization name: 1-39`},
		"repository too long":        {`github_repository = "` + strings.Repeat("r", 101) + `"`, `Attribute github_repository must be a repository name: 1-100 letters, digits, '_', '.' or '-'`},
		"empty repository":           {`github_repository = ""`, `Attribute github_repository must be a repository name: 1-100 letters`},
		"version with v":             {`runner_version = "v2.300.0"`, `Attribute runner_version: runner version "v2.300.0" is not a release version`},
		"empty download URL":         {`runner_download_url = ""`, `Attribute runner_download_url: "" is not a URL`},
		"user too long":              {`runner_user = "` + strings.Repeat("u", 33) + `"`, `Attribute runner_user must be a user name: up to 32 lower-case letters, digits, '_' or '-', starting with a letter or '_'`},
		"user starting with a digit": {`runner_user = "1runner"`, `Attribute runner_user must be a user name: up to 32 lower-case letters, digits, '_' or '-', starting with a letter or '_', got: 1runner`},
		"heartbeat too fast":         {`heartbeat_interval = "500ms"`, `Attribute heartbeat_interval must be a duration such as .90s., .7m. or .1h30m., from 1s to 10s, got "500ms"`},
		"heartbeat without unit":     {`heartbeat_interval = "5"`, `Attribute heartbeat_interval must be a duration such as .90s., .7m. or .1h30m., from 1s to 10s, got "5"`},
		"script not a string":        {`pre_runner_script = ["dnf install -y git"]`, `Inappropriate value for attribute "pre_runner_script": string required`},
		"read-only content":          {`content = "#!/bin/bash"`, `(?s)Invalid Configuration for Read-Only Attribute.*content = "#!/bin/bash"`},
	} {
		t.Run(name, func(t *testing.T) {
			args := map[string]string{"pool": `pool = "ci-runners"`, "github_owner": `github_owner = "octo"`}
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

// EC2 takes at most 16 KB of user data: a pre_runner_script that makes the
// user data longer fails the plan, naming it, before any launch template
// is created with it.
func TestAccRunnerScriptDataSource_userDataLimit(t *testing.T) {
	expectPlanError(t, `
data "ec2runners_runner_script" "test" {
  pool              = "ci-runners"
  github_owner      = "octo"
  pre_runner_script = "`+strings.Repeat(`echo too long\n`, 1200)+`"
}`, `(?s)with data.ec2runners_runner_script.test.*pre_runner_script: the user data would be [0-9]+ bytes, and EC2 takes at most 16384`)
}

// stubReleases is a ReleaseSource with fixed releases.
type stubReleases []protocol.RunnerRelease

func (s stubReleases) RunnerReleases(context.Context) ([]protocol.RunnerRelease, error) {
	return s, nil
}

// A pinned runner_version GitHub no longer sends jobs to, or soon will not,
// is warned about at plan time, naming the attribute; one it accepts for
// long is not.
func TestRunnerScriptDataSource_warnsOfAnOutdatedPin(t *testing.T) {
	now := time.Now()
	releases := stubReleases{
		{Version: "2.330.0", PublishedAt: now.Add(-90 * 24 * time.Hour)},
		{Version: "2.331.0", PublishedAt: now.Add(-60 * 24 * time.Hour)},
		{Version: "2.332.0", PublishedAt: now.Add(-27 * 24 * time.Hour)},
		{Version: "2.333.0", PublishedAt: now.Add(-26 * 24 * time.Hour)},
		{Version: "2.334.0", PublishedAt: now.Add(-2 * 24 * time.Hour)},
	}
	d := &runnerScriptDataSource{data: &providerData{github: &claim.GitHubAccess{Releases: releases}}}
	for _, tc := range []struct{ pin, want string }{
		{"2.330.0", "GitHub no longer sends jobs to this runner version"},    // 2.331.0 came out 60 days ago
		{"2.331.0", "GitHub stops sending jobs to this runner version soon"}, // in 3 days: 2.332.0 came out 27 days ago
		{"2.332.0", "GitHub stops sending jobs to this runner version soon"}, // in 4 days
		{"2.333.0", ""}, // 2.334.0 came out 2 days ago
		{"2.334.0", ""},
	} {
		var diags diag.Diagnostics
		d.warnOutdatedRunner(context.Background(), tc.pin, &diags)
		got := ""
		for _, w := range diags.Warnings() {
			got += w.Summary()
			if p, ok := w.(diag.DiagnosticWithPath); !ok || !p.Path().Equal(path.Root("runner_version")) {
				t.Errorf("pin %s: warning %q does not name runner_version", tc.pin, w.Summary())
			}
		}
		if got != tc.want || diags.HasError() {
			t.Errorf("pin %s: diagnostics %v, want the warning %q", tc.pin, diags, tc.want)
		}
	}
}
