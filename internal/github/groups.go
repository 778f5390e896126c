package github

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// RunnerGroup is one of an organization's self-hosted runner groups, with
// the repositories it lets send jobs to its runners: all the
// organization's, or the selected ones (RunnerGroupRepositories); public
// ones only when it allows them.
type RunnerGroup struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Default bool   `json:"default"` // the group runners join unless told another
	// Visibility is "all" or "selected" (GitHub's older "private": all
	// private repositories).
	Visibility               string `json:"visibility"`
	AllowsPublicRepositories bool   `json:"allows_public_repositories"`
	// InheritedAllowsPublicRepositories: a group an enterprise shares
	// carries the enterprise's setting here.
	InheritedAllowsPublicRepositories bool `json:"inherited_allows_public_repositories"`
}

// VisibilitySelected is the Visibility of a group open to selected
// repositories only.
const VisibilitySelected = "selected"

// AdmitsPublicRepositories tells whether the group lets public
// repositories send jobs to its runners.
func (g RunnerGroup) AdmitsPublicRepositories() bool {
	return g.AllowsPublicRepositories || g.InheritedAllowsPublicRepositories
}

// groupsHint advises on a 4xx answer to the read of runner groups.
func groupsHint(org string, status int) string {
	if status == http.StatusForbidden || status == http.StatusNotFound {
		return fmt.Sprintf(`the credentials cannot read the runner groups of organization %s: a GitHub App or fine-grained token needs the organization permission "Self-hosted runners" (read); a classic token needs the "admin:org" scope`, org)
	}
	return targetHint(Target{Owner: org}, status)
}

// RunnerGroups lists the runner groups of organization org, those an
// enterprise shares with it included.
func (c *Client) RunnerGroups(ctx context.Context, org string) ([]RunnerGroup, error) {
	op := operation{what: "list the runner groups of organization " + org, hint: func(status int) string { return groupsHint(org, status) }}
	if org == "" {
		return nil, fmt.Errorf("%s: the organization is empty", op.what)
	}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.what, err)
	}
	return listAll[RunnerGroup](ctx, c, op, "/orgs/"+url.PathEscape(org)+"/actions/runner-groups", "runner_groups", bearer)
}

// RunnerGroupRepositories lists the full names ("owner/name") of the
// repositories a runner group of org with visibility "selected" admits.
func (c *Client) RunnerGroupRepositories(ctx context.Context, org string, groupID int64) ([]string, error) {
	op := operation{what: fmt.Sprintf("list the repositories of runner group %d of organization %s", groupID, org),
		hint: func(status int) string { return groupsHint(org, status) }}
	if org == "" || groupID <= 0 {
		return nil, fmt.Errorf("%s: not an organization's runner group", op.what)
	}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.what, err)
	}
	repos, err := listAll[struct {
		FullName string `json:"full_name"`
	}](ctx, c, op, "/orgs/"+url.PathEscape(org)+"/actions/runner-groups/"+strconv.FormatInt(groupID, 10)+"/repositories", "repositories", bearer)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(repos))
	for i, r := range repos {
		names[i] = r.FullName
	}
	return names, nil
}

// RepositoryIsPublic tells whether repository t is public. GitHub's
// "internal" repositories (an enterprise's) are not.
func (c *Client) RepositoryIsPublic(ctx context.Context, t Target) (bool, error) {
	op := operation{what: "read repository " + t.String(), hint: func(status int) string { return targetHint(t, status) }}
	if t.Owner == "" || t.Repository == "" {
		return false, fmt.Errorf("%s: not a repository", op.what)
	}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op.what, err)
	}
	body, status, err := c.call(ctx, op, http.MethodGet, "/repos/"+url.PathEscape(t.Owner)+"/"+url.PathEscape(t.Repository), bearer)
	c.forgetRevoked(bearer, err)
	if err != nil {
		return false, err
	}
	var repo struct {
		Private    *bool  `json:"private"`
		Visibility string `json:"visibility"`
	}
	if err := json.Unmarshal(body, &repo); err != nil || repo.Private == nil && repo.Visibility == "" {
		return false, fmt.Errorf("%s: HTTP %d response does not say whether it is public", op.what, status)
	}
	if repo.Visibility != "" {
		return repo.Visibility == "public", nil
	}
	return !*repo.Private, nil
}
