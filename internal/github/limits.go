package github

import (
	"strings"
	"time"
)

// GitHub's limits and rules this project relies on, with their sources
// (the Service limits guide, templates/guides/service-limits.md.tmpl, lists
// them for users); the stub GitHub of the instance stand-in
// (internal/testworld/scripttest) enforces them, and
// internal/awslimits/README.md says where and with which tests.
// The runner version policy is internal/protocol's (RunnerPolicyAt), and so
// is the rule for the run id a claim's runners take as their only label
// (protocol.ValidateRunID).
const (
	// MaxRunnerNameLength bounds a runner's name: the agent names a runner
	// after its instance id, 19 characters.
	MaxRunnerNameLength = 64
	// TokenLifetime is how long a registration or removal token is valid:
	// "The token expires after one hour" (REST API, self-hosted runners).
	TokenLifetime = time.Hour
	// MaxJobQueueTime: a job for self-hosted runners that no runner starts
	// within 24 hours is terminated and fails to complete (Actions limits).
	MaxJobQueueTime = 24 * time.Hour
	// MaxJobExecutionTime: "Each job in a workflow can run for up to 5
	// days of execution time. If a job reaches this limit, the job is
	// terminated and fails to complete" (usage limits for self-hosted
	// runners).
	MaxJobExecutionTime = 5 * 24 * time.Hour
	// RerunWindow: "You can re-run a workflow or jobs in a workflow for
	// up to 30 days after the initial run" (re-running workflows and
	// jobs).
	RerunWindow = 30 * 24 * time.Hour
	// TokenRateLimit is the primary rate limit of a token's REST requests
	// per hour; a GitHub App installation's is at least as much (up to
	// AppInstallationMaxRateLimit with the organization's repositories and
	// users), a workflow's GITHUB_TOKEN's GitHubTokenRateLimit per
	// repository.
	TokenRateLimit              = 5000
	AppInstallationMaxRateLimit = 12500
	GitHubTokenRateLimit        = 1000
)

// SameLabel tells whether GitHub takes two runner labels for one: it
// compares them case-insensitively.
func SameLabel(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}
