package actions

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// repoRoot is the repository's root relative to this package's directory,
// where `go test` runs the tests.
const repoRoot = "../../.."

// script is the actions' script, as their steps run it.
var script = filepath.Join(repoRoot, ".github", "actions", "lib", "ec2runners.sh")

// requireAcceptance skips t unless acceptance tests are asked for
// (TF_ACC set): they need the emulator and Terraform.
func requireAcceptance(t testing.TB) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: needs the emulator and Terraform: set TF_ACC=1 (make test and make bench do)")
	}
}

// toolPath finds a tool on PATH. Outside CI a missing one skips the test,
// saying why; CI (CI set, as .ci/run does) fails instead.
func toolPath(t testing.TB, name, why string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := name + " is not on PATH: " + why
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// job is one job of a workflow run on a fresh runner: its own RUNNER_TEMP,
// GITHUB_OUTPUT, GITHUB_PATH and step summary, as GitHub gives each job,
// and the environment of the run. script is the actions' script it runs.
type job struct {
	t      testing.TB
	env    map[string]string
	script string
}

func newJob(t testing.TB, env map[string]string) *job {
	t.Helper()
	dir := t.TempDir()
	j := &job{t: t, script: script, env: map[string]string{
		"RUNNER_TEMP": filepath.Join(dir, "temp"), "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64",
		"GITHUB_OUTPUT": filepath.Join(dir, "output"), "GITHUB_PATH": filepath.Join(dir, "path"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary"),
		"GITHUB_REPOSITORY": "acme/app", "GITHUB_EVENT_NAME": "push", "GITHUB_ACTOR": "octocat",
		"GITHUB_RUN_ID": "4242", "GITHUB_RUN_ATTEMPT": "1", "GITHUB_JOB": "claim",
	}}
	for k, v := range env {
		j.env[k] = v
	}
	if err := os.MkdirAll(j.env["RUNNER_TEMP"], 0o755); err != nil {
		t.Fatal(err)
	}
	return j
}

// command is the script with args, in the job's environment (and none of
// the GitHub or ec2runners settings of the test's own).
func (j *job) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", append([]string{j.script}, args...)...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GITHUB_") || strings.HasPrefix(k, "RUNNER_") || strings.HasPrefix(k, "EC2RUNNERS_") || strings.HasPrefix(k, "ACTIONS_") || strings.HasPrefix(k, "TF_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	for k, v := range j.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// step starts the run: step id of an action (claim or release) as the
// runner starts a step of shell bash (actions/runner, ScriptHandler): its
// run: text in a file, run by `bash --noprofile --norc -e -o pipefail
// <file>`, with GITHUB_ACTION_PATH the action's directory. The process it
// starts is the one the runner signals when it cancels the step; it is the
// leader of a process group, which stands for the job's process tree.
func (j *job) step(ctx context.Context, action, id string) *exec.Cmd {
	j.t.Helper()
	return j.stepCommand(ctx, action, id, actionStep(j.t, action, id).Run)
}

// stepCommand is step's command for the run: script of an action,
// written to a file named after name (the step's id).
func (j *job) stepCommand(ctx context.Context, action, name, run string) *exec.Cmd {
	j.t.Helper()
	dir, err := filepath.Abs(filepath.Join(repoRoot, ".github", "actions", action))
	if err != nil {
		j.t.Fatal(err)
	}
	file := filepath.Join(j.env["RUNNER_TEMP"], fmt.Sprintf("%s-%s.sh", action, name))
	writeFile(j.t, file, run)
	cmd := j.command(ctx)
	cmd.Args = []string{"bash", "--noprofile", "--norc", "-e", "-o", "pipefail", file}
	cmd.Env = append(cmd.Env, "GITHUB_ACTION_PATH="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The runner, too, stops reading the step's output soon after its
	// process ends, although a process it left may still hold the pipe.
	cmd.WaitDelay = time.Second
	return cmd
}

type actionStepMeta struct {
	ID    string            `yaml:"id"`
	If    string            `yaml:"if"`
	Uses  string            `yaml:"uses"`
	Shell string            `yaml:"shell"`
	Run   string            `yaml:"run"`
	Env   map[string]string `yaml:"env"`
}

// actionSteps are the steps of an action's action.yml.
func actionSteps(t testing.TB, action string) []actionStepMeta {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".github", "actions", action, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Runs struct {
			Steps []actionStepMeta `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatalf("%s/action.yml: %v", action, err)
	}
	return meta.Runs.Steps
}

func actionStep(t testing.TB, action, id string) actionStepMeta {
	t.Helper()
	for _, s := range actionSteps(t, action) {
		if s.ID == id {
			if s.Shell != "bash" || s.Run == "" {
				t.Fatalf("step %s of %s is not a run: step of shell bash", id, action)
			}
			return s
		}
	}
	t.Fatalf("%s/action.yml has no step %s", action, id)
	return actionStepMeta{}
}

// cancelStep cancels a step started by step as the runner cancels it
// (actions/runner, ProcessInvoker.CancelAndKillProcessTree): SIGINT to the
// step's process, SIGTERM to it 7.5 s later if it still runs, and SIGKILL
// to it alone 2.5 s after that. It returns the last signal the process was
// sent and how it ended.
func cancelStep(cmd *exec.Cmd, done <-chan error) (syscall.Signal, error) {
	for _, s := range []struct {
		sig   syscall.Signal
		grace time.Duration
	}{{syscall.SIGINT, 7500 * time.Millisecond}, {syscall.SIGTERM, 2500 * time.Millisecond}} {
		_ = cmd.Process.Signal(s.sig)
		select {
		case err := <-done:
			return s.sig, err
		case <-time.After(s.grace):
		}
	}
	_ = cmd.Process.Kill()
	return syscall.SIGKILL, <-done
}

// run runs the script with args and returns its output and whether it
// succeeded.
func (j *job) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := j.command(ctx, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	j.t.Logf("ec2runners.sh %s (attempt %s):\n%s", strings.Join(args, " "), j.env["GITHUB_RUN_ATTEMPT"], indent(out.String()))
	return out.String(), err
}

// must runs the script and fails the test when it fails.
func (j *job) must(args ...string) string {
	j.t.Helper()
	out, err := j.run(args...)
	if err != nil {
		j.t.Fatalf("ec2runners.sh %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// outputs are the step outputs the script wrote, the last value of each.
func (j *job) outputs() map[string]string {
	j.t.Helper()
	return readOutputs(j.t, j.env["GITHUB_OUTPUT"])
}

// readOutputs reads a GITHUB_OUTPUT file: the last value of each name.
func readOutputs(t testing.TB, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[string]string{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), "=")
		if !ok {
			t.Fatalf("GITHUB_OUTPUT line %q is not name=value", s.Text())
		}
		out[k] = v
	}
	return out
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runAction runs an action in the job as the runner runs a composite
// action: its steps in order, each step's if: and env: evaluated with the
// action's inputs (those given, else their defaults), the outputs of the
// steps before it and the job's env, each run: step with a GITHUB_OUTPUT
// of its own. Its uses: steps are left out: the job has what they would
// give (AWS credentials; no cache). It fails the test at a step that
// fails, and returns the action's outputs and what its steps printed.
func (j *job) runAction(action string, given map[string]string) (map[string]string, string) {
	j.t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".github", "actions", action, "action.yml"))
	if err != nil {
		j.t.Fatal(err)
	}
	var meta struct {
		Inputs map[string]struct {
			Default string `yaml:"default"`
		} `yaml:"inputs"`
		Outputs map[string]struct {
			Value string `yaml:"value"`
		} `yaml:"outputs"`
		Runs struct {
			Steps []actionStepMeta `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		j.t.Fatalf("%s/action.yml: %v", action, err)
	}
	inputs := map[string]any{}
	for name, in := range meta.Inputs {
		inputs[name] = in.Default
	}
	for name, v := range given {
		if _, ok := meta.Inputs[name]; !ok {
			j.t.Fatalf("the %s action has no input %s", action, name)
		}
		inputs[name] = v
	}
	jobEnv := map[string]any{}
	for k, v := range j.env {
		jobEnv[k] = v
	}
	steps := map[string]any{}
	env := &exprEnv{
		contexts: map[string]any{"inputs": inputs, "steps": steps, "env": jobEnv, "github": map[string]any{}},
		status:   func(name string) bool { return name == "always" || name == "success" },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var log strings.Builder
	for i, st := range meta.Runs.Steps {
		run, err := evalIf(st.If, env)
		if err != nil {
			j.t.Fatalf("step %d of the %s action, if: %v", i, action, err)
		}
		if !run || st.Uses != "" {
			continue
		}
		name := st.ID
		if name == "" {
			name = strconv.Itoa(i)
		}
		cmd := j.stepCommand(ctx, action, name, st.Run)
		output := filepath.Join(j.env["RUNNER_TEMP"], fmt.Sprintf("%s-%s.output", action, name))
		cmd.Env = append(cmd.Env, "GITHUB_OUTPUT="+output)
		for k, value := range st.Env {
			v, err := evalTemplate(value, env)
			if err != nil {
				j.t.Fatalf("step %s of the %s action, env %s: %v", name, action, k, err)
			}
			cmd.Env = append(cmd.Env, k+"="+toString(v))
		}
		out, err := cmd.CombinedOutput()
		log.Write(out)
		j.t.Logf("the %s action's step %s:\n%s", action, name, indent(string(out)))
		if err != nil {
			j.t.Fatalf("the %s action's step %s failed: %v", action, name, err)
		}
		if st.ID != "" {
			outputs := map[string]any{}
			for k, v := range readOutputs(j.t, output) {
				outputs[k] = v
			}
			steps[st.ID] = map[string]any{"outputs": outputs}
		}
	}
	outputs := map[string]string{}
	for name, o := range meta.Outputs {
		v, err := evalTemplate(o.Value, env)
		if err != nil {
			j.t.Fatalf("output %s of the %s action: %v", name, action, err)
		}
		outputs[name] = toString(v)
	}
	return outputs, log.String()
}
