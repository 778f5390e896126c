package actions

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// shippedUses is how the workflows in examples/ and the docs, and the
// reusable workflow, use the actions and the reusable workflow: by this
// repository and a release tag.
var shippedUses = regexp.MustCompile(`ec2runners/terraform-provider-ec2runners/(\.github/(?:actions/[a-z]+|workflows/[a-z0-9-]+\.yml))@\S+`)

// TestActionlint runs actionlint (pinned in tools/go.mod), with shellcheck,
// over every workflow this repository ships: its own (.github/workflows),
// the examples' and the docs' (every *.yml under examples/ and templates/
// with jobs), and the steps of each of its actions (.github/actions/*),
// each laid out as a workflow of its own whose workflow_call inputs are the
// action's. Uses of the shipped actions and reusable workflow point at the
// local copies, so that actionlint checks their inputs against action.yml
// and the reusable workflow's workflow_call inputs.
// ec2runners.sh, the actions' script, must pass shellcheck.
func TestActionlint(t *testing.T) {
	toolPath(t, "shellcheck", "actionlint checks the workflows' run: scripts with it (apt-get install shellcheck)")
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	// actionlint resolves local actions within a project: a Git
	// repository (a .git file will do) with .github/workflows.
	writeFile(t, filepath.Join(work, ".git"), "")
	workflows := filepath.Join(work, ".github", "workflows")
	var files []string
	add := func(name string, data []byte) {
		path := filepath.Join(workflows, name)
		writeFile(t, path, string(data))
		files = append(files, path)
	}

	// The repository's own workflows.
	own, err := filepath.Glob(filepath.Join(root, ".github", "workflows", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range own {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Under its own name: the examples call the reusable workflow by it.
		add(filepath.Base(f), shippedUses.ReplaceAll(data, []byte("./$1")))
	}
	// The examples' and the docs' workflows.
	var shipped int
	for _, dir := range []string{"examples", "templates"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yml") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !regexp.MustCompile(`(?m)^jobs:`).Match(data) {
				return nil
			}
			shipped += len(shippedUses.FindAll(data, -1))
			rel, _ := filepath.Rel(root, path)
			add(strings.ReplaceAll(filepath.ToSlash(rel), "/", "_"), shippedUses.ReplaceAll(data, []byte("./$1")))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if shipped == 0 {
		t.Errorf("no workflow under examples/ or templates/ uses the shipped actions")
	}
	// The actions, and each one's steps as a workflow.
	actions, err := filepath.Glob(filepath.Join(root, ".github", "actions", "*", "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) < 2 {
		t.Fatalf("found actions %v, want claim and release", actions)
	}
	copyDir(t, filepath.Join(root, ".github", "actions"), filepath.Join(work, ".github", "actions"))
	for _, a := range actions {
		name := filepath.Base(filepath.Dir(a))
		add("action-"+name+".yml", actionAsWorkflow(t, a))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "-modfile=" + filepath.Join(root, "tools", "go.mod"), "actionlint", "-no-color"}, files...)...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("actionlint: %v\n%s", err, out.String())
	}
	t.Logf("actionlint checked %d workflows (the repository's, the examples' and docs', and the steps of %d actions)", len(files), len(actions))

	sc := exec.CommandContext(ctx, "shellcheck", filepath.Join(root, ".github", "actions", "lib", "ec2runners.sh"))
	if out, err := sc.CombinedOutput(); err != nil {
		t.Errorf("shellcheck ec2runners.sh: %v\n%s", err, out)
	}
}

// actionAsWorkflow lays a composite action's steps out as a reusable
// workflow whose inputs are the action's, which actionlint checks as any
// workflow: expressions, the inputs and outputs of the actions it uses, and
// its run: scripts with shellcheck.
func actionAsWorkflow(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Name   string         `yaml:"name"`
		Inputs map[string]any `yaml:"inputs"`
		Runs   struct {
			Using string `yaml:"using"`
			Steps []any  `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if meta.Runs.Using != "composite" || len(meta.Runs.Steps) == 0 {
		t.Fatalf("%s: want a composite action with steps", path)
	}
	inputs := map[string]any{}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range meta.Inputs {
			if !yield(k) {
				return
			}
		}
	}) {
		inputs[name] = map[string]any{"type": "string", "required": false}
	}
	wf := map[string]any{
		"name":        meta.Name,
		"on":          map[string]any{"workflow_call": map[string]any{"inputs": inputs}},
		"permissions": map[string]any{"contents": "read", "id-token": "write"},
		"jobs": map[string]any{"action": map[string]any{
			"runs-on": "ubuntu-latest",
			"steps":   meta.Runs.Steps,
		}},
	}
	out, err := yaml.Marshal(wf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		writeFile(t, filepath.Join(dst, rel), string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
