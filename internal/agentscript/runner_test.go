package agentscript_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// An image with the agent of the provider's version baked in boots from the
// same short user data without downloading it.
func TestInstance_bootsFromAnAgentInTheImage(t *testing.T) {
	f := newFixture(t, repo, nil)
	f.image.PreinstalledAgent, _ = scripttest.BuildAgent(t)
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	f.start(f.options(), nil)
	f.awaitServing()
	claimAgain(t, f, "run-1")
	if events := f.env.GitHub.Events(); slices.Contains(events, "download agent "+agentscript.AssetName(scripttest.AgentVersion, runtime.GOARCH)) {
		t.Errorf("the agent in the image was downloaded again: %v", events)
	}
}

// runnerVersion is the runner version the instance's heartbeat tells.
func (f *fixture) runnerVersion() string {
	out, err := clients.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(f.pool), Key: protocol.AgentKey(f.arn(), protocol.SortKeyHeartbeat), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return protocol.HeartbeatRunnerVersion(out.Item)
}

// awaitRunnerVersion waits until the heartbeat tells version.
func (f *fixture) awaitRunnerVersion(version string) {
	f.t.Helper()
	await.True(f.t, "the heartbeat telling runner "+version, func() error {
		if got := f.runnerVersion(); got != version {
			return fmt.Errorf("it tells %q", got)
		}
		return nil
	})
}

// A runner release published while a runner waits in the pool reaches it
// with its release (the pool tells it the newest release with the removal
// token), and its agent updates it while it waits: the next claim gets the
// new runner, and never waits for the download.
func TestInstance_idleRunnerUpdatedInThePool(t *testing.T) {
	f := newFixture(t, repo, nil)
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	inst := f.start(f.options(), nil)
	f.awaitServing()
	f.awaitRunnerVersion(scripttest.RunnerVersion)
	claimAgain(t, f, "run-1")
	const newer = "2.332.0"
	f.env.GitHub.PublishRunner(newer, time.Now())
	release(t, f, "run-1")
	f.awaitRunnerVersion(newer)
	claimAgain(t, f, "run-2")
	if r := f.env.GitHub.Runners()[f.instanceID]; r.Version != newer {
		t.Errorf("run-2's runner registered with %q, want the update %s", r.Version, newer)
	}
	checkJob(t, f, "run-2")
	events := f.env.GitHub.Events()
	download, register := slices.Index(events, "download runner "+newer), slices.Index(events, "register "+f.instanceID+" "+f.label("run-2"))
	if download < 0 || register < download {
		t.Errorf("GitHub saw %v; want the download of %s before run-2's registration", events, newer)
	}
	if !strings.Contains(inst.Output(), "updating the GitHub runner from "+scripttest.RunnerVersion+" to "+newer+" while idle") {
		t.Errorf("the agent's log does not tell the update:\n%s", inst.Output())
	}
}

// putRunnerRelease tells the instance the newest runner release of the
// stub GitHub, as a claim or release does.
func (f *fixture) putRunnerRelease() {
	policy := f.env.GitHub.Policy()
	item := protocol.RunnerReleaseItem{InstanceARN: f.arn(), Release: policy.Newest, Minimum: policy.Minimum, UpdatedAt: protocol.FormatTime(time.Now())}.Item()
	if _, err := clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.pool), Item: item}); err != nil {
		f.t.Fatal(err)
	}
}

// A runner GitHub no longer sends jobs to is never handed out: a download
// of the new release that is not what GitHub's digest says is refused, the
// runner stays outdated, and a claim retires it instead of registering it
// (here it fails: the pool has no other runner and no fleet).
func TestInstance_outdatedRunnerNeverHandedOut(t *testing.T) {
	f := newFixture(t, repo, nil)
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	inst := f.start(f.options(), nil)
	f.awaitServing()
	f.awaitRunnerVersion(scripttest.RunnerVersion)
	// A release whose successor came out 40 days ago is outdated.
	const newer = "2.332.0"
	f.env.GitHub.PublishRunner(newer, time.Now().Add(-40*24*time.Hour))
	if f.env.GitHub.Policy().Accepts(scripttest.RunnerVersion) {
		t.Fatalf("the stub still accepts %s: %+v", scripttest.RunnerVersion, f.env.GitHub.Policy())
	}
	f.env.GitHub.TamperRunnerDownloads(true)
	f.putRunnerRelease()
	await.Until(t, "the agent refusing the tampered download", func() bool {
		return strings.Contains(inst.Output(), "has the SHA-256") && strings.Contains(inst.Output(), "not installed")
	})
	_, err := f.claim("run-1")
	if err == nil || !strings.Contains(err.Error(), "older than GitHub accepts") {
		t.Fatalf("claim error = %v, want one that the runner is older than GitHub accepts", err)
	}
	if slices.ContainsFunc(f.env.GitHub.Events(), func(e string) bool { return strings.HasPrefix(e, "register ") }) {
		t.Errorf("an outdated runner registered: %v", f.env.GitHub.Events())
	}
	if v := f.runnerVersion(); v != scripttest.RunnerVersion {
		t.Errorf("the heartbeat tells runner %q, want the outdated %s (the tampered download is not installed)", v, scripttest.RunnerVersion)
	}
}

// After a critical security release of the runner, GitHub refuses older
// runners at once, which no release date foretells: the runner of a run
// already handed out is refused and stops, and its agent installs GitHub's
// newer release and starts the runner again with the run's registration,
// so the run's jobs run.
func TestInstance_runnerRefusedAfterACriticalRelease(t *testing.T) {
	f, inst := startServing(t, "run-1")
	const critical = "2.332.0"
	f.env.GitHub.PublishRunner(critical, time.Now())
	f.env.GitHub.RequireRunner(critical)
	// The runner's next poll is refused before its run has a job.
	await.Until(t, "GitHub refusing the runner", func() bool {
		return slices.Contains(f.env.GitHub.Events(), "deprecated "+f.instanceID+" "+scripttest.RunnerVersion)
	})
	checkJob(t, f, "run-1")
	if !strings.Contains(inst.Output(), "GitHub publishes runner "+critical+", newer than "+scripttest.RunnerVersion) {
		t.Errorf("the agent's log does not tell the update:\n%s", inst.Output())
	}
	f.awaitRunnerVersion(critical)
	release(t, f, "run-1")
}
