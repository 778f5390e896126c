package claim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// releasesOf is a ReleaseSource with these releases.
type releasesOf []protocol.RunnerRelease

func (r releasesOf) RunnerReleases(context.Context) ([]protocol.RunnerRelease, error) { return r, nil }

// grantRequest is a claim of the test run made through the broker for
// repository.
func grantRequest(repository string) Request {
	return Request{Pool: testPool, RunID: testRun, Label: protocol.NewLabel(testRun), Repository: repository}
}

// Each runner gets a grant of its own (its own secret) for the claim's
// run, repository and label, expiring past any run of the claim, with the
// runner release GitHub's policy asks for; and the claim asks GitHub for
// nothing but the releases.
func TestGrantHandedToEachRunnerWithASecretOfItsOwn(t *testing.T) {
	t.Parallel()
	src := &fakeTokens{}
	e := tokenEnv(t, src)
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	e.c.Now = func() time.Time { return now }
	newest := protocol.RunnerRelease{Version: "2.331.0", PublishedAt: now.Add(-24 * time.Hour), SHA256: map[string]string{"linux-x64": strings.Repeat("a", 64)}}
	e.c.GitHub.Releases = releasesOf{newest}
	req := grantRequest("octo/app")
	g, err := e.c.newGrant(context.Background(), e.cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"i-00", "i-01"}
	if err := e.c.store(testPool).handGrant(context.Background(), testARNPrefix, ids, g); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]bool{}
	for _, id := range ids {
		got, err := protocol.RegistrationGrantFromItem(e.db.getAgent(id, protocol.SortKeyRegistrationGrant))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		want := protocol.RegistrationGrant{InstanceARN: arn(id), Grant: got.Grant, ExpiresAt: now.Add(maxRunTime + 5*24*time.Hour),
			RunID: testRun, Target: "octo/app", Label: req.Label, UpdatedAt: protocol.FormatTime(now)}
		if got != want {
			t.Errorf("%s's grant %+v, want %+v", id, got, want)
		}
		secrets[got.Grant] = true
		told, err := protocol.RunnerReleaseFromItem(e.db.getAgent(id, protocol.SortKeyRunnerRelease))
		if err != nil || told.Release.Version != newest.Version {
			t.Errorf("%s was told runner release %+v (%v), want %s", id, told, err, newest.Version)
		}
	}
	if len(secrets) != len(ids) {
		t.Errorf("%d secrets for %d runners: each needs its own", len(secrets), len(ids))
	}
	if calls := src.Issued(); len(calls) != 0 {
		t.Errorf("GitHub was asked for tokens %v: a grant needs none", calls)
	}
}

// A grant registers runners with a repository the pool registers at, with
// a label that holds a secret; anything else is refused, naming it.
func TestGrantRefused(t *testing.T) {
	t.Parallel()
	e := tokenEnv(t, nil)
	for name, tc := range map[string]struct {
		req  Request
		want string
	}{
		"another owner":          {grantRequest("mallory/app"), "repository mallory/app is not one it registers runners at"},
		"another repository":     {grantRequest("octo/other"), "repository octo/other is not one it registers runners at"},
		"no repository":          {grantRequest(""), `repository "" must be a GitHub repository's full name`},
		"a label without secret": {Request{Pool: testPool, RunID: testRun, Label: testRun, Repository: "octo/app"}, "needs a label with a secret"},
	} {
		if _, err := e.c.newGrant(context.Background(), e.cfg, tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
	e.cfg.GitHub.Repository = ""
	if _, err := e.c.newGrant(context.Background(), e.cfg, grantRequest("octo/other")); err != nil {
		t.Errorf("a repository of the pool's organization: %v", err)
	}
	e.cfg.GitHub = nil
	if g, err := e.c.newGrant(context.Background(), e.cfg, grantRequest("octo/app")); g != nil || err != nil {
		t.Errorf("a pool without GitHub: grant %+v, %v; want none, as its runners register nowhere", g, err)
	}
}

// The broker reads a claim record as the claim wrote it.
func TestRecordFromItem(t *testing.T) {
	t.Parallel()
	req := grantRequest("octo/app")
	req.InstanceCount, req.ResourceClass = 1, "large"
	rec, err := RecordFromItem(testPool, Record{Request: req, State: recordPending, Nonce: "n", OwnedIDs: []string{"i-00"}}.Item("2026-11-01T12:00:00Z"))
	if err != nil || rec.Request.Repository != "octo/app" || rec.Request.Label != req.Label || len(rec.OwnedIDs) != 1 || rec.OwnedIDs[0] != "i-00" {
		t.Errorf("RecordFromItem = %+v, %v", rec, err)
	}
}
