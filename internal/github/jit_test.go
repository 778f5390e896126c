package github_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// The just-in-time runner calls against the stub GitHub, which answers as
// the REST API does (package scripttest).
func jitClient(t *testing.T) (*github.Client, *scripttest.GitHub) {
	t.Helper()
	gh := scripttest.NewGitHub(t)
	c, err := github.New(github.Config{BaseURL: gh.URL, Token: gh.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	return c, gh
}

var app = github.Target{Owner: "octo", Repository: "app"}

// GitHub makes the runner, of the repository, with the labels and the name
// asked for, and answers with its id and the configuration its run.sh
// needs: the runner's own settings, for that repository.
func TestGenerateJITConfig(t *testing.T) {
	c, gh := jitClient(t)
	r, err := c.GenerateJITConfig(context.Background(), app, github.JITRequest{Name: "i-0abc-k2m4", Labels: []string{"run-1-abcdefgh23456"}, RunnerGroupID: github.DefaultRunnerGroupID})
	if err != nil {
		t.Fatal(err)
	}
	runner, ok := gh.Runners()["i-0abc-k2m4"]
	if !ok || r.ID != runner.ID || r.Name != "i-0abc-k2m4" || runner.Target != "octo/app" || runner.Labels != "run-1-abcdefgh23456" || !runner.Ephemeral {
		t.Fatalf("runner %+v, GitHub has %+v (found: %v); want the ephemeral runner of octo/app with the label", r, runner, ok)
	}
	files := map[string]string{}
	decoded, _ := base64.StdEncoding.DecodeString(r.EncodedConfig)
	if err := json.Unmarshal(decoded, &files); err != nil {
		t.Fatalf("the configuration is not the runner's files: %v", err)
	}
	settings, _ := base64.StdEncoding.DecodeString(files[".runner"])
	if !strings.Contains(string(settings), `"agentName":"i-0abc-k2m4"`) || !strings.Contains(string(settings), gh.URL+"/octo/app") {
		t.Errorf("the runner's settings %s: want its name and repository", settings)
	}
	if calls := gh.APICalls(); !slices.Equal(calls, []string{"generate-jitconfig octo/app"}) {
		t.Errorf("API calls %v", calls)
	}
}

// What GitHub refuses comes back as an error naming the runner and the
// repository, and never the answer's configuration; a name taken says so.
func TestGenerateJITConfigRefused(t *testing.T) {
	c, _ := jitClient(t)
	ask := github.JITRequest{Name: "i-0abc-k2m4", Labels: []string{"run-1-abcdefgh23456"}, RunnerGroupID: github.DefaultRunnerGroupID}
	if _, err := c.GenerateJITConfig(context.Background(), app, ask); err != nil {
		t.Fatal(err)
	}
	_, err := c.GenerateJITConfig(context.Background(), app, ask)
	if err == nil || !strings.Contains(err.Error(), "create just-in-time runner i-0abc-k2m4 of repository octo/app: HTTP 409") || !strings.Contains(err.Error(), "a runner of that name exists") {
		t.Errorf("a taken name: %v", err)
	}
	noGroup := ask
	noGroup.Name, noGroup.RunnerGroupID = "i-0abc-other", 7
	if _, err := c.GenerateJITConfig(context.Background(), app, noGroup); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("a runner group the repository does not have: %v", err)
	}
	if _, err := c.GenerateJITConfig(context.Background(), github.Target{Owner: "octo"}, ask); err == nil || !strings.Contains(err.Error(), "not a repository") {
		t.Errorf("an organization: %v", err)
	}
}

// A runner is read by its id, in its repository only; deleted, it is gone,
// and deleting it again (or a runner GitHub removed after its job) is no
// error.
func TestRepositoryRunnerAndDeleteRunner(t *testing.T) {
	c, gh := jitClient(t)
	ctx := context.Background()
	made, err := c.GenerateJITConfig(ctx, app, github.JITRequest{Name: "i-0abc-k2m4", Labels: []string{"run-1-abcdefgh23456"}, RunnerGroupID: github.DefaultRunnerGroupID})
	if err != nil {
		t.Fatal(err)
	}
	if r, found, err := c.RepositoryRunner(ctx, app, made.ID); err != nil || !found || r.ID != made.ID || r.Name != "i-0abc-k2m4" {
		t.Fatalf("RepositoryRunner = %+v, %v, %v; want the runner made", r, found, err)
	}
	if _, found, err := c.RepositoryRunner(ctx, github.Target{Owner: "octo", Repository: "other"}, made.ID); err != nil || found {
		t.Errorf("the runner read from another repository: found %v, %v", found, err)
	}
	if err := c.DeleteRunner(ctx, app, made.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := gh.Runners()["i-0abc-k2m4"]; ok {
		t.Error("the runner is still registered")
	}
	if _, found, err := c.RepositoryRunner(ctx, app, made.ID); err != nil || found {
		t.Errorf("the deleted runner read: found %v, %v", found, err)
	}
	if err := c.DeleteRunner(ctx, app, made.ID); err != nil {
		t.Errorf("deleting it again: %v", err)
	}
	want := []string{"generate-jitconfig octo/app", "get-runner octo/app", "get-runner octo/other", "delete-runner octo/app", "get-runner octo/app", "delete-runner octo/app"}
	if calls := gh.APICalls(); !slices.Equal(calls, want) {
		t.Errorf("API calls %v, want %v", calls, want)
	}
}

// A credential GitHub refuses is told, with what it lacks, and is not
// mistaken for a runner gone.
func TestRepositoryRunnerBadCredentials(t *testing.T) {
	gh := scripttest.NewGitHub(t)
	c, err := github.New(github.Config{BaseURL: gh.URL, Token: "ghp_wrong"})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.RepositoryRunner(context.Background(), app, 1); err == nil || found || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("RepositoryRunner with bad credentials: found %v, %v", found, err)
	}
	if err := c.DeleteRunner(context.Background(), app, 1); err == nil || !strings.Contains(err.Error(), "the GitHub credentials are invalid or expired") {
		t.Errorf("DeleteRunner with bad credentials: %v", err)
	}
}
