package maintenance

import (
	"context"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

// releasedForRerun claims runner (seeded warm) as run-7-1, for attempt 1
// of workflow run 7 of octo/app, and releases it as the attempt's release
// job would; attempt 2 of the run then starts. It returns the claim's
// label.
func (e *env) releasedForRerun(t *testing.T, runner string) string {
	t.Helper()
	e.claimForRun("run-7-1", runner, 7)
	label := e.recordOf(t, "run-7-1").Request.Label
	if _, err := e.c.Release(context.Background(), poolworld.Pool, "run-7-1"); err != nil {
		t.Fatal(err)
	}
	e.assertReleasedWarm(t, "run-7-1", runner)
	return label
}

func (e *env) recordOf(t *testing.T, runID string) claim.Record {
	t.Helper()
	it := e.DB.Get(protocol.TypeClaim, runID)
	if it == nil {
		t.Fatalf("no claim record %s", runID)
	}
	rec, err := claim.RecordFromItem(poolworld.Pool, it)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// A release leaves a marker of the claim of a workflow run for GitHub's
// re-run window; when a newer attempt of the run has a job queued for the
// claim's label ("Re-run failed jobs": the build kept the claim job's
// outputs), the next reap claims runners again with that run id and
// label, serving the newer attempt, and hands them the registration token
// for that label. It does so once for the attempt.
func TestReapRevivesAReleasedClaimForARerunsQueuedJob(t *testing.T) {
	t.Parallel()
	e, gh, runs := runsEnv(t, "")
	gh.StartRunAttempt("octo/app", 7, 1)
	label := e.releasedForRerun(t, "i-1")

	marker := e.DB.Get(protocol.TypeReleased, "run-7-1")
	if marker == nil {
		t.Fatal("the release left no marker of the claim")
	}
	var expires int64
	if n, ok := marker[protocol.AttrExpiresAt].(*types.AttributeValueMemberN); ok {
		expires, _ = strconv.ParseInt(n.Value, 10, 64)
	}
	if want := time.Now().Add(github.RerunWindow).Unix(); expires < want-60 || expires > want+60 {
		t.Errorf("the marker expires at %d, want GitHub's re-run window from now, %d", expires, want)
	}

	gh.CompleteRunAttempt("octo/app", 7, 1)
	gh.StartRunAttempt("octo/app", 7, 2)
	gh.QueueRunJob("octo/app", 7, 2, label)
	res := e.reap()
	if !slices.Equal(res.RevivedRuns, []string{"run-7-1"}) {
		t.Fatalf("revived %v, want [run-7-1]", res.RevivedRuns)
	}
	rec := e.recordOf(t, "run-7-1")
	if rec.Request.Label != label || rec.State != claim.StateComplete || rec.Request.WorkflowRun != (claim.WorkflowRun{ID: 7, Attempt: 2}) {
		t.Errorf("revived claim %s %+v, want complete with label %s, serving attempt 2 of run 7", rec.State, rec.Request, label)
	}
	e.assertHeld(t, "run-7-1", "i-1")
	if tok, ok := e.Token("i-1", protocol.SortKeyRegistrationToken); !ok || tok.RunID != "run-7-1" || tok.Label != label {
		t.Errorf("i-1's registration token %+v (%v), want one for run-7-1 with label %s", tok, ok, label)
	}

	asked := len(runs.jobs)
	if res := e.reap(); len(res.RevivedRuns) != 0 {
		t.Errorf("the next reap revived %v again", res.RevivedRuns)
	}
	if len(runs.jobs) != asked {
		t.Errorf("the next reap listed jobs %q again, want the marker revived for attempt 2 asked about no more", runs.jobs[asked:])
	}
}

// A newer attempt without a job queued for the claim's label ("Re-run
// all jobs" claims anew, with a new label), or no newer attempt at all,
// revives nothing; a claim without a workflow run leaves no marker.
func TestReapRevivesNothingWithoutAJobQueuedForTheLabel(t *testing.T) {
	t.Parallel()
	e, gh, runs := runsEnv(t, "")
	gh.StartRunAttempt("octo/app", 7, 1)
	gh.StartRunAttempt("octo/app", 8, 1)
	label := e.releasedForRerun(t, "i-1")
	e.claimForRun("run-8-1", "i-2", 8)
	if _, err := e.c.Release(context.Background(), poolworld.Pool, "run-8-1"); err != nil {
		t.Fatal(err)
	}
	e.claimForRun("local-run", "i-3", 0)
	if _, err := e.c.Release(context.Background(), poolworld.Pool, "local-run"); err != nil {
		t.Fatal(err)
	}
	if e.DB.Get(protocol.TypeReleased, "local-run") != nil {
		t.Error("a claim without a workflow run left a marker")
	}
	gh.CompleteRunAttempt("octo/app", 7, 1)
	gh.StartRunAttempt("octo/app", 7, 2)
	gh.QueueRunJob("octo/app", 7, 2, protocol.NewLabel("run-7-2"))
	gh.StartJob("octo/app", 7, 2, "i-9", time.Now()) // the job of the label runs
	gh.QueueRunJob("octo/app", 8, 1, label)          // not a newer attempt
	if res := e.reap(); len(res.RevivedRuns) != 0 {
		t.Errorf("revived %v", res.RevivedRuns)
	}
	if want := []string{"attempt 2 of workflow run 7 of octo/app"}; !slices.Equal(runs.jobs, want) {
		t.Errorf("listed the jobs of %q, want only of %q", runs.jobs, want)
	}
	if e.DB.Get(protocol.TypeClaim, "run-7-1") != nil {
		t.Error("a claim record run-7-1 exists")
	}
}

// When GitHub cannot be reached, no claim is revived, and the pass says
// why in the log.
func TestReapRevivesNothingWhenGitHubCannotTell(t *testing.T) {
	t.Parallel()
	gone := httptest.NewServer(nil)
	gone.Close()
	e, gh, runs := runsEnv(t, "")
	gh.StartRunAttempt("octo/app", 7, 1)
	label := e.releasedForRerun(t, "i-1")
	gh.CompleteRunAttempt("octo/app", 7, 1)
	gh.StartRunAttempt("octo/app", 7, 2)
	gh.QueueRunJob("octo/app", 7, 2, label)
	client, err := github.New(github.Config{BaseURL: gone.URL, Token: gh.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	runs.runs = client
	logs := e.captureLogs()
	if res := e.reap(); len(res.RevivedRuns) != 0 {
		t.Errorf("revived %v", res.RevivedRuns)
	}
	if e.DB.Get(protocol.TypeClaim, "run-7-1") != nil {
		t.Error("a claim record run-7-1 exists")
	}
	if !strings.Contains(logs(), "cannot tell whether their runs were re-run") {
		t.Errorf("nothing logged:\n%s", logs())
	}
}
