package actions

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// stepPermissions is what each action the shipped and example workflows
// use needs of the job's GITHUB_TOKEN permissions. The claim and release
// actions and configure-aws-credentials need an OIDC token (for the role
// and the broker); checking out needs contents: read. The shipped
// actions' own steps (actions/cache, configure-aws-credentials) need
// nothing more.
var stepPermissions = map[string]map[string]string{
	"actions/checkout":                      {"contents": "read"},
	"aws-actions/configure-aws-credentials": {"id-token": "write"},
	".github/actions/claim":                 {"id-token": "write"},
	".github/actions/release":               {"id-token": "write"},
}

// TestWorkflows_permissions: every job of the reusable workflow and of the
// workflows under examples/ and templates/ is granted exactly what its
// steps need (stepPermissions), by its own permissions or its
// workflow's, and no more: a job that checks out nothing gets no
// contents: read. A job that calls the reusable workflow grants what the
// called jobs need together: they get no more than their caller grants.
func TestWorkflows_permissions(t *testing.T) {
	root := repoRoot
	called := readPermissions(t, filepath.Join(root, reusableWorkflow))
	calledNeeds := map[string]string{}
	for _, job := range called.Jobs {
		maps.Copy(calledNeeds, job.needs(t))
	}
	files := []string{filepath.Join(root, reusableWorkflow)}
	for _, dir := range []string{"examples", "templates"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yml") {
				if data, _ := os.ReadFile(path); regexp.MustCompile(`(?m)^jobs:`).Match(data) {
					files = append(files, path)
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range files {
		rel, _ := filepath.Rel(root, path)
		wf := readPermissions(t, path)
		for _, id := range slices.Sorted(maps.Keys(wf.Jobs)) {
			job := wf.Jobs[id]
			granted := job.Permissions
			if granted.Kind == 0 { // none of its own
				granted = wf.Permissions
			}
			got := map[string]string{}
			if granted.Kind != yaml.MappingNode || granted.Decode(&got) != nil {
				t.Errorf("%s: job %s: grant its permissions, or its workflow's, as a map such as {contents: read}", rel, id)
				continue
			}
			want := job.needs(t)
			if shippedUses.MatchString(job.Uses) {
				want = calledNeeds
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s: job %s is granted %v, want exactly what its steps need: %v", rel, id, got, want)
			}
		}
	}
}

type permissionsWorkflow struct {
	Permissions yaml.Node `yaml:"permissions"`
	Jobs        map[string]*permissionsJob
}

type permissionsJob struct {
	Permissions yaml.Node `yaml:"permissions"`
	Uses        string    `yaml:"uses"`
	Steps       []struct {
		Uses string `yaml:"uses"`
	} `yaml:"steps"`
}

func readPermissions(t *testing.T, path string) *permissionsWorkflow {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var wf permissionsWorkflow
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &wf
}

// needs is what the job's steps need together.
func (j *permissionsJob) needs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, st := range j.Steps {
		if st.Uses == "" {
			continue
		}
		action, _, _ := strings.Cut(st.Uses, "@")
		if m := shippedUses.FindStringSubmatch(st.Uses); m != nil {
			action = m[1]
		}
		perms, known := stepPermissions[action]
		if !known {
			t.Fatalf("a step uses %s: add what it needs to stepPermissions", st.Uses)
		}
		maps.Copy(out, perms)
	}
	return out
}
