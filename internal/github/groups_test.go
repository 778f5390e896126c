package github

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The organization's runner groups, with their access settings, and the
// repositories of a group open to selected ones, as GitHub lists them.
func TestRunnerGroupsAndTheirRepositories(t *testing.T) {
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/orgs/octo/actions/runner-groups":
			reply(w, http.StatusOK, map[string]any{"total_count": 2, "runner_groups": []map[string]any{
				{"id": 1, "name": "Default", "default": true, "visibility": "all", "allows_public_repositories": false},
				{"id": 2, "name": "Trusted builds", "default": false, "visibility": "selected", "allows_public_repositories": false, "inherited": true, "inherited_allows_public_repositories": true},
			}})
		case "/orgs/octo/actions/runner-groups/2/repositories":
			reply(w, http.StatusOK, map[string]any{"total_count": 1, "repositories": []map[string]any{{"id": 9, "full_name": "octo/app", "private": true}}})
		default:
			reply(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		}
	})
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	groups, err := c.RunnerGroups(context.Background(), "octo")
	if err != nil {
		t.Fatal(err)
	}
	want := []RunnerGroup{
		{ID: 1, Name: "Default", Default: true, Visibility: "all"},
		{ID: 2, Name: "Trusted builds", Visibility: VisibilitySelected, InheritedAllowsPublicRepositories: true},
	}
	if !slices.Equal(groups, want) {
		t.Errorf("groups %+v, want %+v", groups, want)
	}
	if groups[0].AdmitsPublicRepositories() || !groups[1].AdmitsPublicRepositories() {
		t.Errorf("public repositories: %v, %v; want false, true (the enterprise's setting)", groups[0].AdmitsPublicRepositories(), groups[1].AdmitsPublicRepositories())
	}
	repos, err := c.RunnerGroupRepositories(context.Background(), "octo", 2)
	if err != nil || !slices.Equal(repos, []string{"octo/app"}) {
		t.Errorf("repositories %q (%v), want [octo/app]", repos, err)
	}
	assertHeaders(t, s.requests()[0].header, "Bearer "+pat)
}

// A credential without the permission to read runner groups is told which
// one it needs; GitHub answers 403 or, to some tokens, 404.
func TestRunnerGroupsForbidden(t *testing.T) {
	for _, status := range []int{http.StatusForbidden, http.StatusNotFound} {
		s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
			reply(w, status, map[string]string{"message": "Resource not accessible by integration"})
		})
		c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
		_, err := c.RunnerGroups(context.Background(), "octo")
		if err == nil || !strings.Contains(err.Error(), `organization permission "Self-hosted runners" (read)`) || Temporary(err) {
			t.Errorf("HTTP %d: error %v, want the permission named, not temporary", status, err)
		}
	}
}

// A repository is public when GitHub says so; an enterprise's internal
// repository is not.
func TestRepositoryIsPublic(t *testing.T) {
	for _, tc := range []struct {
		answer map[string]any
		public bool
	}{
		{map[string]any{"private": false, "visibility": "public"}, true},
		{map[string]any{"private": true, "visibility": "private"}, false},
		{map[string]any{"private": true, "visibility": "internal"}, false},
		{map[string]any{"private": false}, true},
	} {
		s := newStub(t, func(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusOK, tc.answer) })
		c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
		public, err := c.RepositoryIsPublic(context.Background(), Target{"octo", "app"})
		if err != nil || public != tc.public {
			t.Errorf("%v: public %v (%v), want %v", tc.answer, public, err, tc.public)
		}
		if reqs := s.requests(); reqs[0].path != "/repos/octo/app" {
			t.Errorf("GET %s", reqs[0].path)
		}
	}
}
