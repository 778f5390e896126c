package scripttest

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Just-in-time runners, as GitHub's REST API makes them ("Create
// configuration for a just-in-time runner for an organization" and "... for
// a repository",
// https://docs.github.com/en/rest/actions/self-hosted-runners): the runner
// is registered, offline, from the request on, takes one job and is then
// removed (it is ephemeral), and the answer's encoded_jit_config is all its
// run.sh --jitconfig needs to start.

// maxJITLabels bounds a just-in-time runner's labels: the REST API's
// labels have "Minimum items: 1. Maximum items: 100."
const maxJITLabels = 100

// generateJITConfig answers POST .../actions/runners/generate-jitconfig
// for target (name, runner_group_id, labels, work_folder): 201 with the
// runner and its encoded_jit_config; 422 for a body without name,
// runner_group_id or 1 to 100 labels (none empty, a name of at most 64
// characters, as registration asks); 404 for a runner group target does
// not have (a repository has the default group alone); 409 for a name a
// runner already has.
func (g *GitHub) generateJITConfig(w http.ResponseWriter, r *http.Request, target string) {
	if !g.authorized(w, r) {
		return
	}
	var body struct {
		Name          string   `json:"name"`
		RunnerGroupID *int64   `json:"runner_group_id"`
		Labels        []string `json:"labels"`
		WorkFolder    string   `json:"work_folder"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Name == "" || utf8.RuneCountInString(body.Name) > github.MaxRunnerNameLength ||
		body.RunnerGroupID == nil || len(body.Labels) == 0 || len(body.Labels) > maxJITLabels ||
		slices.ContainsFunc(body.Labels, func(l string) bool { return strings.TrimSpace(l) == "" }) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	group, ok := g.runnerGroupByID(target, *body.RunnerGroupID)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	if _, taken := g.runners[body.Name]; taken {
		writeJSON(w, http.StatusConflict, map[string]string{"message": "Already exists - A runner with the name " + body.Name + " already exists."})
		return
	}
	g.runnerIDs++
	runner := &Runner{ID: g.runnerIDs, Name: body.Name, Target: target, Labels: strings.Join(body.Labels, ","), Group: group, Ephemeral: true}
	g.runners[runner.Name] = runner
	g.events = append(g.events, "register "+runner.Name+" "+runner.Labels)
	g.apiCalls = append(g.apiCalls, "generate-jitconfig "+target)
	// The files the real listener writes before it starts, base64-encoded
	// in a JSON object, itself base64-encoded.
	settings, _ := json.Marshal(map[string]any{"agentId": runner.ID, "agentName": runner.Name, "gitHubUrl": g.URL + "/" + target,
		"serverUrl": g.URL, "workFolder": cmp.Or(body.WorkFolder, "_work"), "ephemeral": true})
	credentials, _ := json.Marshal(map[string]any{"scheme": "OAuth", "data": map[string]string{"clientId": runner.Name}})
	files, _ := json.Marshal(map[string]string{".runner": base64.StdEncoding.EncodeToString(settings),
		".credentials": base64.StdEncoding.EncodeToString(credentials)})
	writeJSON(w, http.StatusCreated, map[string]any{"runner": g.runnerJSON(runner), "encoded_jit_config": base64.StdEncoding.EncodeToString(files)})
}

// runnerGroupByID is the name of target's runner group id; the caller
// holds g.mu.
func (g *GitHub) runnerGroupByID(target string, id int64) (string, bool) {
	if id == defaultRunnerGroupID {
		return protocol.DefaultRunnerGroup, true
	}
	if strings.Contains(target, "/") {
		return "", false
	}
	for _, group := range g.groups[target] {
		if group.id == id {
			return group.name, true
		}
	}
	return "", false
}

// runnerJSON is a runner as the REST API shows it: online while its
// run.sh runs, busy while it runs a job (a just-in-time runner GitHub
// just made is offline, its os not known yet); the caller holds g.mu.
func (g *GitHub) runnerJSON(runner *Runner) map[string]any {
	var labels []map[string]any
	for i, l := range strings.Split(runner.Labels, ",") {
		labels = append(labels, map[string]any{"id": i + 1, "name": l, "type": "custom"})
	}
	status, os := "offline", "unknown"
	if runner.Running {
		status, os = "online", "Linux"
	}
	busy := slices.ContainsFunc(g.jobs.list, func(j *Job) bool { return j.Runner == runner.Name && !j.Done })
	return map[string]any{"id": runner.ID, "name": runner.Name, "os": os, "status": status, "busy": busy, "labels": labels}
}

// runnerOf is target's runner of the path's {id}, or nil; the caller
// holds g.mu.
func (g *GitHub) runnerOf(r *http.Request, target string) *Runner {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return nil
	}
	for _, runner := range g.runners {
		if runner.ID == id && strings.EqualFold(runner.Target, target) {
			return runner
		}
	}
	return nil
}

// getRunner answers GET /repos/{owner}/{repo}/actions/runners/{id} ("Get a
// self-hosted runner for a repository"): 200 with the runner, 404 for an
// id the repository has no runner of (never made, or removed).
func (g *GitHub) getRunner(w http.ResponseWriter, r *http.Request, target string) {
	if !g.authorized(w, r) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.apiCalls = append(g.apiCalls, "get-runner "+target)
	runner := g.runnerOf(r, target)
	if runner == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, g.runnerJSON(runner))
}

// deleteRunner answers DELETE /repos/{owner}/{repo}/actions/runners/{id}
// ("Delete a self-hosted runner from a repository"): 204 once removed, 404
// for an id the repository has no runner of.
func (g *GitHub) deleteRunner(w http.ResponseWriter, r *http.Request, target string) {
	if !g.authorized(w, r) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.apiCalls = append(g.apiCalls, "delete-runner "+target)
	runner := g.runnerOf(r, target)
	if runner == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	delete(g.runners, runner.Name)
	g.events = append(g.events, "remove "+runner.Name)
	w.WriteHeader(http.StatusNoContent)
}
