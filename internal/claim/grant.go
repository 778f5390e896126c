package claim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// A claim made through the pool's broker hands its runners a registration
// grant (protocol.RegistrationGrant) where a direct claim hands them a
// registration token: with it, each runner's agent asks the broker for a
// just-in-time registration for every job of the run, so that each job
// starts on a registration no other job used. The claim makes no GitHub
// call for it: the just-in-time registrations are minted by the agents,
// off the claim's path.

// JITRunners makes, reads and deletes a repository's just-in-time runners
// (github.Client).
type JITRunners interface {
	GenerateJITConfig(context.Context, github.Target, github.JITRequest) (github.JITRunner, error)
	RepositoryRunner(context.Context, github.Target, int64) (github.Runner, bool, error)
	DeleteRunner(context.Context, github.Target, int64) error
}

// runnerGrant is a claim's grant, ready to hand to its runners (each gets
// a secret of its own), with GitHub's runner version policy at the time
// (nil: unknown), as a runnerToken carries it.
type runnerGrant struct {
	runID     string
	target    string // the claim's repository, owner/name
	label     string
	expiresAt time.Time
	policy    *protocol.RunnerPolicy
}

// newGrant is the grant of the claim req of the pool of cfg, made through
// the pool's broker for req.Repository: its runners register with that
// repository alone, so that no other repository's jobs reach them; nil
// for a pool whose runners register nowhere (no GitHub target). It fails
// unless the repository is one the pool registers at: its owner's, and
// the pool's repository when it names one.
func (c *Claimer) newGrant(ctx context.Context, cfg protocol.PoolConfig, req Request) (*runnerGrant, error) {
	if cfg.GitHub == nil {
		return nil, nil // a pool without a GitHub target: its runners register nowhere
	}
	owner, name, err := protocol.ParseRepository(req.Repository)
	switch {
	case err != nil:
		return nil, fmt.Errorf("a claim through the pool's broker registers its runners with its repository: %w", err)
	case !strings.EqualFold(owner, cfg.GitHub.Owner) || (cfg.GitHub.Repository != "" && !strings.EqualFold(name, cfg.GitHub.Repository)):
		return nil, fmt.Errorf("pool %s registers its runners with GitHub %s: repository %s is not one it registers runners at", cfg.Name, cfg.GitHub, req.Repository)
	case req.Label == req.RunID || protocol.ValidateLabel(req.RunID, req.Label) != nil:
		return nil, fmt.Errorf("a claim through the pool's broker needs a label with a secret: %q is not one of run %s", req.Label, req.RunID)
	}
	g, err := c.PoolGitHub(ctx, cfg)
	if err != nil {
		c.log("cannot read the runner's releases: runners are neither told of the newest nor checked against GitHub's version policy", "error", err.Error())
	}
	var policy *protocol.RunnerPolicy
	if g != nil {
		policy = c.runnerPolicy(ctx, g.Releases)
	}
	return &runnerGrant{runID: req.RunID, target: req.Repository, label: req.Label, expiresAt: grantExpiry(c.now(), req.maxRuntime(cfg)), policy: policy}, nil
}

// grantExpiry is when the grant of a claim made at now with maxRuntime
// expires: past the end of any run of its. Its runners run for the run for
// maxRuntime at most, but the pool's maintenance holds them while a job of
// the run runs on them, up to GitHub's limit of a job's time after the job
// started, and the next job of the run must still start.
func grantExpiry(now time.Time, maxRuntime time.Duration) time.Time {
	return now.Add(maxRuntime + github.MaxJobExecutionTime).Truncate(time.Second)
}

// handGrant writes g into the agent partition of each of ids, each with a
// secret of its own, before they learn its run, with the runner release
// GitHub's policy asks them to run (protocol.RunnerReleaseItem), in the
// same writes. A nil g hands nothing.
func (s *store) handGrant(ctx context.Context, arnPrefix string, ids []string, g *runnerGrant) error {
	if g == nil || len(ids) == 0 {
		return nil
	}
	now := protocol.FormatTime(s.now())
	var items []map[string]types.AttributeValue
	for _, id := range ids {
		arn := protocol.InstanceARN(arnPrefix, id)
		items = append(items, protocol.RegistrationGrant{
			InstanceARN: arn, Grant: protocol.NewGrantSecret(), ExpiresAt: g.expiresAt,
			RunID: g.runID, Target: g.target, Label: g.label, UpdatedAt: now,
		}.Item())
		if g.policy != nil {
			items = append(items, runnerReleaseItem(arn, *g.policy, now))
		}
	}
	if err := s.putAll(ctx, items); err != nil {
		return fmt.Errorf("handing the registration grant of run %s to its runners: %w", g.runID, err)
	}
	s.log("handed registration grants", "run", g.runID, "target", g.target, "runners", len(ids), "expires_at", protocol.FormatTime(g.expiresAt))
	return nil
}

// handRegistration hands ids what registers them for the attempt's run:
// its registration token, or its grant.
func (a *attempt) handRegistration(ctx context.Context, ids []string) error {
	if err := a.s.handToken(ctx, a.cfg.InstanceARNPrefix, ids, a.regToken); err != nil {
		return err
	}
	return a.s.handGrant(ctx, a.cfg.InstanceARNPrefix, ids, a.grant)
}

// runnerPolicy is GitHub's runner version policy the attempt's token or
// grant was made under (nil: unknown).
func (a *attempt) runnerPolicy() *protocol.RunnerPolicy {
	if a.grant != nil {
		return a.grant.policy
	}
	return a.regToken.runnerPolicy()
}

// RecordFromItem reads the claim record item of a claim of pool. The
// pool's broker reads the record of a grant's run to learn the repository
// and label its runners register with: only claims write claim records,
// while an instance may write anything into its own agent partition.
func RecordFromItem(pool string, item map[string]types.AttributeValue) (Record, error) {
	return recordFromItem(pool, item)
}
