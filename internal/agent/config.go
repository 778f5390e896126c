package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Config is the agent's configuration: the file the user data writes
// (ec2runners_runner_script renders it) and the agent reads at every start.
type Config struct {
	Pool   string `json:"pool"`
	Region string `json:"region"`
	// GitHubURL is the web URL of GitHub or a GitHub Enterprise Server, and
	// GitHubTarget where runners register there: "owner/repository", or
	// "owner" for organization runners. The user data always names one;
	// only the simulations of pools without a GitHub target leave it empty,
	// and their agents then register with no token (pools without a target
	// get none).
	GitHubURL    string       `json:"githubUrl"`
	GitHubTarget string       `json:"githubTarget"`
	RunnerUser   string       `json:"runnerUser"`
	Runner       RunnerSource `json:"runner"`
	// PreRunnerScript runs once per instance, as root, before the instance
	// serves (with its #! interpreter, else bash).
	PreRunnerScript string `json:"preRunnerScript,omitempty"`
	// JobsMetadataAccess lets jobs reach the instance metadata service (and
	// with it the instance role): off, a firewall rule keeps them away.
	JobsMetadataAccess bool `json:"jobsMetadataAccess,omitempty"`
	// BrokerFunction is the Lambda function (name or ARN) of the pool's
	// broker, which the agent asks for a just-in-time registration for
	// each job of a run claimed through the broker; "": the pool has none,
	// and its runs register as direct claims' do. The pool's admin renders
	// it into the user data: no workflow chooses the function an agent
	// presents its grant to.
	BrokerFunction string `json:"brokerFunction,omitempty"`

	Intervals Intervals `json:"intervals"`
	// Paths and Endpoints default to an EC2 instance's; tests move them.
	Paths     Paths     `json:"paths"`
	Endpoints Endpoints `json:"endpoints"`
}

// RunnerSource says which GitHub Actions runner the agent installs.
type RunnerSource struct {
	// Version pins a release; "" installs the newest, and keeps idle
	// runners on it.
	Version string `json:"version,omitempty"`
	// DownloadURL is the archive of the pinned Version (a mirror); ""
	// downloads GitHub's.
	DownloadURL string `json:"downloadUrl,omitempty"`
	// SHA256 is the pinned archive's digest; "" takes the one GitHub
	// publishes for the release.
	SHA256 string `json:"sha256,omitempty"`
	// ReleasesURL is GitHub's API of the newest runner release, asked only
	// when the pool told the agent of none; DownloadBase is where the
	// release archives are, v<version>/actions-runner-<platform>-<version>.tar.gz
	// below it. Tests point both at a stub GitHub.
	ReleasesURL  string `json:"releasesUrl,omitempty"`
	DownloadBase string `json:"downloadBase,omitempty"`
}

// Defaults of RunnerSource.
const (
	DefaultRunnerReleasesURL  = "https://api.github.com/repos/actions/runner/releases/latest"
	DefaultRunnerDownloadBase = "https://github.com/actions/runner/releases/download"
)

// Pinned tells whether the runner's version is fixed.
func (s RunnerSource) Pinned() bool { return s.Version != "" }

// ArchiveURL is where the archive of version for platform is.
func (s RunnerSource) ArchiveURL(version, platform string) string {
	if s.DownloadURL != "" && version == s.Version {
		return s.DownloadURL
	}
	base := strings.TrimRight(cmp.Or(s.DownloadBase, DefaultRunnerDownloadBase), "/")
	return fmt.Sprintf("%s/v%s/actions-runner-%s-%s.tar.gz", base, version, platform, version)
}

// Intervals are the protocol's timings; zero values take the defaults.
type Intervals struct {
	Heartbeat protocol.Duration `json:"heartbeat,omitempty"`
	// SelfCheck: how often the agent reads its record for its deadlines.
	SelfCheck protocol.Duration `json:"selfCheck,omitempty"`
	// ClaimPoll and ReleasePoll: how often it reads its record while idle,
	// and while it serves a run.
	ClaimPoll   protocol.Duration `json:"claimPoll,omitempty"`
	ReleasePoll protocol.Duration `json:"releasePoll,omitempty"`
	// SelfTerminationGrace: how long past its record's threshold it lets
	// its instance run before it stops or terminates it.
	SelfTerminationGrace protocol.Duration `json:"selfTerminationGrace,omitempty"`
	// OrphanTimeout: how long after boot it waits for a record (a claim
	// that crashed after launching it) or for its preparation.
	OrphanTimeout protocol.Duration `json:"orphanTimeout,omitempty"`
	// TokenWait: how long it waits for the token of a run.
	TokenWait protocol.Duration `json:"tokenWait,omitempty"`
	// RunnerCheck: how often an idle agent reads which runner release the
	// pool told it of, to update to it, and how often at most a runner that
	// keeps stopping during a run is started again.
	RunnerCheck protocol.Duration `json:"runnerCheck,omitempty"`
}

// Protocol defaults (docs/guides/protocol.md, "The agent").
const (
	DefaultHeartbeatInterval    = 5 * time.Second
	DefaultSelfCheckInterval    = 15 * time.Second
	DefaultClaimPollInterval    = 250 * time.Millisecond
	DefaultReleasePollInterval  = 10 * time.Second
	DefaultSelfTerminationGrace = time.Minute
	// A record must exist within the created state's lifetime.
	DefaultOrphanTimeout = 10 * time.Minute
	// The claim or release writes the token before the runner learns the
	// run id: it is normally there at once.
	DefaultTokenWait         = time.Minute
	DefaultRunnerCheck       = time.Minute
	MinimumHeartbeatInterval = time.Second
	MaximumHeartbeatInterval = 10 * time.Second
)

// Paths are where the agent keeps its files.
type Paths struct {
	StateDir  string `json:"stateDir,omitempty"`  // root's: state, registration copies, manifests
	RunnerDir string `json:"runnerDir,omitempty"` // the runner installations, one directory per version
}

// Default paths on an instance.
const (
	DefaultStateDir  = "/var/lib/ec2runners"
	DefaultRunnerDir = "/opt/ec2runners/runner"
	DefaultAgentPath = "/usr/local/sbin/ec2runners-agent"
	DefaultConfig    = "/etc/ec2runners/agent.json"
)

// Endpoints are the services the agent talks to; "" is AWS's and EC2's.
type Endpoints struct {
	AWS    string `json:"aws,omitempty"`    // one URL for DynamoDB and EC2 (an emulator)
	IMDS   string `json:"imds,omitempty"`   // the instance metadata service
	Lambda string `json:"lambda,omitempty"` // Lambda, where the pool's broker runs
}

// WithDefaults fills in every unset interval and path.
func (c Config) WithDefaults() Config {
	def := func(d *protocol.Duration, v time.Duration) {
		if *d <= 0 {
			*d = protocol.Duration(v)
		}
	}
	i := &c.Intervals
	def(&i.Heartbeat, DefaultHeartbeatInterval)
	def(&i.SelfCheck, DefaultSelfCheckInterval)
	def(&i.ClaimPoll, DefaultClaimPollInterval)
	def(&i.ReleasePoll, DefaultReleasePollInterval)
	def(&i.SelfTerminationGrace, DefaultSelfTerminationGrace)
	def(&i.OrphanTimeout, DefaultOrphanTimeout)
	def(&i.TokenWait, DefaultTokenWait)
	def(&i.RunnerCheck, DefaultRunnerCheck)
	c.Paths.StateDir = cmp.Or(c.Paths.StateDir, DefaultStateDir)
	c.Paths.RunnerDir = cmp.Or(c.Paths.RunnerDir, DefaultRunnerDir)
	c.Runner.ReleasesURL = cmp.Or(c.Runner.ReleasesURL, DefaultRunnerReleasesURL)
	c.Runner.DownloadBase = cmp.Or(c.Runner.DownloadBase, DefaultRunnerDownloadBase)
	return c
}

var (
	// UserPattern is what useradd accepts on both Amazon Linux and Ubuntu.
	UserPattern = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	// SHA256Pattern is a SHA-256 digest in hex (either case).
	SHA256Pattern = regexp.MustCompile(`^[0-9A-Fa-f]{64}$`)
	// BrokerFunctionPattern is a Lambda function's name, or its ARN (with
	// a version or alias, or without), as Lambda's Invoke takes them.
	BrokerFunctionPattern = regexp.MustCompile(`^([A-Za-z0-9_-]{1,64}|arn:aws(-[a-z]+)*:lambda:[a-z]{2}(-[a-z]+)+-[0-9]+:[0-9]{12}:function:[A-Za-z0-9_-]{1,64}(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?)$`)
)

// Validate reports every invalid setting, each naming it.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(protocol.ValidatePoolName(c.Pool) == nil, "pool: %q is not a pool name (1-%d characters of A-Z a-z 0-9 _ -)", c.Pool, protocol.MaxPoolNameLength)
	check(protocol.RegionPattern.MatchString(c.Region), "region: %q is not a region name", c.Region)
	check(strings.HasPrefix(c.GitHubURL, "https://") || strings.HasPrefix(c.GitHubURL, "http://"), "github_url: %q is not a URL", c.GitHubURL)
	if c.GitHubTarget != "" {
		owner, repo, hasRepo := strings.Cut(c.GitHubTarget, "/")
		check(protocol.GitHubOwnerPattern.MatchString(owner) && (!hasRepo || protocol.GitHubRepositoryPattern.MatchString(repo)),
			"github target: %q is not an owner or owner/repository", c.GitHubTarget)
	}
	check(UserPattern.MatchString(c.RunnerUser), "runner_user: %q is not a user name (lower-case letters, digits, _ and -)", c.RunnerUser)
	check(c.BrokerFunction == "" || BrokerFunctionPattern.MatchString(c.BrokerFunction),
		"broker_function: %q is not a Lambda function's name (1-64 characters of A-Z a-z 0-9 _ -) or ARN", c.BrokerFunction)
	if c.Runner.Version != "" {
		check(protocol.ValidateRunnerVersion(c.Runner.Version) == nil, "runner_version: %q is not a release version such as %s", c.Runner.Version, protocol.MinimumRunnerVersion)
	}
	check(c.Runner.DownloadURL == "" || c.Runner.Pinned(), "runner_download_url: needs runner_version, the version of the archive it names")
	check(c.Runner.SHA256 == "" || SHA256Pattern.MatchString(c.Runner.SHA256), "runner_sha256: %q is not a SHA-256 digest (64 hexadecimal digits)", c.Runner.SHA256)
	check(c.Runner.SHA256 == "" || c.Runner.Pinned(), "runner_sha256: needs runner_version, the version of the archive it is the digest of")
	hb := time.Duration(c.WithDefaults().Intervals.Heartbeat)
	check(hb >= MinimumHeartbeatInterval && hb <= MaximumHeartbeatInterval, "heartbeat_interval: %s is outside %s-%s (a claim calls a runner unhealthy after 15s without one)",
		protocol.FormatDuration(hb), protocol.FormatDuration(MinimumHeartbeatInterval), protocol.FormatDuration(MaximumHeartbeatInterval))
	return errors.Join(errs...)
}

// ParseConfig reads and validates a configuration file's content.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("agent configuration: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("agent configuration: %w", err)
	}
	return c.WithDefaults(), nil
}
