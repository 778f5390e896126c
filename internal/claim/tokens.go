package claim

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// TokenSource issues the GitHub tokens agents register and deregister with.
type TokenSource interface {
	RegistrationToken(context.Context, github.Target) (github.Token, error)
	RemoveToken(context.Context, github.Target) (github.Token, error)
}

// ReleaseSource lists the releases of the GitHub Actions runner.
type ReleaseSource interface {
	RunnerReleases(context.Context) ([]protocol.RunnerRelease, error)
}

// RunSource tells whether a GitHub Actions workflow run attempt ended
// (github.Client.RunAttemptEnded), lists its jobs
// (github.Client.RunAttemptJobs), and lists the runs of a repository that
// can have a job waiting for a runner (github.Client.ActiveRuns).
type RunSource interface {
	RunAttemptEnded(context.Context, github.RunAttempt) (bool, error)
	RunAttemptJobs(context.Context, github.RunAttempt) ([]github.Job, error)
	ActiveRuns(context.Context, github.Target) ([]github.Run, error)
}

// GitHubAccess is what the provider's github block (or a pool's stored
// credential) allows: tokens from
// Tokens, only for targets of Owner (and of Repository, when set). The
// pool config item names the target, and anyone who may write the table
// could change it: minting only for the configured owner keeps a changed
// item from sending runners, with valid tokens, to someone else's account.
type GitHubAccess struct {
	Tokens TokenSource
	// Releases tells the runner's releases, for GitHub's runner version
	// policy: runners are told the newest (to update to while idle), and a
	// claim hands out none that GitHub would send no job to. nil: runners
	// are told nothing (their agents ask GitHub), and not checked.
	Releases ReleaseSource
	// Runs tells whether the workflow runs of the claims ended, and which
	// of their jobs run where, for the pool's maintenance to release
	// claims their runs did not release, to hold the runners of those
	// whose jobs still run past their deadline, and to revive released
	// claims whose label a re-run's job waits for (nil: it does none).
	Runs RunSource
	// Groups reads the organization's runner groups, for a claim to check
	// that its runner group admits its repository (nil: it does not).
	Groups RunnerGroupSource
	// JIT makes, reads and deletes repositories' just-in-time runners, for
	// the registrations the pool's broker mints its agents (nil: none).
	JIT        JITRunners
	Owner      string // "": not configured, no token is minted
	Repository string // "": any repository of Owner, and its organization runners
	// From names a pool's stored credential the access comes from, for
	// errors ("": the provider's github block).
	From string
}

// Serves tells whether t is Owner's, and Repository when that is set, as
// GitHub compares names: ignoring case.
func (g *GitHubAccess) Serves(t github.Target) bool {
	return strings.EqualFold(t.Owner, g.Owner) && (g.Repository == "" || strings.EqualFold(t.Repository, g.Repository))
}

// tokenKind is one of the two tokens a runner gets: what it is for, its
// sort key in the agent partition, and the GitHub call that mints it.
type tokenKind struct {
	purpose string
	sortKey string
	mint    func(TokenSource, context.Context, github.Target) (github.Token, error)
}

var (
	registrationToken = tokenKind{"registration", protocol.SortKeyRegistrationToken, TokenSource.RegistrationToken}
	removalToken      = tokenKind{"removal", protocol.SortKeyRemovalToken, TokenSource.RemoveToken}
)

// runnerToken is a token minted for one run, ready to hand to its runners,
// with the runner version policy of GitHub at the time (nil: unknown). A
// registration token also tells the runners the claim's label and runner
// group: their agent partitions are the one place no other runner reads.
type runnerToken struct {
	kind        tokenKind
	token       github.Token
	runID       string
	target      string
	label       string // registration: the claim's label
	runnerGroup string // registration: the claim's runner group ("": the default)
	policy      *protocol.RunnerPolicy
}

// PoolGitHub is what mints tokens for the runners of cfg: the provider's
// own credentials, else the pool's stored one; nil when neither is there.
func (c *Claimer) PoolGitHub(ctx context.Context, cfg protocol.PoolConfig) (*GitHubAccess, error) {
	if c.GitHub != nil || cfg.GitHubCredential == nil || c.StoredGitHub == nil {
		return c.GitHub, nil
	}
	return c.StoredGitHub.Access(ctx, *cfg.GitHubCredential)
}

// runnerTarget is where the runners of r register with GitHub: the pool's
// GitHub target, or, for a claim that registers with its repository
// (RegisterWithRepository), that repository, which must be the pool's
// GitHub owner's. nil: nowhere (a pool without a GitHub target).
func (r Request) runnerTarget(cfg protocol.PoolConfig) (*protocol.GitHubTarget, error) {
	if !r.RegisterWithRepository || cfg.GitHub == nil {
		return cfg.GitHub, nil
	}
	owner, name, err := protocol.ParseRepository(r.Repository)
	if err != nil {
		return nil, fmt.Errorf("the runners of run %s register with the claim's repository: %w", r.RunID, err)
	}
	if !strings.EqualFold(owner, cfg.GitHub.Owner) {
		return nil, fmt.Errorf("the runners of run %s cannot register with repository %s: pool %s registers its runners with GitHub owner %s, and with no repository of another owner",
			r.RunID, r.Repository, cfg.Name, cfg.GitHub.Owner)
	}
	return &protocol.GitHubTarget{Owner: cfg.GitHub.Owner, Repository: name}, nil
}

// mintToken mints the token of kind for the runners of cfg serving runID,
// which register with target: nil without error for no target (the
// runners get no token), an error naming the provider's github block when
// there are no credentials, or when they are not for target.
func (c *Claimer) mintToken(ctx context.Context, cfg protocol.PoolConfig, target *protocol.GitHubTarget, kind tokenKind, runID string) (*runnerToken, error) {
	if target == nil {
		return nil, nil
	}
	g, err := c.PoolGitHub(ctx, cfg)
	switch {
	case err != nil:
		return nil, fmt.Errorf("pool %s registers its runners with GitHub %s, and no %s token can be minted for them: %w", cfg.Name, target, kind.purpose, err)
	case g == nil:
		return nil, fmt.Errorf("pool %s registers its runners with GitHub %s, and the provider has no GitHub credentials to mint their %s token: configure the provider's github block (token, or app_id, installation_id and private_key; and owner), or the pool's github_credential",
			cfg.Name, target, kind.purpose)
	case g.Owner == "":
		return nil, fmt.Errorf("pool %s registers its runners with GitHub %s, but the provider's github.owner is not set (nor GITHUB_REPOSITORY_OWNER): set github.owner = %q to let it mint their %s token",
			cfg.Name, target, target.Owner, kind.purpose)
	case !g.Serves(github.Target{Owner: target.Owner, Repository: target.Repository}):
		allowed := "any repository of the owner"
		if g.Repository != "" {
			allowed = fmt.Sprintf("%q", g.Repository)
		}
		scope := fmt.Sprintf("the provider's github block mints tokens only for github.owner = %q and github.repository = %s", g.Owner, allowed)
		if g.From != "" {
			scope = fmt.Sprintf("%s mints tokens only for its owner %q and repository %s", g.From, g.Owner, allowed)
		}
		return nil, fmt.Errorf("pool %s registers its runners with GitHub %s, but %s: no %s token is minted for another target", cfg.Name, target, scope, kind.purpose)
	}
	// The releases are read while the token is minted: no wait of their own.
	policy := make(chan *protocol.RunnerPolicy, 1)
	go func() { policy <- c.runnerPolicy(ctx, g.Releases) }()
	tok, err := kind.mint(g.Tokens, ctx, github.Target{Owner: target.Owner, Repository: target.Repository})
	p := <-policy
	if err != nil {
		return nil, fmt.Errorf("cannot get a runner %s token for %s: %w", kind.purpose, target, err)
	}
	return &runnerToken{kind: kind, token: tok, runID: runID, target: target.String(), policy: p}, nil
}

// runnerPolicy is GitHub's runner version policy now, from its releases;
// nil when they cannot be read (a claim then neither tells its runners of
// a release nor checks their version: it does not fail for it).
func (c *Claimer) runnerPolicy(ctx context.Context, releases ReleaseSource) *protocol.RunnerPolicy {
	if releases == nil {
		return nil
	}
	list, err := releases.RunnerReleases(ctx)
	if err != nil {
		c.log("cannot read the runner's releases: runners are neither told of the newest nor checked against GitHub's version policy", "error", err.Error())
		return nil
	}
	p, ok := protocol.RunnerPolicyAt(list, c.now())
	if !ok {
		return nil
	}
	return &p
}

// handToken writes t into the agent partition of each of ids, before they
// learn (registration) or leave (removal) its run, with the runner release
// GitHub's policy asks them to run (protocol.RunnerReleaseItem), in the same
// writes. A nil t hands nothing.
func (s *store) handToken(ctx context.Context, arnPrefix string, ids []string, t *runnerToken) error {
	if t == nil || len(ids) == 0 {
		return nil
	}
	now := protocol.FormatTime(s.now())
	var items []map[string]types.AttributeValue
	for _, id := range ids {
		arn := protocol.InstanceARN(arnPrefix, id)
		items = append(items, protocol.RunnerToken{
			InstanceARN: arn, SortKey: t.kind.sortKey, Token: t.token.Value,
			ExpiresAt: t.token.ExpiresAt, RunID: t.runID, Target: t.target,
			Label: t.label, RunnerGroup: t.runnerGroup, UpdatedAt: now,
		}.Item())
		if t.policy != nil {
			items = append(items, runnerReleaseItem(arn, *t.policy, now))
		}
	}
	if err := s.putAll(ctx, items); err != nil {
		return fmt.Errorf("handing the %s token of run %s to its runners: %w", t.kind.purpose, t.runID, err)
	}
	s.log("handed GitHub runner tokens", "token", t.kind.purpose, "run", t.runID, "target", t.target, "runner_group", t.runnerGroup,
		"runners", len(ids), "expires_at", protocol.FormatTime(t.token.ExpiresAt))
	return nil
}

// runnerPolicy is the policy the token was minted under; nil for no token.
func (t *runnerToken) runnerPolicy() *protocol.RunnerPolicy {
	if t == nil {
		return nil
	}
	return t.policy
}

// runnerReleaseItem tells the agent of arn the release to run under policy.
func runnerReleaseItem(arn string, policy protocol.RunnerPolicy, now string) map[string]types.AttributeValue {
	return protocol.RunnerReleaseItem{InstanceARN: arn, Release: policy.Newest, Minimum: policy.Minimum, UpdatedAt: now}.Item()
}

// tellRunnerRelease tells runners a fill launched, which get no token, the
// runner release to install, when the provider can read GitHub's releases:
// otherwise their agents ask GitHub. A failure only costs them that.
func (c *Claimer) tellRunnerRelease(ctx context.Context, s *store, cfg protocol.PoolConfig, ids []string) {
	if len(ids) == 0 {
		return
	}
	g, err := c.PoolGitHub(ctx, cfg)
	if err != nil {
		c.log("cannot tell the launched runners the runner release to install (their agents ask GitHub)", "error", err.Error())
	}
	if g == nil {
		return
	}
	policy := c.runnerPolicy(ctx, g.Releases)
	if policy == nil {
		return
	}
	now := protocol.FormatTime(s.now())
	items := make([]map[string]types.AttributeValue, len(ids))
	for i, id := range ids {
		items[i] = runnerReleaseItem(protocol.InstanceARN(cfg.InstanceARNPrefix, id), *policy, now)
	}
	if err := s.putAll(ctx, items); err != nil {
		c.log("cannot tell the launched runners the runner release to install (their agents ask GitHub)", "error", err.Error())
	}
}

// CheckRunnerGroup reports why a claim of the pool of cfg cannot ask for
// runner group, or nil: runner groups are an organization's, and only the
// runners of a pool whose GitHub target is an organization join one.
func CheckRunnerGroup(cfg protocol.PoolConfig, group string) error {
	switch {
	case group == "":
		return nil
	case cfg.GitHub == nil:
		return fmt.Errorf("runner group %q: pool %s registers its runners with no GitHub owner (its github_owner is not set), so they join no runner group", group, cfg.Name)
	case cfg.GitHub.Repository != "":
		return fmt.Errorf("runner group %q: pool %s registers its runners with the repository %s, and only organization runners join runner groups (a pool with github_repository = null registers them with the organization)",
			group, cfg.Name, cfg.GitHub)
	}
	return nil
}
