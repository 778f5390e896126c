package actions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/providermirror"
)

// TestActions_prepare runs the actions' first step, which decides whether
// the run can claim, for the event GitHub gives no secrets nor OIDC token
// (a pull request from a fork), for runs Dependabot triggers (which get the
// OIDC token the workflow grants) and for a job without the id-token
// permission, which a broker needs whatever AWS credentials the job has;
// which provider version the actions install: a release
// tag's, a commit's, or the newest on a branch; and whether they install
// the CLI: not when it is on PATH and cli-version is empty or its version,
// else cli-version or the default, under a cache key of its own. It needs no AWS: nothing is
// claimed.
func TestActions_prepare(t *testing.T) {
	// terraformOnPath is a PATH with a stand-in terraform of version.
	terraformOnPath := func(t *testing.T, version string) string {
		bin := t.TempDir()
		writeExecutable(t, filepath.Join(bin, "terraform"), standInCLI("Terraform", version))
		return bin + string(os.PathListSeparator) + "/usr/bin:/bin"
	}
	const oidc = "https://token.actions.example/oidc"
	fork := map[string]string{"GITHUB_EVENT_NAME": "pull_request", "EC2RUNNERS_PR_HEAD_REPO": "mallory/app"}
	// Dependabot's pull request, from a branch of the repository itself.
	dependabot := map[string]string{"GITHUB_ACTOR": "dependabot[bot]", "GITHUB_EVENT_NAME": "pull_request", "EC2RUNNERS_PR_HEAD_REPO": "acme/app", "EC2RUNNERS_FALLBACK_RUNS_ON": "ubuntu-latest"}
	role := map[string]string{"EC2RUNNERS_ROLE_TO_ASSUME": "arn:aws:iam::123456789012:role/ci", "EC2RUNNERS_AWS_REGION": "eu-west-1"}
	// The broker checks the job's own OIDC token: AWS keys are not enough.
	broker := map[string]string{"EC2RUNNERS_BROKER_FUNCTION": "ci-runners-broker", "EC2RUNNERS_AWS_REGION": "eu-west-1"}
	keys := map[string]string{"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE"}
	// A workflow that pins the actions to a commit gets the provider the
	// commit's provider-version names: make release checks that a release's
	// commit names its own version.
	const commit = "0123456789abcdef0123456789abcdef01234567"
	shipped := providermirror.Version(t)
	merge := func(ms ...map[string]string) map[string]string {
		out := map[string]string{"EC2RUNNERS_POOL": "ci-runners", "EC2RUNNERS_PROVIDER_VERSION": "1.2.3"}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, c := range []struct {
		name    string
		mode    string
		env     map[string]string
		fails   string            // the message, when the step fails
		outputs map[string]string // outputs it must write
		says    string
	}{
		{name: "a push, with an OIDC token", mode: "claim", env: merge(role, map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": oidc}),
			outputs: map[string]string{"proceed": "true", "aws-region": "eu-west-1", "attempt": "1", "cache-key": "ec2runners-Linux-X64-terraform-1.2.3"}},
		{name: "a push, without id-token: write", mode: "claim", env: merge(role),
			fails: "give the job 'permissions: id-token: write'"},
		{name: "a fork's pull request, with fallback-runs-on", mode: "claim", env: merge(role, fork, map[string]string{"EC2RUNNERS_FALLBACK_RUNS_ON": "ubuntu-latest"}),
			outputs: map[string]string{"proceed": "false", "runs-on": "ubuntu-latest", "claimed": "false", "instance-ids": "[]"},
			says:    "a pull request from the fork mallory/app, which gets no secrets and no OIDC token: its jobs run on ubuntu-latest"},
		{name: "a fork's pull request, without fallback-runs-on", mode: "claim", env: merge(role, fork),
			fails: "this is a pull request from the fork mallory/app: GitHub gives it no secrets and no OIDC token, so it cannot claim runners from pool ci-runners. Set the claim action's fallback-runs-on input"},
		{name: "a fork's pull request, no role: keys of its own are missing too", mode: "claim", env: merge(fork),
			fails: "cannot claim runners from pool ci-runners"},
		{name: "a broker, with an OIDC token", mode: "claim", env: merge(role, broker, map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": oidc}),
			outputs: map[string]string{"proceed": "true", "aws-region": "eu-west-1"}},
		{name: "a broker and AWS keys, without id-token: write", mode: "claim", env: merge(broker, keys),
			fails: "GitHub gave this job no OIDC token, and the pool's broker ci-runners-broker checks it: give the job 'permissions: id-token: write'"},
		{name: "the release through a broker, without id-token: write", mode: "release", env: merge(role, broker),
			fails: "the pool's broker ci-runners-broker checks it"},
		{name: "a fork's pull request, a broker and AWS keys: no OIDC token, so the fallback", mode: "claim", env: merge(broker, keys, fork, map[string]string{"EC2RUNNERS_FALLBACK_RUNS_ON": "ubuntu-latest"}),
			outputs: map[string]string{"proceed": "false", "runs-on": "ubuntu-latest", "claimed": "false"}},
		{name: "a fork's pull request, no broker, AWS keys the workflow set: a claim", mode: "claim", env: merge(keys, fork),
			outputs: map[string]string{"proceed": "true"}},
		{name: "Dependabot, with id-token: write, claims as any run", mode: "claim", env: merge(role, dependabot, map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": oidc}),
			outputs: map[string]string{"proceed": "true", "aws-region": "eu-west-1"}},
		{name: "Dependabot, without id-token: write", mode: "claim", env: merge(role, dependabot),
			fails: "give the job 'permissions: id-token: write'"},
		{name: "the release of Dependabot's run", mode: "release", env: merge(role, dependabot, map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": oidc}),
			outputs: map[string]string{"proceed": "true"}},
		{name: "a pull request from the repository itself", mode: "claim", env: merge(role, map[string]string{"GITHUB_EVENT_NAME": "pull_request", "EC2RUNNERS_PR_HEAD_REPO": "acme/app", "ACTIONS_ID_TOKEN_REQUEST_URL": oidc}),
			outputs: map[string]string{"proceed": "true"}},
		{name: "pull_request_target from a fork runs with the base's secrets", mode: "claim", env: merge(role, fork, map[string]string{"GITHUB_EVENT_NAME": "pull_request_target", "ACTIONS_ID_TOKEN_REQUEST_URL": oidc}),
			outputs: map[string]string{"proceed": "true"}},
		{name: "the release of a fork's pull request", mode: "release", env: merge(role, fork),
			outputs: map[string]string{"proceed": "false"}, says: "nothing to release"},
		{name: "the provider of the action's tag", mode: "claim", env: merge(map[string]string{"EC2RUNNERS_PROVIDER_VERSION": "",
			"GITHUB_ACTION_PATH": "/home/runner/work/_actions/ec2runners/terraform-provider-ec2runners/v0.7.1/.github/actions/claim"}),
			outputs: map[string]string{"proceed": "true", "cache-key": "ec2runners-Linux-X64-terraform-0.7.1"}},
		{name: "a commit: the provider its provider-version names", mode: "claim", env: merge(map[string]string{"EC2RUNNERS_PROVIDER_VERSION": "",
			"GITHUB_ACTION_PATH": "/home/runner/work/_actions/ec2runners/terraform-provider-ec2runners/" + commit + "/.github/actions/claim"}),
			outputs: map[string]string{"proceed": "true", "cache-key": "ec2runners-Linux-X64-terraform-" + shipped}},
		{name: "a commit in github.action_ref", mode: "release", env: merge(map[string]string{"EC2RUNNERS_PROVIDER_VERSION": "", "EC2RUNNERS_ACTION_REF": commit}),
			outputs: map[string]string{"proceed": "true", "cache-key": "ec2runners-Linux-X64-terraform-" + shipped}},
		{name: "a branch: the newest provider", mode: "claim", env: merge(map[string]string{"EC2RUNNERS_PROVIDER_VERSION": "",
			"GITHUB_ACTION_PATH": "/home/runner/work/_actions/ec2runners/terraform-provider-ec2runners/main/.github/actions/claim"}),
			outputs: map[string]string{"proceed": "true"}, says: "the newest ec2runners provider is used"},
		{name: "no pool", mode: "claim", env: merge(map[string]string{"EC2RUNNERS_POOL": ""}), fails: "the pool input is empty"},
		{name: "OpenTofu not installed", mode: "claim", env: merge(map[string]string{"EC2RUNNERS_CLI": "tofu", "PATH": "/usr/bin:/bin"}),
			outputs: map[string]string{"proceed": "true", "cli-version": "1.10.6", "cli-cache-key": "ec2runners-cli-tofu_1.10.6_linux_amd64"}},
		{name: "Terraform on PATH, cli-version empty: that one", mode: "release", env: merge(map[string]string{"PATH": terraformOnPath(t, "1.11.4")}),
			outputs: map[string]string{"proceed": "true", "cli-version": "", "cli-cache-key": ""}},
		{name: "Terraform on PATH, another cli-version: that one installed", mode: "claim", env: merge(map[string]string{"PATH": terraformOnPath(t, "1.11.4"), "EC2RUNNERS_CLI_VERSION": "1.15.9"}),
			outputs: map[string]string{"proceed": "true", "cli-version": "1.15.9", "cli-cache-key": "ec2runners-cli-terraform_1.15.9_linux_amd64"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := newJob(t, c.env)
			out, err := j.run("prepare", c.mode)
			if c.fails != "" {
				if err == nil || !strings.Contains(out, c.fails) {
					t.Fatalf("prepare %s: %v, want a failure saying %q", c.mode, err, c.fails)
				}
				return
			}
			if err != nil {
				t.Fatalf("prepare %s: %v", c.mode, err)
			}
			got := j.outputs()
			for k, v := range c.outputs {
				if got[k] != v {
					t.Errorf("output %s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			if !strings.Contains(out, c.says) {
				t.Errorf("prepare %s did not say %q", c.mode, c.says)
			}
		})
	}
}
