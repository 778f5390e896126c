// Package agentscript renders the user data of a runner instance: a short
// bootstrap that installs the agent (internal/agent: the program
// ec2runners-agent, released with the provider) and its configuration,
// then hands over to it. The agent is the one baked into the image when it
// is the provider's version, else the release's binary for the instance's
// architecture, checked against the SHA-256 the rendered text pins.
//
// EC2 takes at most 16 KB of user data (before base64): the bootstrap
// stays under 4 KB whatever the settings, and only a pre-runner script can
// take it further; Render refuses what EC2 would.
package agentscript

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

//go:embed bootstrap.sh
var bootstrapText string

var bootstrap = template.Must(template.New("bootstrap").Option("missingkey=zero").Funcs(template.FuncMap{"q": shellQuote}).Parse(bootstrapText))

// Limits of the rendered script.
const (
	// MaxUserDataBytes is EC2's limit on user data: 16 KB raw, before
	// base64 (internal/awslimits, whose rules the emulator's front and the
	// fakes enforce).
	MaxUserDataBytes = awslimits.MaxUserDataBytes
	// MaxBootstrapBytes bounds the script without a pre-runner script.
	MaxBootstrapBytes = 4 * 1024
	// MaxURLLength bounds each URL setting, so that the bootstrap stays
	// under MaxBootstrapBytes.
	MaxURLLength = 512
)

// Options are the settings of one rendered script, named as the data
// source's attributes. The zero values of the intervals, paths and
// endpoints are an instance's; tests move them.
type Options struct {
	Pool              string
	Region            string
	GitHubURL         string // web URL of GitHub or GitHub Enterprise Server
	GitHubOwner       string
	GitHubRepository  string // "": the runner registers at organization level
	RunnerVersion     string // "": the newest release, kept up to date
	RunnerDownloadURL string // "": GitHub's release of RunnerVersion
	RunnerSHA256      string // "": GitHub's digest (the pinned version's archive is not checked)
	RunnerUser        string
	PreRunnerScript   string
	HeartbeatInterval time.Duration
	// JobsMetadataAccess lets jobs reach the instance metadata service, and
	// with it the instance role's credentials.
	JobsMetadataAccess bool
	// BrokerFunction is the pool's broker (a Lambda function's name or
	// ARN), which mints the just-in-time registration of each job of a run
	// claimed through it; "": the pool has none.
	BrokerFunction string
	// Agent is the agent the user data installs; AgentDownloadURL the
	// directory of its release assets ("": the release on GitHub).
	Agent            Release
	AgentDownloadURL string

	// Set only by tests.
	Intervals          agent.Intervals // all but Heartbeat
	Paths              agent.Paths
	Endpoints          agent.Endpoints
	RunnerReleasesURL  string
	RunnerDownloadBase string
	AgentPath          string
	ConfigPath         string
	SystemdDir         string
}

// Default settings.
const (
	DefaultRunnerUser        = "runner"
	DefaultHeartbeatInterval = agent.DefaultHeartbeatInterval
)

// Validate reports the invalid settings, each error naming its setting
// first ("github_url: ...").
func (o Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	checkURL := func(setting, raw string) {
		if raw == "" {
			return
		}
		if len(raw) > MaxURLLength {
			errs = append(errs, fmt.Errorf("%s: %d characters long, at most %d", setting, len(raw), MaxURLLength))
		} else if err := github.CheckURL(raw); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", setting, err))
		}
	}
	check(protocol.ValidatePoolName(o.Pool) == nil, "pool: %q is not a pool name (1-%d characters of A-Z a-z 0-9 _ -)", o.Pool, protocol.MaxPoolNameLength)
	check(protocol.RegionPattern.MatchString(o.Region), "region: %q is not a region name", o.Region)
	check(o.GitHubURL != "", "github_url: required")
	checkURL("github_url", o.GitHubURL)
	check(protocol.GitHubOwnerPattern.MatchString(o.GitHubOwner), "github_owner: %q is not a GitHub user or organization name", o.GitHubOwner)
	check(o.GitHubRepository == "" || protocol.GitHubRepositoryPattern.MatchString(o.GitHubRepository), "github_repository: %q is not a repository name", o.GitHubRepository)
	if o.RunnerVersion != "" {
		check(protocol.ValidateRunnerVersion(o.RunnerVersion) == nil, "runner_version: %q is not a release version such as %s", o.RunnerVersion, protocol.MinimumRunnerVersion)
		check(protocol.CompareRunnerVersions(o.RunnerVersion, protocol.MinimumRunnerVersion) >= 0,
			"runner_version: %s is older than %s, the oldest runner GitHub lets register", o.RunnerVersion, protocol.MinimumRunnerVersion)
	}
	checkURL("runner_download_url", o.RunnerDownloadURL)
	check(o.RunnerDownloadURL == "" || o.RunnerVersion != "", "runner_download_url: needs runner_version, the version of the archive it names")
	check(o.RunnerSHA256 == "" || agent.SHA256Pattern.MatchString(o.RunnerSHA256), "runner_sha256: %q is not a SHA-256 digest (64 hexadecimal digits)", o.RunnerSHA256)
	check(o.RunnerSHA256 == "" || o.RunnerVersion != "", "runner_sha256: needs runner_version, the version of the archive it is the digest of")
	check(agent.UserPattern.MatchString(o.RunnerUser), "runner_user: %q is not a user name (lower-case letters, digits, _ and -)", o.RunnerUser)
	check(o.BrokerFunction == "" || agent.BrokerFunctionPattern.MatchString(o.BrokerFunction),
		"broker_function: %q is not a Lambda function's name (1-64 characters of A-Z a-z 0-9 _ -) or ARN", o.BrokerFunction)
	check(o.HeartbeatInterval >= agent.MinimumHeartbeatInterval && o.HeartbeatInterval <= agent.MaximumHeartbeatInterval,
		"heartbeat_interval: %s is outside 1s-10s (a claim calls a runner unhealthy after 15s without one)", o.HeartbeatInterval)
	checkURL("agent_download_url", o.AgentDownloadURL)
	if err := o.Agent.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// config is the agent's configuration the options give.
func (o Options) config() agent.Config {
	target := o.GitHubOwner
	if o.GitHubRepository != "" {
		target += "/" + o.GitHubRepository
	}
	intervals := o.Intervals
	intervals.Heartbeat = protocol.Duration(o.HeartbeatInterval)
	return agent.Config{
		Pool: o.Pool, Region: o.Region, GitHubURL: strings.TrimRight(o.GitHubURL, "/"), GitHubTarget: target,
		RunnerUser: o.RunnerUser,
		Runner: agent.RunnerSource{Version: o.RunnerVersion, DownloadURL: o.RunnerDownloadURL, SHA256: strings.ToLower(o.RunnerSHA256),
			ReleasesURL: o.RunnerReleasesURL, DownloadBase: o.RunnerDownloadBase},
		PreRunnerScript: o.PreRunnerScript, JobsMetadataAccess: o.JobsMetadataAccess, BrokerFunction: o.BrokerFunction,
		Intervals: intervals, Paths: o.Paths, Endpoints: o.Endpoints,
	}
}

// Render returns the user data: the bootstrap with the agent's
// configuration. It fails when EC2 would refuse it (more than 16 KB), naming
// pre_runner_script, the only setting that can make it that long.
func Render(o Options) (string, error) {
	if err := o.Validate(); err != nil {
		return "", err
	}
	cfg := o.config()
	if err := cfg.Validate(); err != nil {
		return "", err
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	err = bootstrap.Execute(&b, map[string]any{
		"Version":     o.Agent.Version,
		"SHA256":      o.Agent.SHA256,
		"DownloadURL": strings.TrimRight(cmp.Or(o.AgentDownloadURL, o.Agent.defaultDownloadURL()), "/"),
		"AgentPath":   cmp.Or(o.AgentPath, agent.DefaultAgentPath),
		"ConfigPath":  cmp.Or(o.ConfigPath, agent.DefaultConfig),
		"SystemdDir":  o.SystemdDir,
		"Config":      string(config),
	})
	if err != nil {
		return "", err
	}
	if b.Len() > MaxUserDataBytes {
		return "", fmt.Errorf("pre_runner_script: the user data would be %d bytes, and EC2 takes at most %d (16 KB) before base64: "+
			"keep the script short and fetch what it needs at boot (from S3, say), or bake it into the image", b.Len(), MaxUserDataBytes)
	}
	return b.String(), nil
}

// shellQuote quotes s for bash: in single quotes, each single quote in s
// closing the quotes, escaped, and reopening them.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
