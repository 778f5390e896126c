package scripttest

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Runner groups, as the REST API tells of them: an organization's groups
// are its default group (id 1, GroupAccess's zero: all private
// repositories) and those AddRunnerGroup made, each with its visibility
// ("all", or "selected" with the repositories it admits) and whether it
// allows public repositories. A credential without the organization
// permission "Self-hosted runners" (DenyRunnerGroupReads) is answered 403,
// as GitHub answers an App that lacks it.

// DenyRunnerGroupReads makes the runner group endpoints answer 403, as to
// a credential without the organization permission "Self-hosted runners".
func (g *GitHub) DenyRunnerGroupReads(deny bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.denyGroupReads = deny
}

// groupsReadable answers 403 to a credential that may not read runner
// groups, and reports whether it may.
func (g *GitHub) groupsReadable(w http.ResponseWriter, what string) bool {
	g.mu.Lock()
	g.apiCalls = append(g.apiCalls, what)
	deny := g.denyGroupReads
	g.mu.Unlock()
	if deny {
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "Resource not accessible by integration"})
	}
	return !deny
}

// organizationGroups is org's default group and the groups it made; the
// caller holds g.mu.
func (g *GitHub) organizationGroups(org string) []*runnerGroup {
	groups := []*runnerGroup{{id: defaultRunnerGroupID, name: protocol.DefaultRunnerGroup, access: g.groupAccess(org, protocol.DefaultRunnerGroup)}}
	for _, group := range g.groups[org] {
		if !protocol.SameRunnerGroup(group.name, protocol.DefaultRunnerGroup) {
			groups = append(groups, group)
		}
	}
	return groups
}

// listRunnerGroups is GET /orgs/{org}/actions/runner-groups.
func (g *GitHub) listRunnerGroups(w http.ResponseWriter, r *http.Request) {
	org := r.PathValue("org")
	if !g.authorized(w, r) || !g.groupsReadable(w, "runner-groups "+org) {
		return
	}
	g.mu.Lock()
	var list []map[string]any
	for _, group := range g.organizationGroups(org) {
		visibility := "all"
		if len(group.access.SelectedRepositories) > 0 {
			visibility = "selected"
		}
		list = append(list, map[string]any{"id": group.id, "name": group.name, "default": group.id == defaultRunnerGroupID,
			"visibility": visibility, "allows_public_repositories": group.access.AllowPublicRepositories, "inherited": false})
	}
	g.mu.Unlock()
	writePage(w, r, "runner_groups", list)
}

// listRunnerGroupRepositories is GET
// /orgs/{org}/actions/runner-groups/{id}/repositories.
func (g *GitHub) listRunnerGroupRepositories(w http.ResponseWriter, r *http.Request) {
	org := r.PathValue("org")
	if !g.authorized(w, r) || !g.groupsReadable(w, "runner-group-repositories "+org) {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	g.mu.Lock()
	var group *runnerGroup
	for _, each := range g.organizationGroups(org) {
		if each.id == id {
			group = each
		}
	}
	var list []map[string]any
	if group != nil {
		for _, name := range group.access.SelectedRepositories {
			list = append(list, map[string]any{"full_name": name, "private": !g.public[strings.ToLower(name)]})
		}
	}
	g.mu.Unlock()
	if group == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writePage(w, r, "repositories", list)
}

// writePage answers with the page of items that ?per_page= and ?page= ask
// for (30 and 1 by default, at most 100 a page), under field, with their
// total_count, as GitHub's list endpoints do.
func writePage(w http.ResponseWriter, r *http.Request, field string, items []map[string]any) {
	perPage, err := strconv.Atoi(r.FormValue("per_page"))
	if err != nil || perPage < 1 {
		perPage = 30
	}
	perPage = min(perPage, 100)
	page, err := strconv.Atoi(r.FormValue("page"))
	if err != nil || page < 1 {
		page = 1
	}
	start := min((page-1)*perPage, len(items))
	end := min(start+perPage, len(items))
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(items), field: append([]map[string]any{}, items[start:end]...)})
}
