package protocol

import (
	"strings"
	"testing"
	"time"
)

// TestAccessValidate: a policy that could admit more than it says, or
// that the pool cannot honour, is refused, with a message naming the entry
// and what is allowed.
func TestAccessValidate(t *testing.T) {
	classes := map[string]ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}, "xlarge": {CPU: 4, MemoryMiB: 8192}}
	const poolMaxRuntime = 2 * time.Hour
	entry := func(r RepositoryAccess) Access { return Access{Repositories: []RepositoryAccess{r}} }
	for name, tc := range map[string]struct {
		access Access
		want   string // the error; "" means valid
	}{
		"every cap": {entry(RepositoryAccess{Repository: "octo/app", Workflows: []string{"octo/app/.github/workflows/ci.yml@refs/heads/main", "octo/app/*"},
			MaxRunners: MaxAccessRunners, MaxRuntime: Duration(poolMaxRuntime), ResourceClasses: []string{"large"}}), ""},
		"repository alone":                  {entry(RepositoryAccess{Repository: "octo/app"}), ""},
		"workflow spelt in another case":    {entry(RepositoryAccess{Repository: "octo/app", Workflows: []string{"Octo/App/.github/workflows/*"}}), ""},
		"shortest max runtime":              {entry(RepositoryAccess{Repository: "octo/app", MaxRuntime: Duration(time.Minute)}), ""},
		"two repositories":                  {Access{Repositories: []RepositoryAccess{{Repository: "octo/app"}, {Repository: "octo/app2"}}}, ""},
		"no repository":                     {Access{}, "lists no repository (a pool without a policy has no access at all)"},
		"repository without owner":          {entry(RepositoryAccess{Repository: "app"}), `repositories[0]: repository "app" must be a GitHub repository's full name, owner/name: the owner 1-39 letters, digits or '-', not starting with '-', the name 1-100 letters, digits, '_', '.' or '-'`},
		"repository with a wildcard":        {entry(RepositoryAccess{Repository: "octo/*"}), `repositories[0]: repository "octo/*" must be a GitHub repository's full name`},
		"another repository's workflow":     {entry(RepositoryAccess{Repository: "octo/app", Workflows: []string{"octo/other/.github/workflows/ci.yml@refs/heads/main"}}), `repositories[0]: workflow "octo/other/.github/workflows/ci.yml@refs/heads/main" must start with "octo/app/", its entry's repository and '/', followed by the workflow's path and ref (such as "octo/app/.github/workflows/ci.yml@refs/heads/main" or "octo/app/.github/workflows/*"): a workflow_ref starts with its own repository, so an entry admits no other repository's workflows`},
		"workflow of a longer repository":   {entry(RepositoryAccess{Repository: "octo/app", Workflows: []string{"octo/app-admin/.github/workflows/*"}}), `workflow "octo/app-admin/.github/workflows/*" must start with "octo/app/"`},
		"workflow glob over the repository": {entry(RepositoryAccess{Repository: "octo/app", Workflows: []string{"octo/app*"}}), `workflow "octo/app*" must start with "octo/app/"`},
		"workflow glob over repositories":   {entry(RepositoryAccess{Repository: "octo/app", Workflows: []string{"*"}}), `workflow "*" must start with "octo/app/"`},
		"workflow of the repository alone":  {entry(RepositoryAccess{Repository: "octo/app", Workflows: []string{"octo/app/"}}), `workflow "octo/app/" must start with "octo/app/", its entry's repository and '/', followed by the workflow's path and ref`},
		"workflow with a folded letter":     {entry(RepositoryAccess{Repository: "octo/kit", Workflows: []string{"octo/\u212ait/.github/workflows/*"}}), `must start with "octo/kit/"`},
		"empty workflows":                   {entry(RepositoryAccess{Repository: "octo/app", Workflows: []string{}}), "repositories[0]: workflows and resourceClasses must be left out rather than empty"},
		"empty resource classes":            {entry(RepositoryAccess{Repository: "octo/app", ResourceClasses: []string{}}), "repositories[0]: workflows and resourceClasses must be left out rather than empty"},
		"negative max runners":              {entry(RepositoryAccess{Repository: "octo/app", MaxRunners: -1}), "repositories[0]: max runners -1 must be from 1 to 1000 (0: no cap of its own)"},
		"too many max runners":              {entry(RepositoryAccess{Repository: "octo/app", MaxRunners: MaxAccessRunners + 1}), "max runners 1001 must be from 1 to 1000"},
		"max runtime above the pool's":      {entry(RepositoryAccess{Repository: "octo/app", MaxRuntime: Duration(poolMaxRuntime + time.Second)}), "repositories[0]: max runtime 2h0m1s must be from 1m up to the pool's max runtime, 2h"},
		"max runtime too short":             {entry(RepositoryAccess{Repository: "octo/app", MaxRuntime: Duration(30 * time.Second)}), "max runtime 30s must be from 1m up to the pool's max runtime, 2h"},
		"max runtime negative":              {entry(RepositoryAccess{Repository: "octo/app", MaxRuntime: Duration(-time.Minute)}), "max runtime -1m must be from 1m"},
		"resource class the pool lacks":     {entry(RepositoryAccess{Repository: "octo/app", ResourceClasses: []string{"large", "huge"}}), `repositories[0]: resource class "huge" is not one of the pool's: large, xlarge`},
		"repository twice in another case":  {Access{Repositories: []RepositoryAccess{{Repository: "octo/app"}, {Repository: "octo/docs"}, {Repository: "Octo/App"}}}, `repositories[2]: repository "Octo/App" is also repositories[0] ("octo/app"): GitHub compares names ignoring case, and a repository has one entry`},
		"invalid entry after a valid one":   {Access{Repositories: []RepositoryAccess{{Repository: "octo/app"}, {Repository: "octo/docs", MaxRunners: -5}}}, "repositories[1]: max runners -5"},
		"repository twice, same spelling":   {Access{Repositories: []RepositoryAccess{{Repository: "octo/app"}, {Repository: "octo/app"}}}, `repositories[1]: repository "octo/app" is also repositories[0]`},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.access.Validate(classes, poolMaxRuntime)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAccessMaxRuntimeWithinLongest: a pool's max runtime beyond the
// longest allowed does not widen an entry's range.
func TestAccessMaxRuntimeWithinLongest(t *testing.T) {
	if err := CheckAccessMaxRuntime(LongestMaxRuntime+time.Hour, 2*LongestMaxRuntime); err == nil {
		t.Errorf("max runtime %s accepted, beyond the longest %s", LongestMaxRuntime+time.Hour, LongestMaxRuntime)
	}
}
