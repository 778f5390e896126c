package github

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Just-in-time runners ("Create configuration for a just-in-time runner
// for a repository", https://docs.github.com/en/rest/actions/self-hosted-runners):
// GitHub registers the runner when asked, sends it one job, and then
// removes it. The answer's encoded_jit_config is all run.sh --jitconfig
// needs to run as that runner.

// DefaultRunnerGroupID is the runner group a repository's runners are in:
// a repository has no other.
const DefaultRunnerGroupID = 1

// JITRequest is the runner GitHub makes just in time.
type JITRequest struct {
	Name          string   // unique among the repository's runners, at most MaxRunnerNameLength characters
	Labels        []string // its labels, all it has
	RunnerGroupID int64    // DefaultRunnerGroupID for a repository's runner
}

// JITRunner is a runner GitHub made just in time.
type JITRunner struct {
	ID   int64
	Name string
	// EncodedConfig is the runner's encoded_jit_config: its credentials,
	// a secret.
	EncodedConfig string
}

// Runner is a self-hosted runner as GitHub lists it.
type Runner struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// runnerPath is the path of repository t's runner id.
func runnerPath(t Target, id int64) string {
	return t.runnersPath() + "/" + strconv.FormatInt(id, 10)
}

// GenerateJITConfig makes a just-in-time runner of repository t. It needs
// the repository permission "Administration" (read and write) of a GitHub
// App or fine-grained token.
func (c *Client) GenerateJITConfig(ctx context.Context, t Target, r JITRequest) (JITRunner, error) {
	op := operation{what: fmt.Sprintf("create just-in-time runner %s of repository %s", r.Name, t), hint: func(status int) string {
		if status == http.StatusConflict {
			return "a runner of that name exists"
		}
		return targetHint(t, status)
	}}
	if t.Owner == "" || t.Repository == "" {
		return JITRunner{}, fmt.Errorf("%s: not a repository", op.what)
	}
	request, err := json.Marshal(map[string]any{"name": r.Name, "labels": r.Labels, "runner_group_id": r.RunnerGroupID, "work_folder": "_work"})
	if err != nil {
		return JITRunner{}, fmt.Errorf("%s: %w", op.what, err)
	}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return JITRunner{}, fmt.Errorf("%s: %w", op.what, err)
	}
	body, status, err := c.callWith(ctx, op, http.MethodPost, t.runnersPath()+"/generate-jitconfig", bearer, request)
	c.forgetRevoked(bearer, err)
	if err != nil {
		return JITRunner{}, err
	}
	// The body is never quoted: it holds the runner's credentials.
	var answer struct {
		Runner        Runner `json:"runner"`
		EncodedConfig string `json:"encoded_jit_config"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Runner.ID <= 0 || answer.EncodedConfig == "" {
		return JITRunner{}, fmt.Errorf("%s: HTTP %d response has no runner id or no encoded_jit_config", op.what, status)
	}
	return JITRunner{ID: answer.Runner.ID, Name: answer.Runner.Name, EncodedConfig: answer.EncodedConfig}, nil
}

// RepositoryRunner reads runner id of repository t; found is false when
// GitHub has none of that id there (never made, or removed: a just-in-time
// runner is removed once its job is done).
func (c *Client) RepositoryRunner(ctx context.Context, t Target, id int64) (runner Runner, found bool, err error) {
	op := operation{what: fmt.Sprintf("read runner %d of repository %s", id, t), hint: func(status int) string { return targetHint(t, status) }}
	if t.Owner == "" || t.Repository == "" || id <= 0 {
		return Runner{}, false, fmt.Errorf("%s: not a repository's runner", op.what)
	}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return Runner{}, false, fmt.Errorf("%s: %w", op.what, err)
	}
	body, status, err := c.call(ctx, op, http.MethodGet, runnerPath(t, id), bearer)
	c.forgetRevoked(bearer, err)
	switch {
	case statusOf(err) == http.StatusNotFound:
		return Runner{}, false, nil
	case err != nil:
		return Runner{}, false, err
	}
	if err := json.Unmarshal(body, &runner); err != nil || runner.ID != id {
		return Runner{}, false, fmt.Errorf("%s: HTTP %d response is not that runner", op.what, status)
	}
	return runner, true, nil
}

// DeleteRunner removes runner id of repository t; one GitHub no longer
// has is removed already.
func (c *Client) DeleteRunner(ctx context.Context, t Target, id int64) error {
	op := operation{what: fmt.Sprintf("delete runner %d of repository %s", id, t), hint: func(status int) string { return targetHint(t, status) }}
	if t.Owner == "" || t.Repository == "" || id <= 0 {
		return fmt.Errorf("%s: not a repository's runner", op.what)
	}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op.what, err)
	}
	_, _, err = c.call(ctx, op, http.MethodDelete, runnerPath(t, id), bearer)
	c.forgetRevoked(bearer, err)
	if statusOf(err) == http.StatusNotFound {
		return nil
	}
	return err
}
