package provider

import (
	"slices"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
)

// A claim made in a GitHub Actions job records the job's run attempt, from
// the variables GitHub sets; outside Actions, or with values that are not
// GitHub's, it records none (and no repository without GITHUB_REPOSITORY).
func TestWorkflowRunOfJob(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		want jobRun
	}{
		"actions job": {map[string]string{"GITHUB_REPOSITORY": "octo/app", "GITHUB_RUN_ID": "16234567890", "GITHUB_RUN_ATTEMPT": "2"},
			jobRun{Repository: "octo/app", WorkflowRun: claim.WorkflowRun{ID: 16234567890, Attempt: 2}}},
		"outside actions":      {map[string]string{}, jobRun{}},
		"no run id":            {map[string]string{"GITHUB_REPOSITORY": "octo/app"}, jobRun{Repository: "octo/app"}},
		"run id not a number":  {map[string]string{"GITHUB_REPOSITORY": "octo/app", "GITHUB_RUN_ID": "x", "GITHUB_RUN_ATTEMPT": "1"}, jobRun{Repository: "octo/app"}},
		"attempt zero":         {map[string]string{"GITHUB_REPOSITORY": "octo/app", "GITHUB_RUN_ID": "7", "GITHUB_RUN_ATTEMPT": "0"}, jobRun{Repository: "octo/app"}},
		"repository not valid": {map[string]string{"GITHUB_REPOSITORY": "app", "GITHUB_RUN_ID": "7", "GITHUB_RUN_ATTEMPT": "1"}, jobRun{}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := workflowRunOfJob(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A reap reports the claims of ended runs it released, and those whose
// runners it held for a job still running on them.
func TestReapReportNamesReleasedClaimsOfEndedRuns(t *testing.T) {
	got := reapReport("ci", maintenance.ReapResult{EndedRuns: []string{"123-1", "124-2"}, HeldRuns: []string{"125-1"}})
	want := []string{
		"Pool ci: released the claims of ended workflow runs (2): 123-1, 124-2",
		"Pool ci: held the runners of claims whose jobs still run on them (1): 125-1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("report %q, want %q", got, want)
	}
}
