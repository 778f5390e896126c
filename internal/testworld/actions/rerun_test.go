package actions

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The model of GitHub's rules this test runs the example workflows by
// (workflow.yml, and reusable-workflow.yml with the jobs of the reusable
// workflow it calls in place of its calling job), from GitHub's
// documentation:
//
//   - "Re-running workflows and jobs": "Re-run all jobs" runs every job as
//     a new attempt; "Re-run failed jobs" re-runs the failed (and
//     cancelled) jobs, and a re-run of one job re-runs that job; either
//     way GitHub "also re-runs the jobs that depend on them. Jobs that
//     aren't included keep their outputs from the previous attempt, which
//     the newly run jobs can use." Every re-run is a new attempt:
//     github.run_attempt "begins at 1 for the workflow run's first attempt,
//     and increments with each re-run".
//   - "Workflow syntax", jobs.<job_id>.needs: "If a job fails or is
//     skipped, all jobs that need it are skipped unless the jobs use a
//     conditional expression that causes the job to continue"; an if:
//     without a status function is success() && (its condition).
//   - "Workflow cancellation reference": on a cancel, "the server
//     re-evaluates if conditions for all currently running jobs. If the
//     condition evaluates to true, the job will not get canceled", e.g.
//     if: always(); for the jobs that continue, "the server re-evaluates if
//     conditions for the unfinished steps"; the others get SIGINT.
//   - "Using self-hosted runners in a workflow": a job whose runs-on labels
//     no online runner has stays queued (up to 24 hours).
//
// The claim and release actions are modelled as ec2runners.sh behaves
// (TestActions_claimAndRelease runs the real one): the claim takes runners
// labelled <run id>-<attempt>, or outputs fallback-runs-on for a run
// without secrets; a failed claim holds nothing, an interrupted one may hold
// what its record lists; the release gives back its claim and those of the
// run's earlier attempts. The action's outputs are its action.yml's, evaluated.
//
// The pool's maintenance is modelled as internal/claim behaves
// (TestReapRevivesAReleasedClaimForARerunsQueuedJob runs it): a release
// leaves a marker of each claim it gives back, with the attempt that
// claimed (or revived) it; a job of a newer attempt queued for the label
// of a marked claim gets that claim revived (runners claimed again with
// its run id and label, serving the newer attempt), once per attempt.

const (
	examplesWorkflow = "examples/complete/workflow.yml"
	// The example caller of the shipped reusable workflow.
	examplesCaller = "examples/complete/reusable-workflow.yml"
)

// modelVars are the repository's variables the example workflows read.
var modelVars = map[string]any{"EC2RUNNERS_POOL": "ci-runners", "EC2RUNNERS_CI_ROLE_ARN": "arn:aws:iam::123456789012:role/ci", "EC2RUNNERS_BROKER_FUNCTION": "ci-runners-broker", "AWS_REGION": "eu-west-1"}

type workflow struct {
	On struct {
		WorkflowCall struct {
			Inputs map[string]struct {
				Default string `yaml:"default"`
			} `yaml:"inputs"`
		} `yaml:"workflow_call"`
	} `yaml:"on"`
	Jobs  map[string]*wfJob `yaml:"jobs"`
	order []string          // jobs, each after those it needs
}

type wfJob struct {
	ID       string            `yaml:"-"`
	Name     string            `yaml:"name"`
	RawNeed  yaml.Node         `yaml:"needs"`
	Needs    []string          `yaml:"-"`
	If       string            `yaml:"if"`
	RunsOn   string            `yaml:"runs-on"`
	Outputs  map[string]string `yaml:"outputs"`
	Steps    []wfStep          `yaml:"steps"`
	Uses     string            `yaml:"uses"` // a reusable workflow
	With     map[string]string `yaml:"with"`
	Strategy struct {
		Matrix map[string]string `yaml:"matrix"` // each a ${{ }} list, as the shipped workflows' are
	} `yaml:"strategy"`
	// For a job of a called workflow: its id there, which its needs
	// context names, and its inputs and matrix contexts.
	calledID string
	contexts map[string]any
}

// neededAs is the name needs.<name> gives the job in its own workflow.
func (j *wfJob) neededAs() string {
	if j.calledID != "" {
		return j.calledID
	}
	return j.ID
}

type wfStep struct {
	ID   string            `yaml:"id"`
	Name string            `yaml:"name"`
	If   string            `yaml:"if"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]string `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

type actionMeta struct {
	Outputs map[string]struct {
		Value string `yaml:"value"`
	} `yaml:"outputs"`
}

// loadWorkflow reads a workflow. A job that calls the shipped reusable
// workflow becomes the called workflow's jobs, as the caller's run shows
// them: <job> / <called job's name>, one for each leg of a matrix.
func loadWorkflow(t *testing.T, path string) *workflow {
	t.Helper()
	wf := readWorkflow(t, path)
	for _, id := range slices.Sorted(maps.Keys(wf.Jobs)) {
		if m := shippedUses.FindStringSubmatch(wf.Jobs[id].Uses); m != nil {
			expandCall(t, wf, wf.Jobs[id], readWorkflow(t, filepath.Join(repoRoot, m[1])))
		}
	}
	wf.sortJobs(t, path)
	return wf
}

func readWorkflow(t *testing.T, path string) *workflow {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for id, j := range wf.Jobs {
		j.ID = id
		switch j.RawNeed.Kind {
		case yaml.ScalarNode:
			j.Needs = []string{j.RawNeed.Value}
		case yaml.SequenceNode:
			for _, n := range j.RawNeed.Content {
				j.Needs = append(j.Needs, n.Value)
			}
		}
	}
	return &wf
}

// expandCall puts the jobs of called in place of caller, with the inputs
// caller passes (else their defaults) and each leg of their matrices.
func expandCall(t *testing.T, wf *workflow, caller *wfJob, called *workflow) {
	t.Helper()
	inputs := map[string]any{}
	for name, in := range called.On.WorkflowCall.Inputs {
		inputs[name] = in.Default
	}
	callerEnv := &exprEnv{contexts: map[string]any{"vars": modelVars}}
	for name, value := range caller.With {
		v, err := evalTemplate(value, callerEnv)
		if err != nil {
			t.Fatalf("job %s with %s: %v", caller.ID, name, err)
		}
		inputs[name] = v
	}
	expanded := map[string][]string{} // the called workflow's job ids: the caller's ids of their legs
	for _, id := range slices.Sorted(maps.Keys(called.Jobs)) {
		j := called.Jobs[id]
		for _, leg := range matrixLegs(t, j, inputs) {
			c := *j
			c.calledID = id
			c.contexts = map[string]any{"inputs": inputs, "matrix": leg}
			name := id
			if j.Name != "" {
				v, err := evalTemplate(j.Name, &exprEnv{contexts: c.contexts})
				if err != nil {
					t.Fatalf("job %s name: %v", id, err)
				}
				name = toString(v)
			}
			c.ID = caller.ID + " / " + name
			if _, taken := wf.Jobs[c.ID]; taken {
				t.Fatalf("job %s: two jobs of the called workflow are named %q", caller.ID, name)
			}
			wf.Jobs[c.ID] = &c
			expanded[id] = append(expanded[id], c.ID)
		}
	}
	for _, ids := range expanded {
		for _, id := range ids {
			j := wf.Jobs[id]
			var needs []string
			for _, n := range j.Needs {
				needs = append(needs, expanded[n]...)
			}
			j.Needs = needs
		}
	}
	delete(wf.Jobs, caller.ID)
	var all []string
	for _, ids := range expanded {
		all = append(all, ids...)
	}
	for _, j := range wf.Jobs {
		if i := slices.Index(j.Needs, caller.ID); i >= 0 {
			j.Needs = slices.Concat(j.Needs[:i], all, j.Needs[i+1:])
		}
	}
}

// matrixLegs are the matrix contexts of a job's legs: every combination of
// its matrix's values (one leg, without a matrix).
func matrixLegs(t *testing.T, j *wfJob, inputs map[string]any) []map[string]any {
	t.Helper()
	legs := []map[string]any{nil}
	for _, key := range slices.Sorted(maps.Keys(j.Strategy.Matrix)) {
		v, err := evalTemplate(j.Strategy.Matrix[key], &exprEnv{contexts: map[string]any{"inputs": inputs}})
		values, ok := v.([]any)
		if err != nil || !ok {
			t.Fatalf("job %s matrix %s: want a list, got %v (%v)", j.ID, key, v, err)
		}
		var next []map[string]any
		for _, leg := range legs {
			for _, value := range values {
				combined := maps.Clone(leg)
				if combined == nil {
					combined = map[string]any{}
				}
				combined[key] = value
				next = append(next, combined)
			}
		}
		legs = next
	}
	return legs
}

// sortJobs orders the jobs, each after those it needs, in waves: the jobs
// whose needs the earlier waves ran start together, and the model runs
// them in the order of their names.
func (wf *workflow) sortJobs(t *testing.T, path string) {
	t.Helper()
	wf.order = nil
	done := map[string]bool{}
	for len(wf.order) < len(wf.Jobs) {
		var wave []string
		for _, id := range slices.Sorted(maps.Keys(wf.Jobs)) {
			if !done[id] && !slices.ContainsFunc(wf.Jobs[id].Needs, func(n string) bool { return !done[n] }) {
				wave = append(wave, id)
			}
		}
		for _, id := range wave {
			done[id] = true
		}
		wf.order = append(wf.order, wave...)
		if len(wave) == 0 {
			t.Fatalf("%s: the jobs' needs form a cycle", path)
		}
	}
}

func loadAction(t *testing.T, name string) actionMeta {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".github", "actions", name, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a actionMeta
	if err := yaml.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// fault is what goes wrong in an attempt: job fails (its work fails: a
// claim that cannot be filled, a build that fails, a release that
// cannot reach AWS) or the run is cancelled while it runs.
type fault struct{ job, kind string }

func (f fault) String() string {
	if f.job == "" {
		return "no failure"
	}
	if f.kind == "cancel" {
		return "cancelled during " + f.job
	}
	return f.job + " fails"
}

// jobRun is a job's result in the run: what GitHub shows and keeps.
type jobRun struct {
	result  string // success, failure, cancelled, skipped
	outputs map[string]any
	outcome string // what happened to it, for the table
	attempt int
}

// sim is one workflow run across its attempts, with the pool's claims.
type sim struct {
	t          *testing.T
	wf         *workflow
	claimMeta  actionMeta
	runID      string
	secretless bool // a pull request from a fork
	attempt    int
	jobs       map[string]*jobRun
	held       map[string]int // claims holding runners, by run id: the attempt that claimed or revived them
	markers    map[string]int // released claims, by run id: the attempt that claimed or revived them
	revivedFor map[string]int // released claims revived, by run id: the attempt they were revived for
	noRevival  bool           // the maintenance revives nothing (as before markers)
	hangs      []string
}

func newSim(t *testing.T, wf *workflow, claimMeta actionMeta, secretless bool) *sim {
	return &sim{t: t, wf: wf, claimMeta: claimMeta, runID: "4242", secretless: secretless, jobs: map[string]*jobRun{},
		held: map[string]int{}, markers: map[string]int{}, revivedFor: map[string]int{}}
}

func (s *sim) clone() *sim {
	c := *s
	c.jobs = maps.Clone(s.jobs)
	c.held = maps.Clone(s.held)
	c.markers = maps.Clone(s.markers)
	c.revivedFor = maps.Clone(s.revivedFor)
	c.hangs = slices.Clone(s.hangs)
	return &c
}

// ancestors are the jobs j needs, directly or not.
func (s *sim) ancestors(j string) []string {
	var out []string
	var walk func(string)
	walk = func(id string) {
		for _, n := range s.wf.Jobs[id].Needs {
			if !slices.Contains(out, n) {
				out = append(out, n)
				walk(n)
			}
		}
	}
	walk(j)
	return out
}

// dependents are the jobs that need j, directly or not, and j.
func (s *sim) dependents(j string) []string {
	out := []string{j}
	for _, id := range s.wf.order {
		if slices.ContainsFunc(s.wf.Jobs[id].Needs, func(n string) bool { return slices.Contains(out, n) }) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// choices are the re-runs GitHub offers once an attempt ended: all jobs,
// the failed jobs (when one failed or was cancelled), and each job that ran.
func (s *sim) choices() map[string][]string {
	out := map[string][]string{"Re-run all jobs": slices.Clone(s.wf.order)}
	var failed []string
	for _, id := range s.wf.order {
		if r := s.jobs[id].result; r == "failure" || r == "cancelled" {
			for _, d := range s.dependents(id) {
				if !slices.Contains(failed, d) {
					failed = append(failed, d)
				}
			}
		}
	}
	if len(failed) > 0 {
		out["Re-run failed jobs"] = failed
	}
	for _, id := range s.wf.order {
		if s.jobs[id].result != "skipped" {
			out["Re-run job "+id] = s.dependents(id)
		}
	}
	return out
}

func (s *sim) contexts(jobID string, steps map[string]any) map[string]any {
	// A matrix job's legs are one needs entry: its result the worst of
	// theirs.
	worse := []string{"skipped", "success", "cancelled", "failure"}
	needs := map[string]any{}
	for _, n := range s.wf.Jobs[jobID].Needs {
		r, name := s.jobs[n], s.wf.Jobs[n].neededAs()
		result := r.result
		if prev, ok := needs[name].(map[string]any); ok && slices.Index(worse, prev["result"].(string)) > slices.Index(worse, result) {
			result = prev["result"].(string)
		}
		needs[name] = map[string]any{"result": result, "outputs": r.outputs}
	}
	contexts := map[string]any{
		"github":  map[string]any{"run_id": s.runID, "run_attempt": strconv.Itoa(s.attempt), "repository": "acme/app"},
		"needs":   needs,
		"vars":    modelVars,
		"secrets": map[string]any{}, // the shipped workflows read none
		"steps":   steps,
		"env":     map[string]any{},
	}
	maps.Copy(contexts, s.wf.Jobs[jobID].contexts)
	return contexts
}

func isHosted(label string) bool {
	return strings.HasPrefix(label, "ubuntu-") || strings.HasPrefix(label, "windows-") || strings.HasPrefix(label, "macos-")
}

// runAttempt runs a new attempt of the run: the jobs of rerun (all of them
// first), with f going wrong.
func (s *sim) runAttempt(rerun []string, f fault) {
	s.attempt++
	cancelled := false
	for _, id := range s.wf.order {
		if !slices.Contains(rerun, id) {
			continue
		}
		j := s.wf.Jobs[id]
		anc := s.ancestors(id)
		status := func(name string) bool {
			switch name {
			case "always":
				return true
			case "cancelled":
				return cancelled
			case "failure":
				return slices.ContainsFunc(anc, func(a string) bool { return s.jobs[a].result == "failure" })
			}
			return !cancelled && !slices.ContainsFunc(anc, func(a string) bool { return s.jobs[a].result != "success" })
		}
		env := &exprEnv{contexts: s.contexts(id, map[string]any{}), status: status}
		run := &jobRun{attempt: s.attempt, outputs: map[string]any{}}
		s.jobs[id] = run
		ok, err := evalIf(j.If, env)
		if err != nil {
			s.t.Fatalf("job %s if: %v", id, err)
		}
		if !ok {
			run.result, run.outcome = "skipped", "skipped"
			continue
		}
		label := s.eval(j.RunsOn, env)
		var where string
		switch {
		case isHosted(label):
			where = label
		case s.held[label] > 0:
			where = "runners of claim " + label
		case s.revive(label):
			where = "runners of claim " + label + ", revived by the pool's maintenance"
		default:
			run.result, run.outcome = "failure", "WAITS for runners labelled "+strconv.Quote(label)+", which no claim holds"
			s.hangs = append(s.hangs, fmt.Sprintf("attempt %d: %s %s", s.attempt, id, run.outcome))
			continue
		}
		faulty := f.job == id
		if faulty && f.kind == "cancel" {
			cancelled = true
			// The server re-evaluates the running job's if: true, it goes on.
			if ok, _ := evalIf(j.If, env); !ok {
				run.result, run.outcome = "cancelled", "cancelled on "+where
				s.interrupt(j, env)
				continue
			}
		}
		run.result, run.outcome = s.runSteps(j, env, faulty && f.kind == "fail", cancelled, where)
		outEnv := &exprEnv{contexts: env.contexts, status: status}
		for name, expr := range j.Outputs {
			run.outputs[name] = s.eval(expr, outEnv)
		}
	}
}

// revive: the job queued for label, which no claim holds, gets runners
// when the maintenance revives the released claim of that label for this
// attempt, as it does at most once per attempt.
func (s *sim) revive(label string) bool {
	by, marked := s.markers[label]
	if s.noRevival || !marked || by >= s.attempt || s.revivedFor[label] >= s.attempt {
		return false
	}
	s.revivedFor[label] = s.attempt
	s.held[label] = s.attempt
	return true
}

func (s *sim) eval(src string, env *exprEnv) string {
	v, err := evalTemplate(src, env)
	if err != nil {
		s.t.Fatalf("%q: %v", src, err)
	}
	return toString(v)
}

// interrupt: a claim step cut short may hold what its record lists; the
// release job adopts it by the run id of its attempt.
func (s *sim) interrupt(j *wfJob, env *exprEnv) {
	for _, st := range j.Steps {
		if strings.Contains(st.Uses, "/actions/claim") && !s.secretless {
			s.held[s.defaultRunID(s.attempt, s.eval(st.With["name"], env))] = s.attempt
		}
	}
}

func (s *sim) defaultRunID(attempt int, name string) string {
	id := fmt.Sprintf("%s-%d", s.runID, attempt)
	if name != "" {
		id += "-" + strings.ToLower(name)
	}
	return id
}

// runSteps runs a job's steps; fail makes its work fail (the claim, the
// release, or the build's own steps).
func (s *sim) runSteps(j *wfJob, env *exprEnv, fail, cancelled bool, where string) (string, string) {
	steps := map[string]any{}
	env.contexts["steps"] = steps
	failed := false
	env.status = func(name string) bool {
		switch name {
		case "always":
			return true
		case "cancelled":
			return cancelled
		case "failure":
			return failed
		}
		return !failed && !cancelled
	}
	outcome := "ran on " + where
	for _, st := range j.Steps {
		ok, err := evalIf(st.If, env)
		if err != nil {
			s.t.Fatalf("job %s step if: %v", j.ID, err)
		}
		if !ok {
			continue
		}
		outputs := map[string]any{}
		switch {
		case strings.Contains(st.Uses, "/actions/claim"):
			if s.secretless {
				fallback := s.eval(st.With["fallback-runs-on"], env)
				if fallback == "" {
					failed, outcome = true, "failed: no secrets for the claim, and no fallback-runs-on"
					break
				}
				outputs = s.actionOutputs(map[string]any{"attempt": strconv.Itoa(s.attempt), "proceed": "false", "runs-on": fallback, "claimed": "false", "instance-ids": "[]"}, map[string]any{})
				outcome = "ran on " + where + ": no secrets, fell back to " + fallback
				break
			}
			if fail {
				failed, outcome = true, "failed on "+where+": the claim could not be filled, and holds nothing"
				break
			}
			id := s.defaultRunID(s.attempt, s.eval(st.With["name"], env))
			s.held[id] = s.attempt
			outputs = s.actionOutputs(map[string]any{"attempt": strconv.Itoa(s.attempt), "proceed": "true"},
				map[string]any{"runs-on": id, "label": id, "run-id": id, "instance-ids": `["i-1","i-2"]`, "claimed": "true"})
			outcome = "ran on " + where + ": claimed " + id
		case strings.Contains(st.Uses, "/actions/release"):
			if s.secretless {
				outcome = "ran on " + where + ": nothing to release"
				break
			}
			if fail {
				failed, outcome = true, "failed on "+where+": the release could not reach AWS"
				break
			}
			own := s.eval(st.With["run-id"], env)
			name := s.eval(st.With["name"], env)
			if own == "" {
				own = s.defaultRunID(s.attempt, name)
			}
			ids := []string{own}
			for n := 1; n <= s.attempt; n++ {
				ids = append(ids, s.defaultRunID(n, name))
			}
			var released []string
			for _, id := range ids {
				if by, held := s.held[id]; held {
					s.markers[id] = by
					delete(s.held, id)
					released = append(released, id)
				}
			}
			slices.Sort(released)
			outcome = fmt.Sprintf("ran on %s: released %v", where, released)
		case st.Run != "" && strings.Contains(st.Run, "exit 1"):
			msg := s.eval(st.Run, env)
			if i := strings.Index(msg, "::error"); i >= 0 {
				msg = strings.Trim(strings.SplitN(msg[i:], "\n", 2)[0], `" `)
			}
			failed, outcome = true, "FAILED AT ONCE on "+where+": "+msg
		default: // the job's own work
			if fail {
				failed, outcome = true, "failed on "+where
			}
		}
		if st.ID != "" {
			steps[st.ID] = map[string]any{"outputs": outputs}
		}
		if failed {
			break
		}
	}
	switch {
	case failed:
		return "failure", outcome
	case cancelled && !slices.ContainsFunc(j.Steps, func(st wfStep) bool { return strings.Contains(st.If, "always()") }):
		return "cancelled", outcome
	}
	return "success", outcome
}

// actionOutputs evaluates the claim action's outputs from its steps'.
func (s *sim) actionOutputs(prepare, claim map[string]any) map[string]any {
	env := &exprEnv{contexts: map[string]any{"steps": map[string]any{
		"prepare": map[string]any{"outputs": prepare}, "claim": map[string]any{"outputs": claim},
	}}, status: func(string) bool { return true }}
	out := map[string]any{}
	for name, o := range s.claimMeta.Outputs {
		out[name] = s.eval(o.Value, env)
	}
	return out
}

func (s *sim) describe() string {
	var parts []string
	for _, id := range s.wf.order {
		r := s.jobs[id]
		if r.attempt == s.attempt {
			parts = append(parts, fmt.Sprintf("%s: %s", id, r.outcome))
		} else {
			parts = append(parts, fmt.Sprintf("%s: kept from attempt %d (%s)", id, r.attempt, r.result))
		}
	}
	held := slices.Sorted(maps.Keys(s.held))
	if len(held) == 0 {
		parts = append(parts, "afterwards no claim holds runners")
	} else {
		parts = append(parts, fmt.Sprintf("afterwards claims %v hold runners", held))
	}
	return strings.Join(parts, "; ")
}

// TestRerun_exampleWorkflow runs the example workflow's job graph through
// GitHub's re-run, needs and if: always() rules, as modelled above (see
// rerunProblems).
func TestRerun_exampleWorkflow(t *testing.T) {
	for _, p := range rerunProblems(t, loadWorkflow(t, filepath.Join(repoRoot, examplesWorkflow)), examplesWorkflow) {
		t.Error(p)
	}
}

// TestRerun_reusableWorkflow does the same for the example caller of the
// shipped reusable workflow, whose run shows the called workflow's jobs:
// the claim, a job for each of the caller's two named jobs, and the release.
func TestRerun_reusableWorkflow(t *testing.T) {
	wf := loadWorkflow(t, filepath.Join(repoRoot, examplesCaller))
	want := []string{"ec2runners / claim", "ec2runners / build", "ec2runners / test", "ec2runners / release"}
	if !slices.Equal(slices.Sorted(maps.Keys(wf.Jobs)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("%s runs jobs %v, want %v", examplesCaller, wf.order, want)
	}
	for _, p := range rerunProblems(t, wf, examplesCaller) {
		t.Error(p)
	}
}

// TestRerun_modelCatchesAReleaseThatDoesNotNeedEveryJob: the model finds
// what the reusable workflow's graph rules out. A release that needs only
// the claim gives the runners back while the jobs that start with it wait
// for them. One that needs the build but not the test job is released
// after both in the model's order, but re-running the test job alone
// leaves the claim revived for it held: no release re-runs with it.
func TestRerun_modelCatchesAReleaseThatDoesNotNeedEveryJob(t *testing.T) {
	for _, c := range []struct {
		dropped []string // the jobs the release does not need
		want    string   // a problem the model finds
	}{
		{[]string{"build", "test"}, "push, attempt 1 (no failure): attempt 1: ec2runners / test WAITS for runners"},
		{[]string{"test"}, "then Re-run job ec2runners / test: claims [4242-2] still hold runners after an attempt without failure"},
	} {
		wf := loadWorkflow(t, filepath.Join(repoRoot, examplesCaller))
		release := wf.Jobs["ec2runners / release"]
		release.Needs = slices.DeleteFunc(release.Needs, func(n string) bool {
			return slices.ContainsFunc(c.dropped, func(d string) bool { return n == "ec2runners / "+d })
		})
		wf.sortJobs(t, examplesCaller)
		problems := rerunProblems(t, wf, examplesCaller)
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("a release that does not need %v: the model finds %d problems, none with %q:\n%s", c.dropped, len(problems), c.want, strings.Join(problems, "\n"))
			continue
		}
		t.Logf("a release that does not need %v: %d problems, among them %s", c.dropped, len(problems), problems[0])
	}
}

// rerunProblems runs a workflow's job graph (wf, read from path) through
// GitHub's re-run, needs and if: always() rules, as modelled above: from
// every point of failure of a first attempt (each job failing, the run
// cancelled during each job, or nothing), every re-run GitHub then offers,
// and every re-run of that re-run, for a run with secrets and one
// without (a pull request from a fork). It logs each outcome of the
// first re-runs, and checks that no job ever waits for runners no claim
// holds (nor gets them revived); that every job meant for the runners runs
// on runners a claim holds, whichever re-run ("Re-run all jobs", "Re-run
// failed jobs", one job) after whichever failure, or on the fallback for
// a run that cannot claim; that after an attempt whose release job
// succeeded no claim of the run holds runners; and that "Re-run all jobs"
// and re-running the claim job end with the jobs on the runners of the
// new attempt's claim.
func rerunProblems(t *testing.T, wf *workflow, path string) []string {
	t.Helper()
	meta := loadAction(t, "claim")
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var claimJob, releaseJob string
	var onRunners []string
	for _, id := range wf.order {
		for _, st := range wf.Jobs[id].Steps {
			switch {
			case strings.Contains(st.Uses, "/actions/claim"):
				claimJob = id
			case strings.Contains(st.Uses, "/actions/release"):
				releaseJob = id
			}
		}
	}
	for _, id := range wf.order {
		if id != claimJob && id != releaseJob {
			onRunners = append(onRunners, id)
		}
	}
	if claimJob == "" || releaseJob == "" || len(onRunners) == 0 {
		t.Fatalf("%s: want a claim job, a release job and jobs on the runners; got claim %q, release %q, others %v", path, claimJob, releaseJob, onRunners)
	}
	var faults []fault
	faults = append(faults, fault{})
	for _, id := range wf.order {
		faults = append(faults, fault{id, "fail"}, fault{id, "cancel"})
	}

	check := func(s *sim, rerun []string, f fault, what string) {
		for _, h := range s.hangs {
			problem("%s: %s", what, h)
		}
		release := s.jobs[releaseJob]
		if release.attempt == s.attempt && release.result == "success" && len(s.held) > 0 {
			problem("%s: the release job succeeded, yet claims %v hold runners", what, slices.Sorted(maps.Keys(s.held)))
		}
		for _, id := range onRunners {
			r := s.jobs[id]
			if r.attempt != s.attempt || r.result == "skipped" || (f.job == id && f.kind == "cancel") {
				continue
			}
			switch {
			case strings.Contains(r.outcome, "FAILED AT ONCE"):
				problem("%s: %s %s, want it on a claim's runners", what, id, r.outcome)
			case strings.Contains(r.outcome, "runners of claim"):
			case s.secretless && strings.Contains(r.outcome, " on ubuntu-"): // fallback-runs-on
			default:
				problem("%s: %s %s, want it on a claim's runners (or, for a run that cannot claim, the fallback)", what, id, r.outcome)
			}
		}
		if f.job == "" && (slices.Equal(rerun, wf.order) || slices.Equal(rerun, s.dependents(claimJob))) && !s.secretless {
			for _, id := range onRunners {
				if want := fmt.Sprintf("runners of claim %s-%d", s.runID, s.attempt); !strings.Contains(s.jobs[id].outcome, want) {
					problem("%s: %s %s, want it on the %s", what, id, s.jobs[id].outcome, want)
				}
			}
		}
	}

	for _, secretless := range []bool{false, true} {
		event := "push"
		if secretless {
			event = "a fork's pull request"
		}
		for _, f1 := range faults {
			first := newSim(t, wf, meta, secretless)
			first.runAttempt(wf.order, f1)
			check(first, wf.order, f1, fmt.Sprintf("%s, attempt 1 (%s)", event, f1))
			t.Logf("%s, attempt 1, %s: %s", event, f1, first.describe())
			c1 := first.choices()
			for _, choice := range slices.Sorted(maps.Keys(c1)) {
				second := first.clone()
				second.runAttempt(c1[choice], fault{})
				what := fmt.Sprintf("%s, attempt 1 %s, then %s", event, f1, choice)
				check(second, c1[choice], fault{}, what)
				if len(second.held) > 0 {
					problem("%s: claims %v still hold runners after an attempt without failure", what, slices.Sorted(maps.Keys(second.held)))
				}
				t.Logf("    then %s: %s", choice, second.describe())
				// Every re-run of that re-run, going wrong at every point.
				for _, f2 := range faults {
					s2 := first.clone()
					s2.runAttempt(c1[choice], f2)
					check(s2, c1[choice], f2, fmt.Sprintf("%s, attempt 2 %s", what, f2))
					c2 := s2.choices()
					for _, choice2 := range slices.Sorted(maps.Keys(c2)) {
						s3 := s2.clone()
						s3.runAttempt(c2[choice2], fault{})
						what3 := fmt.Sprintf("%s, attempt 2 %s, then %s", what, f2, choice2)
						check(s3, c2[choice2], fault{}, what3)
						if len(s3.held) > 0 {
							problem("%s: claims %v still hold runners after an attempt without failure", what3, slices.Sorted(maps.Keys(s3.held)))
						}
					}
				}
			}
		}
	}
	return problems
}

// TestRerun_modelCatchesAHang: the model finds what the pool's
// maintenance avoids. Without its revival of released claims, "Re-run
// failed jobs" after a failed build waits for the first attempt's
// runners, which its release gave back.
func TestRerun_modelCatchesAHang(t *testing.T) {
	wf := loadWorkflow(t, filepath.Join(repoRoot, examplesWorkflow))
	s := newSim(t, wf, loadAction(t, "claim"), false)
	s.noRevival = true
	s.runAttempt(wf.order, fault{"build", "fail"})
	s.runAttempt(s.choices()["Re-run failed jobs"], fault{})
	sort.Strings(s.hangs)
	if len(s.hangs) != 1 || !strings.Contains(s.hangs[0], `"4242-1"`) {
		t.Errorf("hangs %v, want the build waiting for 4242-1's runners", s.hangs)
	}
	t.Log(s.describe())
}
