package claim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// RunnerGroupSource reads an organization's runner groups and whom they
// admit (github.Client).
type RunnerGroupSource interface {
	RunnerGroups(ctx context.Context, org string) ([]github.RunnerGroup, error)
	RunnerGroupRepositories(ctx context.Context, org string, groupID int64) ([]string, error)
	RepositoryIsPublic(ctx context.Context, t github.Target) (bool, error)
}

// checkGroupAdmits reports why GitHub would send none of the jobs of the
// claim's repository to its runners, which register in its runner group
// (the organization's default group when it names none): the group
// admits selected repositories without it, or refuses public ones and it
// is public, or there is no such group. Such a claim would succeed and its
// jobs queue until GitHub cancels them. The check is skipped when the
// claim knows no repository, its runners register with a repository (the
// pool's, or the claim's own: a repository's runners have no groups), or
// the credentials
// g cannot read the organization's groups (logged: it needs the
// organization permission "Self-hosted runners", read).
func (c *Claimer) checkGroupAdmits(ctx context.Context, g *GitHubAccess, cfg protocol.PoolConfig, req Request) error {
	if cfg.GitHub == nil || cfg.GitHub.Repository != "" || req.RegisterWithRepository || req.Repository == "" || g == nil || g.Groups == nil {
		return nil
	}
	org := cfg.GitHub.Owner
	owner, name, err := protocol.ParseRepository(req.Repository)
	if err != nil {
		return err
	}
	if !strings.EqualFold(owner, org) {
		return fmt.Errorf("the jobs of repository %s cannot run on the runners of pool %s: they register with organization %s, whose runners take only the jobs of its own repositories", req.Repository, cfg.Name, org)
	}
	skip := func(err error) error {
		c.log("claim: cannot check that the runner group admits the claim's repository; claiming without the check", "run", req.RunID, "repository", req.Repository,
			"runner_group", req.RunnerGroup, "error", err.Error())
		return nil
	}
	groups, err := g.Groups.RunnerGroups(ctx, org)
	if err != nil {
		return skip(err)
	}
	i := slices.IndexFunc(groups, func(gr github.RunnerGroup) bool {
		if req.RunnerGroup == "" {
			return gr.Default
		}
		return protocol.SameRunnerGroup(gr.Name, req.RunnerGroup)
	})
	if i < 0 {
		if req.RunnerGroup == "" {
			return skip(fmt.Errorf("GitHub lists no default runner group of organization %s", org))
		}
		names := make([]string, len(groups))
		for k, gr := range groups {
			names[k] = fmt.Sprintf("%q", gr.Name)
		}
		return fmt.Errorf("runner group %q: organization %s has no such runner group (it has %s), so the claim's runners could not register: create it (organization Settings > Actions > Runner groups), or set runner_group to one of those",
			req.RunnerGroup, org, strings.Join(names, ", "))
	}
	group := groups[i]
	if group.Visibility == github.VisibilitySelected {
		admitted, err := g.Groups.RunnerGroupRepositories(ctx, org, group.ID)
		if err != nil {
			return skip(err)
		}
		if !slices.ContainsFunc(admitted, func(r string) bool { return strings.EqualFold(r, req.Repository) }) {
			return fmt.Errorf("runner group %q of organization %s admits only selected repositories, and %s is not one of them: GitHub would send none of its jobs to the claim's runners. Add %s to the group (organization Settings > Actions > Runner groups > %s > Repository access), or set runner_group to a group that admits it",
				group.Name, org, req.Repository, req.Repository, group.Name)
		}
	}
	if group.AdmitsPublicRepositories() {
		return nil
	}
	public, err := g.Groups.RepositoryIsPublic(ctx, github.Target{Owner: owner, Repository: name})
	if err != nil {
		return skip(err)
	}
	if public {
		return fmt.Errorf("runner group %q of organization %s does not allow public repositories, and %s is public: GitHub would send none of its jobs to the claim's runners. Allow public repositories in the group (organization Settings > Actions > Runner groups > %s), or set runner_group to a group that allows them",
			group.Name, org, req.Repository, group.Name)
	}
	return nil
}
