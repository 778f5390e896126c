// Package agentscript renders the agent that runs on every runner instance:
// a bash script for the launch template's user data that speaks the pool
// protocol (heartbeats, self-termination, GitHub registration per run id,
// deregistration on release). The script body is agent.sh; Render puts the
// settings in front of it, shell-quoted.
package agentscript

import (
	"cmp"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

//go:embed agent.sh
var body string

// DefaultRunnerVersion is the actions/runner release installed unless told
// otherwise; the runner updates itself to GitHub's current one.
const DefaultRunnerVersion = "2.329.0"

// Options are the settings of one rendered script. The zero values of the
// intervals and endpoints are the protocol's and AWS's; tests shorten the
// intervals and point the endpoints at an emulator.
type Options struct {
	Pool              string
	Region            string
	GitHubURL         string // web URL of GitHub or GitHub Enterprise Server
	GitHubOwner       string
	GitHubRepository  string // "": the runner registers at organization level
	RunnerVersion     string
	RunnerDownloadURL string // "": GitHub's release of RunnerVersion
	RunnerSHA256      string // "": not checked; else the tarball's SHA-256, hex
	RunnerUser        string
	PreRunnerScript   string
	HeartbeatInterval time.Duration
	// JobsMetadataAccess lets jobs reach the instance metadata service, and
	// with it the instance role's credentials (off: a firewall rule keeps
	// the runner user away from it).
	JobsMetadataAccess bool

	// Set only by tests.
	SelfCheckInterval    time.Duration
	SelfTerminationGrace time.Duration // past the threshold, before the runner stops or terminates itself
	ClaimPollInterval    time.Duration
	ReleasePollInterval  time.Duration
	OrphanTimeout        time.Duration
	TokenWait            time.Duration
	IMDSURL              string
	AWSEndpointURL       string
	RunnerDir            string
	StateDir             string
	AgentPath            string
	SystemdDir           string
}

// Protocol defaults (docs/guides/protocol.md, "The agent's loop").
const (
	DefaultHeartbeatInterval = 5 * time.Second
	defaultSelfCheck         = 15 * time.Second
	defaultClaimPoll         = 250 * time.Millisecond
	defaultReleasePoll       = 10 * time.Second
	selfTerminationGrace     = time.Minute
	// A record must exist within the created state's lifetime.
	defaultOrphanTimeout = 10 * time.Minute
	// How long a runner waits for the token a claim or release leaves it
	// (written before the runner learns the run id: normally there at once).
	defaultTokenWait = time.Minute
)

var (
	versionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	// UserPattern is what useradd accepts on both Amazon Linux and Ubuntu.
	UserPattern = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	// SHA256Pattern is a SHA-256 digest in hex, as sha256sum prints it (or in
	// capitals).
	SHA256Pattern = regexp.MustCompile(`^[0-9A-Fa-f]{64}$`)
)

// Validate reports the first invalid setting, naming it.
func (o Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	// The registration token and the runner travel over these.
	checkURL := func(setting, raw string) {
		if err := github.CheckURL(raw); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", setting, err))
		}
	}
	check(protocol.ValidatePoolName(o.Pool) == nil, "pool: %q is not a pool name (1-40 characters of A-Z a-z 0-9 _ -)", o.Pool)
	check(o.Region != "", "region: required")
	checkURL("github_url", o.GitHubURL)
	check(protocol.GitHubOwnerPattern.MatchString(o.GitHubOwner), "github_owner: %q is not a GitHub user or organization name", o.GitHubOwner)
	check(o.GitHubRepository == "" || protocol.GitHubRepositoryPattern.MatchString(o.GitHubRepository), "github_repository: %q is not a repository name", o.GitHubRepository)
	check(versionPattern.MatchString(o.RunnerVersion), "runner_version: %q is not a version like %s", o.RunnerVersion, DefaultRunnerVersion)
	if o.RunnerDownloadURL != "" {
		checkURL("runner_download_url", o.RunnerDownloadURL)
	}
	check(o.RunnerSHA256 == "" || SHA256Pattern.MatchString(o.RunnerSHA256), "runner_sha256: %q is not a SHA-256 digest (64 hexadecimal digits)", o.RunnerSHA256)
	check(UserPattern.MatchString(o.RunnerUser), "runner_user: %q is not a user name (lower-case letters, digits, _ and -)", o.RunnerUser)
	check(o.HeartbeatInterval >= time.Second && o.HeartbeatInterval <= 10*time.Second, "heartbeat_interval: %s is outside 1s-10s (a claim calls a runner unhealthy after 15s without one)", o.HeartbeatInterval)
	return errors.Join(errs...)
}

// Render returns the user-data script.
func Render(o Options) (string, error) {
	if err := o.Validate(); err != nil {
		return "", err
	}
	target := o.GitHubOwner
	if o.GitHubRepository != "" {
		target += "/" + o.GitHubRepository
	}
	awsURL := func(service string) string {
		return cmp.Or(o.AWSEndpointURL, "https://"+service+"."+o.Region+".amazonaws.com")
	}
	settings := []struct{ name, value string }{
		{"POOL", o.Pool},
		{"REGION", o.Region},
		{"GITHUB_URL", strings.TrimRight(o.GitHubURL, "/")},
		{"GITHUB_TARGET", target},
		{"RUNNER_VERSION", o.RunnerVersion},
		{"RUNNER_DOWNLOAD_URL", o.RunnerDownloadURL},
		{"RUNNER_SHA256", strings.ToLower(o.RunnerSHA256)}, // "": not checked
		{"RUNNER_USER", o.RunnerUser},
		{"RUNNER_DIR", cmp.Or(o.RunnerDir, "/opt/ec2runners/runner")},
		{"STATE_DIR", cmp.Or(o.StateDir, "/var/lib/ec2runners")},
		{"AGENT_PATH", cmp.Or(o.AgentPath, "/usr/local/sbin/ec2runners-agent")},
		{"SYSTEMD_DIR", cmp.Or(o.SystemdDir, "/etc/systemd/system")},
		{"HEARTBEAT_INTERVAL", seconds(o.HeartbeatInterval, DefaultHeartbeatInterval)},
		{"SELF_CHECK_INTERVAL", seconds(o.SelfCheckInterval, defaultSelfCheck)},
		{"CLAIM_POLL_INTERVAL", seconds(o.ClaimPollInterval, defaultClaimPoll)},
		{"RELEASE_POLL_INTERVAL", seconds(o.ReleasePollInterval, defaultReleasePoll)},
		{"SELF_TERMINATION_GRACE", seconds(o.SelfTerminationGrace, selfTerminationGrace)},
		{"ORPHAN_TIMEOUT", seconds(o.OrphanTimeout, defaultOrphanTimeout)},
		{"TOKEN_WAIT", seconds(o.TokenWait, defaultTokenWait)},
		{"JOBS_METADATA_ACCESS", strconv.FormatBool(o.JobsMetadataAccess)},
		{"IMDS_URL", cmp.Or(o.IMDSURL, "http://169.254.169.254")},
		{"DYNAMODB_URL", awsURL("dynamodb")},
		{"EC2_URL", awsURL("ec2")},
		// Base64, so that any script text survives quoting.
		{"PRE_RUNNER_SCRIPT", base64.StdEncoding.EncodeToString([]byte(o.PreRunnerScript))},
	}
	var b strings.Builder
	b.WriteString("#!/bin/bash\n# Rendered by terraform-provider-ec2runners (data source ec2runners_runner_script).\n\n")
	for _, s := range settings {
		fmt.Fprintf(&b, "%s=%s\n", s.name, shellQuote(s.value))
	}
	b.WriteString("\n")
	b.WriteString(body)
	return b.String(), nil
}

// seconds writes d (or fallback when d is 0) as seconds for sleep and
// arithmetic: whole seconds when it is whole, else a decimal fraction.
func seconds(d, fallback time.Duration) string {
	if d == 0 {
		d = fallback
	}
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10)
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// shellQuote quotes s for bash: in single quotes, each single quote in s
// closing the quotes, escaped, and reopening them.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
