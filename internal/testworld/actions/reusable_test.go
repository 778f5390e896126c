package actions

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/providermirror"
)

const reusableWorkflow = ".github/workflows/ec2runners.yml"

// TestReusableWorkflow_pinsTheActionsOfItsRelease: a reusable workflow's
// uses: cannot be an expression, so the workflow names the actions' tag
// itself. It must be the release .github/actions/lib/provider-version
// names, which make release checks is the tag's: a workflow pinned to a
// release uses that release's actions.
func TestReusableWorkflow_pinsTheActionsOfItsRelease(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, reusableWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	want := "@v" + providermirror.Version(t)
	uses := regexp.MustCompile(`uses: (ec2runners/terraform-provider-ec2runners/\S+)`).FindAllStringSubmatch(string(data), -1)
	if len(uses) < 2 {
		t.Fatalf("%s uses %v, want the claim and release actions", reusableWorkflow, uses)
	}
	for _, u := range uses {
		if !strings.HasSuffix(u[1], want) {
			t.Errorf("%s uses %s, want it at %s (the release provider-version names)", reusableWorkflow, u[1], want)
		}
	}
}

// TestReusableWorkflow_checksTheJobs runs the claim job's first step, which
// checks the caller's jobs before anything is claimed: each job needs a
// name of its own, a run script and a timeout-minutes within max-runtime.
func TestReusableWorkflow_checksTheJobs(t *testing.T) {
	toolPath(t, "jq", "the reusable workflow checks its jobs input with it, as GitHub's hosted runners have it")
	wf := loadWorkflow(t, filepath.Join(repoRoot, reusableWorkflow))
	var check *wfStep
	for i, st := range wf.Jobs["claim"].Steps {
		if st.ID == "jobs" {
			check = &wf.Jobs["claim"].Steps[i]
		}
	}
	if check == nil {
		t.Fatalf("%s: the claim job has no step with id jobs", reusableWorkflow)
	}
	const two = `[{"name": "build", "run": "make build", "timeout-minutes": 30}, {"name": "test", "run": "make test", "timeout-minutes": 45}]`
	for _, c := range []struct {
		what, jobs, maxRuntime, instanceCount string
		want                                  string // the step's output, or the error it fails with
	}{
		{"one runner per job", two, "1h", "", "instance-count=2\n"},
		{"the instance count given", two, "1h30m", "1", "instance-count=1\n"},
		{"a timeout beyond max-runtime", two, "30m", "", "job test: timeout-minutes must be from 1 to max-runtime (30 minutes), got 45"},
		{"no timeout", `[{"name": "build", "run": "make"}]`, "1h", "", "job build: timeout-minutes must be from 1 to max-runtime (60 minutes), got null"},
		{"a max-runtime in days", two, "2d", "", "max-runtime 2d is not hours and minutes"},
		{"two jobs of one name", `[{"name": "a", "run": "x", "timeout-minutes": 5}, {"name": "a", "run": "y", "timeout-minutes": 5}]`, "1h", "", "the jobs need names of their own"},
		{"no run script", `[{"name": "a", "timeout-minutes": 5}]`, "1h", "", "job a needs a run script"},
		{"no jobs", `[]`, "1h", "", "jobs must be a JSON list of jobs"},
		{"not JSON", `build`, "1h", "", "invalid JSON"},
	} {
		t.Run(c.what, func(t *testing.T) {
			output := filepath.Join(t.TempDir(), "output")
			writeFile(t, output, "")
			cmd := exec.Command("bash", "-e", "-c", check.Run)
			cmd.Env = append(os.Environ(), "GITHUB_OUTPUT="+output)
			// The step's env, as the workflow passes the inputs to it.
			inputs := &exprEnv{contexts: map[string]any{"inputs": map[string]any{"jobs": c.jobs, "max-runtime": c.maxRuntime, "instance-count": c.instanceCount}}}
			for name, value := range check.Env {
				v, err := evalTemplate(value, inputs)
				if err != nil {
					t.Fatalf("env %s: %v", name, err)
				}
				cmd.Env = append(cmd.Env, name+"="+toString(v))
			}
			log, err := cmd.CombinedOutput()
			got, _ := os.ReadFile(output)
			if strings.HasPrefix(c.want, "instance-count=") {
				if err != nil || string(got) != c.want {
					t.Errorf("output %q (%v: %s), want %q", got, err, log, c.want)
				}
				return
			}
			if err == nil || !strings.Contains(string(log), c.want) || len(got) > 0 {
				t.Errorf("got %v, %q, output %q; want it to fail with %q and output nothing", err, log, got, c.want)
			}
		})
	}
}

// TestReusableWorkflow_passesItsInputsToTheActions: each input the
// reusable workflow shares with the claim or release action reaches it,
// from the input itself or a step computed from it. A caller's env never
// reaches a called workflow, so what the workflow does not pass on (the
// broker, say) the actions never see.
func TestReusableWorkflow_passesItsInputsToTheActions(t *testing.T) {
	wf := readWorkflow(t, filepath.Join(repoRoot, reusableWorkflow))
	inputs := wf.On.WorkflowCall.Inputs
	if _, ok := inputs["broker-function"]; !ok {
		t.Errorf("%s has no broker-function input", reusableWorkflow)
	}
	used := 0
	for _, id := range []string{"claim", "release"} {
		for _, st := range wf.Jobs[id].Steps {
			m := shippedUses.FindStringSubmatch(st.Uses)
			if m == nil || !strings.HasPrefix(m[1], ".github/actions/") {
				continue
			}
			used++
			action := strings.TrimPrefix(m[1], ".github/actions/")
			for name := range actionInputs(t, action) {
				if _, shared := inputs[name]; !shared {
					continue
				}
				if v := st.With[name]; !strings.Contains(v, "inputs."+name) && !strings.Contains(v, "steps.") {
					t.Errorf("job %s: the %s action's %s is %q, want the workflow's input %s", id, action, name, v, name)
				}
			}
		}
	}
	if used != 2 {
		t.Errorf("%s: found %d uses of the claim and release actions in its claim and release jobs, want 2", reusableWorkflow, used)
	}
}

// actionInputs are the inputs of an action's action.yml.
func actionInputs(t *testing.T, action string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".github", "actions", action, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Inputs map[string]any `yaml:"inputs"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatalf("%s/action.yml: %v", action, err)
	}
	return meta.Inputs
}
