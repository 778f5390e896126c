package examples

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// runnerScript is the data source whose content is the user data.
const runnerScript = "ec2runners_runner_script"

// TestExamples_userDataFitsEC2 renders the user data of every
// ec2runners_runner_script in examples/ with agentscript, as the data source
// does, from the example's own arguments (a heredoc pre_runner_script with
// its full text), and checks that EC2 takes it: at most 16384 bytes before
// base64 (EC2 refuses more in CreateLaunchTemplate, CreateLaunchTemplateVersion
// and RunInstances; the emulator would not). An argument the example takes
// from a variable or a local is the longest the data source accepts, and so
// is the region left to the provider's; the agent is a release's, with its
// digests. A pre_runner_script that is not literal text fails the test: its
// size cannot be bounded here.
func TestExamples_userDataFitsEC2(t *testing.T) {
	rendered := 0
	for _, dir := range exampleDirs(t) {
		files, err := filepath.Glob(filepath.Join(examplesDir, filepath.FromSlash(dir), "*.tf"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			for _, block := range runnerScripts(t, path) {
				name := dir + ": data." + runnerScript + "." + block.Labels[1]
				o := exampleOptions(t, name, block.Body)
				userData, err := agentscript.Render(o)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				rendered++
				if script, _ := json.Marshal(o.PreRunnerScript); !strings.Contains(userData, strings.Trim(string(script), `"`)) {
					t.Errorf("%s: the user data lacks the pre_runner_script's full text %q", name, o.PreRunnerScript)
				}
				if len(userData) > 16384 {
					t.Errorf("%s: the user data is %d bytes; EC2 takes at most 16384", name, len(userData))
				}
				t.Logf("%s: %d bytes of user data (EC2 takes at most 16384)", name, len(userData))
			}
		}
	}
	// examples/complete's and the data source's own example, at least.
	if rendered < 2 {
		t.Errorf("rendered %d examples' user data, want every %s in examples/ (complete and data-sources at least)", rendered, runnerScript)
	}
}

// runnerScripts are the data "ec2runners_runner_script" blocks of a file.
func runnerScripts(t *testing.T, path string) []*hclsyntax.Block {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parsing %s: %v", path, diags)
	}
	var blocks []*hclsyntax.Block
	for _, b := range file.Body.(*hclsyntax.Body).Blocks {
		if b.Type == "data" && len(b.Labels) == 2 && b.Labels[0] == runnerScript {
			blocks = append(blocks, b)
		}
	}
	return blocks
}

// longest are the longest values the data source accepts for the arguments
// examples take from variables or locals, or leave to the provider.
var longest = map[string]string{
	"pool":              strings.Repeat("p", protocol.MaxPoolNameLength),
	"region":            "ap-southeast-4",
	"github_url":        "https://ghe.example.com/" + strings.Repeat("a", agentscript.MaxURLLength-len("https://ghe.example.com/")),
	"github_owner":      strings.Repeat("o", 39),
	"github_repository": strings.Repeat("r", 100),
	"runner_user":       strings.Repeat("u", 32),
	// A qualified function ARN, in the partition with the longest name
	// (the pattern bounds the function's name and qualifier, not the
	// partition's).
	"broker_function": "arn:aws-us-gov:lambda:ap-southeast-4:123456789012:function:" + strings.Repeat("f", 64) + ":" + strings.Repeat("q", 128),
}

// metaArguments are Terraform's, not the data source's.
var metaArguments = map[string]bool{"count": true, "for_each": true, "depends_on": true, "provider": true, "lifecycle": true}

// exampleOptions are the data source's settings in body, with its defaults
// for the arguments left out.
func exampleOptions(t *testing.T, name string, body *hclsyntax.Body) agentscript.Options {
	t.Helper()
	args := map[string]string{
		"region": longest["region"], "github_url": "https://github.com",
		"runner_user": agentscript.DefaultRunnerUser, "heartbeat_interval": agentscript.DefaultHeartbeatInterval.String(),
	}
	for arg, attr := range body.Attributes {
		if metaArguments[arg] {
			continue
		}
		v, diags := attr.Expr.Value(nil) // nil: no variables, locals nor functions
		switch {
		case !diags.HasErrors() && v.IsWhollyKnown() && !v.IsNull() && v.Type() == cty.String:
			args[arg] = v.AsString()
		case !diags.HasErrors() && v.IsWhollyKnown() && !v.IsNull() && v.Type() == cty.Bool:
			args[arg] = map[bool]string{true: "true", false: "false"}[v.True()]
		case longest[arg] != "":
			args[arg] = longest[arg]
		default:
			t.Fatalf("%s: %s is not literal text, and this test knows no longest value for it: give it one (longest)", name, arg)
		}
	}
	heartbeat, err := time.ParseDuration(args["heartbeat_interval"])
	if err != nil {
		t.Fatalf("%s: heartbeat_interval: %v", name, err)
	}
	return agentscript.Options{
		Pool: args["pool"], Region: args["region"], GitHubURL: args["github_url"],
		GitHubOwner: args["github_owner"], GitHubRepository: args["github_repository"],
		RunnerVersion: args["runner_version"], RunnerDownloadURL: args["runner_download_url"], RunnerSHA256: args["runner_sha256"],
		RunnerUser: args["runner_user"], PreRunnerScript: args["pre_runner_script"], HeartbeatInterval: heartbeat,
		JobsMetadataAccess: args["jobs_metadata_access"] == "true", AgentDownloadURL: args["agent_download_url"],
		BrokerFunction: args["broker_function"],
		// A release's agent (a snapshot's version is the longest), whose
		// digests the user data pins.
		Agent: agentscript.Release{Version: "10.10.10-snapshot-" + strings.Repeat("0", 40), SHA256: map[string]string{
			"amd64": strings.Repeat("ab", 32), "arm64": strings.Repeat("cd", 32),
		}},
	}
}
