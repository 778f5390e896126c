package agentscript_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

const (
	region = "us-east-1"
	class  = scripttest.SeedClass
	owner  = "octo"
	repo   = "app"
)

var (
	endpoint  string
	clients   scripttest.Clients
	stsClient *sts.Client
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	ctx := context.Background()
	ep, stop, err := emulator.Ensure(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent script tests need the AWS emulator:", err)
		return 1
	}
	defer stop()
	// With EC2RUNNERS_AWS_CALLS set, the agents' calls are recorded for the
	// policy check (each instance's role credentials are its own).
	ep, stopRecording, err := awsrecord.Start(ctx, ep, "agentscript")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopRecording()
	endpoint = ep
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region), config.WithBaseEndpoint(ep),
		config.WithCredentialsProvider(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		})))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	clients = scripttest.Clients{DynamoDB: dynamodb.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg), EC2: ec2.NewFromConfig(cfg)}
	stsClient = sts.NewFromConfig(cfg)
	return m.Run()
}

// fixture is one pool with one instance in EC2 whose agent is the script,
// run in the instance stand-in, and a claimer that mints the runners'
// tokens from the stub GitHub, as the provider does.
type fixture struct {
	t          testing.TB
	env        *scripttest.Env
	pool       string
	repository string // of the pool's GitHub target; "": organization runners
	instanceID string
	usageClass string // the instance's: on-demand, or spot
	arnPrefix  string // of the pool's instances, from its config item
	queueURL   string
	claimer    *claim.Claimer
	inst       *scripttest.Instance
	image      scripttest.InstanceConfig // what the instance's image holds and reaches beside its id and tags
	// runnerGroup is the runner group its claims ask for ("": the default).
	runnerGroup string
	labels      map[string]string // the label of each run's runners, by run id
}

// newFixture makes a pool registering runners with owner/repository (with
// owner alone when repository is "") and an on-demand instance with tags.
func newFixture(t *testing.T, repository string, tags map[string]string) *fixture {
	return newFixtureOf(t, protocol.UsageOnDemand, repository, tags)
}

// newFixtureOf is newFixture for an instance of usageClass.
func newFixtureOf(t *testing.T, usageClass, repository string, tags map[string]string) *fixture {
	t.Parallel()
	return setUpFixture(t, usageClass, repository, tags)
}

// setUpFixture is newFixtureOf for a test or a benchmark.
func setUpFixture(t testing.TB, usageClass, repository string, tags map[string]string) *fixture {
	ctx := context.Background()
	f := &fixture{t: t, env: scripttest.NewEnv(t, endpoint, region), pool: "agent-" + randomHex(4), repository: repository, usageClass: usageClass,
		labels: map[string]string{}}
	m := &pool.Manager{DynamoDB: clients.DynamoDB, SQS: clients.SQS, EC2: clients.EC2, STS: stsClient, Region: region}
	st, err := m.Create(ctx, pool.Spec{
		Name:            f.pool,
		ResourceClasses: map[string]protocol.ResourceClass{class: {CPU: 2, MemoryMiB: 4096}},
		IdleTimeout:     10 * time.Minute, MaxRuntime: 30 * time.Minute,
		GitHub: &protocol.GitHubTarget{Owner: owner, Repository: repository},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Delete(context.Background(), f.pool, true); err != nil {
			t.Errorf("deleting the pool: %v", err)
		}
	})
	f.queueURL, f.arnPrefix = st.QueueURLs[class], st.Config.InstanceARNPrefix
	launch := scripttest.LaunchInstance
	if usageClass == protocol.UsageSpot {
		launch = scripttest.LaunchSpotInstance
	}
	if f.instanceID, err = launch(ctx, clients, f.pool, tags); err != nil {
		t.Fatal(err)
	}
	gh, err := github.New(github.Config{BaseURL: f.env.GitHub.URL, Token: f.env.GitHub.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	f.claimer = &claim.Claimer{
		DynamoDB: clients.DynamoDB, SQS: clients.SQS, EC2: clients.EC2,
		GitHub: &claim.GitHubAccess{Tokens: gh, Releases: gh, Owner: owner, Repository: repository},
	}
	return f
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// options renders the script for the pool's GitHub target.
func (f *fixture) options() agentscript.Options { return f.env.Options(f.pool, owner, f.repository) }

// start runs the user data in the instance stand-in, as EC2 runs it.
func (f *fixture) start(o agentscript.Options, tags map[string]string) *scripttest.Instance {
	c := f.image
	c.InstanceID, c.Tags = f.instanceID, tags
	f.inst = f.env.StartInstance(f.t, o, c)
	return f.inst
}

// awaitServing waits until the agent has prepared the instance and waits
// for claims: a warm runner in the pool has done so long before.
func (f *fixture) awaitServing() {
	f.t.Helper()
	await.Until(f.t, "the agent ready for claims", func() bool { return strings.Contains(f.inst.Output(), "ready: waiting for a claim") })
}

// arn is the instance's ARN.
func (f *fixture) arn() string { return protocol.InstanceARN(f.arnPrefix, f.instanceID) }

// putToken hands the instance a registration token for runID and target,
// with a new label for the run and runner group (""; the default), as a
// claim would, issued by the stub GitHub.
func (f *fixture) putToken(target, runID, group string) {
	value, expires := f.env.GitHub.IssueToken("registration-token", target)
	f.labels[runID] = protocol.NewLabel(runID)
	item := protocol.RunnerToken{
		InstanceARN: f.arn(), SortKey: protocol.SortKeyRegistrationToken, Token: value, ExpiresAt: expires, RunID: runID, Target: target,
		Label: f.labels[runID], RunnerGroup: group, UpdatedAt: protocol.FormatTime(time.Now()),
	}.Item()
	if _, err := clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.pool), Item: item}); err != nil {
		f.t.Fatal(err)
	}
}

// label is the label of runID's runners, which its claim or token made.
func (f *fixture) label(runID string) string {
	f.t.Helper()
	label, ok := f.labels[runID]
	if !ok {
		f.t.Fatalf("no claim or token made a label for run %s", runID)
	}
	return label
}

func (f *fixture) putRecord(state, runID string, threshold time.Time) {
	if err := scripttest.PutRecord(context.Background(), clients, f.pool, f.queueURL, f.instanceID, state, runID, threshold); err != nil {
		f.t.Fatal(err)
	}
}

// putIdle writes the instance's record idle and unowned until threshold,
// and, when stopUntil is not zero, in the pool's stopped tier from then
// until stopUntil, as the provider writes a runner it keeps stopped. The
// stopped tier's runners are started by claims, not taken from the queue:
// no message.
func (f *fixture) putIdle(threshold, stopUntil time.Time) {
	rec := scripttest.Record(f.instanceID, protocol.StateIdle, "", threshold)
	rec.UsageClass = f.usageClass
	if !stopUntil.IsZero() {
		rec.StopUntil = protocol.FormatTime(stopUntil)
	}
	if err := scripttest.PutInstance(context.Background(), clients, f.pool, rec); err != nil {
		f.t.Fatal(err)
	}
}

// ec2State is the instance's state in EC2.
func (f *fixture) ec2State() (ec2types.InstanceStateName, error) {
	out, err := clients.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{f.instanceID}})
	if err != nil {
		return "", err
	}
	return out.Reservations[0].Instances[0].State.Name, nil
}

// awaitEC2State waits until EC2 says the instance is in one of states.
func (f *fixture) awaitEC2State(states ...ec2types.InstanceStateName) {
	f.t.Helper()
	await.True(f.t, fmt.Sprintf("the instance %v in EC2", states), func() error {
		st, err := f.ec2State()
		if err == nil && !slices.Contains(states, st) {
			err = fmt.Errorf("instance is %s", st)
		}
		return err
	})
}

// get reads the item sk of the instance's agent partition.
func (f *fixture) get(sk string) map[string]string {
	out, err := clients.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(f.pool), Key: protocol.AgentKey(f.arn(), sk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	got := map[string]string{"updatedAt": protocol.StringAttr(out.Item, protocol.AttrUpdatedAt)}
	if s, ok := protocol.SignalFromItem(out.Item); ok {
		got["state"], got["runId"] = s.State, s.RunID
	}
	return got
}

func (f *fixture) waitSignal(state, runID string) {
	f.t.Helper()
	await.True(f.t, fmt.Sprintf("signal %s for run %s", state, runID), func() error {
		if s := f.get(protocol.SortKeySignal); s["state"] != state || s["runId"] != runID {
			return fmt.Errorf("last signal %v", s)
		}
		return nil
	})
}

// heartbeats are the updatedAt of every heartbeat the agent wrote, in order.
func (f *fixture) heartbeats() []string {
	return f.env.Proxy.Written("HEARTBEAT", protocol.AttrUpdatedAt)
}

// checkSignatures asserts that every AWS request the agent made carried a
// signature AWS would accept, and that the named calls happened.
func (f *fixture) checkSignatures(calls ...string) {
	f.t.Helper()
	if fails := f.env.Proxy.Failures(); len(fails) > 0 {
		f.t.Errorf("%d requests with a bad signature, first: %s", len(fails), fails[0])
	}
	verified := f.env.Proxy.Verified()
	for _, c := range calls {
		if verified[c] == 0 {
			f.t.Errorf("no signed %s request seen (verified: %v)", c, verified)
		}
	}
}

// claim claims the instance for runID, waiting as long as a loaded machine
// may need for the agent to register.
func (f *fixture) claim(runID string) (*claim.Result, error) {
	timings := claim.DefaultTimings()
	timings.RegistrationWait = await.Patience
	res, err := f.claimer.Create(context.Background(), claim.Request{
		Pool: f.pool, RunID: runID, RunnerGroup: f.runnerGroup, InstanceCount: 1, ResourceClass: class, UsageClass: protocol.UsageOnDemand, AllowedTypes: []string{"*"}, Timings: timings,
	})
	if err == nil {
		f.labels[runID] = res.Label
	}
	return res, err
}

// The agent as EC2 runs it, in the instance stand-in: the user data, run as
// root, installs the unit and starts it; the agent reads the instance
// metadata at 169.254.169.254 and heartbeats to the emulator from inside the
// instance's network namespace; each claim registers a runner whose job
// runs as the runner user the script created; each release stops it,
// removes it from GitHub and puts the instance back in the queue.
func TestInstance_servesClaimsAsEC2RunsIt(t *testing.T) {
	f := newFixture(t, repo, nil)
	t.Cleanup(func() { checkInstanceGone(t, f.inst) }) // after the instance's own cleanup
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	inst := f.start(f.options(), nil)
	o := inst.Options

	await.True(t, "the user data to finish", func() error {
		if status, exited := inst.UserDataExit(); !exited {
			return errors.New("still running")
		} else if status != 0 {
			return fmt.Errorf("exit status %d", status)
		}
		return nil
	})
	if got, want := inst.SystemctlCalls(), []string{"daemon-reload", "enable --now ec2runners-agent.service"}; !slices.Equal(got, want) {
		t.Errorf("systemctl calls = %q, want %q", got, want)
	}
	unit, err := os.ReadFile(filepath.Join(o.SystemdDir, scripttest.AgentUnit))
	if err != nil || !strings.Contains(string(unit), "ExecStart="+o.AgentPath+" run -config "+o.ConfigPath+"\n") ||
		!strings.Contains(string(unit), "Restart=always") || !strings.Contains(string(unit), "Delegate=yes") {
		t.Errorf("unit file = %q, %v", unit, err)
	}
	checkHeartbeatCadence(t, f, o.HeartbeatInterval)
	if !strings.Contains(inst.Output(), "agent of "+f.instanceID) {
		t.Errorf("the agent did not learn its instance id from the metadata service:\n%s", inst.Output())
	}
	checkIdentityOverIPv6(t, inst)
	f.awaitServing()

	for _, runID := range []string{"run-1", "run-2"} {
		res, err := f.claim(runID)
		if err != nil {
			t.Fatalf("claim %s: %v", runID, err)
		}
		if len(res.Instances) != 1 || res.Instances[0].ID != f.instanceID || res.Reused != 1 {
			t.Fatalf("claim %s = %+v, want the warm instance %s", runID, res, f.instanceID)
		}
		f.waitSignal(protocol.SignalRegistered, runID)
		await.True(t, "the runner online with the label of "+runID, func() error {
			if r, ok := f.env.GitHub.Runners()[f.instanceID]; !ok || r.Labels != f.label(runID) || r.Target != owner+"/"+repo || !r.Running {
				return fmt.Errorf("runner %+v (registered: %t)", r, ok)
			}
			return nil
		})
		checkJob(t, f, runID)
		release(t, f, runID)
		if r, registered := f.env.GitHub.Runners()[f.instanceID]; registered {
			t.Fatalf("after release of %s the runner is still registered: %+v", runID, r)
		}
	}
	want := []string{"download agent " + agentscript.AssetName(scripttest.AgentVersion, runtime.GOARCH), "download runner " + scripttest.RunnerVersion}
	for _, runID := range []string{"run-1", "run-2"} {
		want = append(want, "register "+f.instanceID+" "+f.label(runID), "run "+f.instanceID, "stop "+f.instanceID, "remove "+f.instanceID)
	}
	if got := f.env.GitHub.Events(); !slices.Equal(got, want) {
		t.Errorf("GitHub saw:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	msgs, err := clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil || len(msgs.Messages) != 1 || !strings.Contains(aws.ToString(msgs.Messages[0].Body), f.instanceID) {
		t.Errorf("queue after the last release: %v, %v; want the instance's message", msgs, err)
	}
	f.checkSignatures("dynamodb PutItem", "dynamodb GetItem")
}

// checkHeartbeatCadence: heartbeats keep coming, spaced by about the
// interval, judged from their own timestamps (whole seconds): n beats span
// at least n-1 intervals less the rounding, and on average no more than a
// few seconds beyond the interval.
func checkHeartbeatCadence(t *testing.T, f *fixture, interval time.Duration) {
	t.Helper()
	const n = 6
	await.True(t, fmt.Sprintf("%d heartbeats", n), func() error {
		if got := f.heartbeats(); len(got) < n {
			return fmt.Errorf("%d written: %v", len(got), got)
		}
		return nil
	})
	beats := f.heartbeats()[:n]
	first, err1 := protocol.ParseTime(beats[0])
	last, err2 := protocol.ParseTime(beats[n-1])
	if err1 != nil || err2 != nil {
		t.Fatalf("heartbeat timestamps %v: %v, %v", beats, err1, err2)
	}
	if span := last.Sub(first); span < (n-1)*interval-time.Second || span > (n-1)*(interval+5*time.Second) {
		t.Errorf("%d heartbeats %v span %s, want about %d intervals of %s", n, beats, span, n-1, interval)
	}
}

// checkJob runs a job on the runner of runID: it runs as the runner user,
// in its workspace below the run's runner directory in the runner user's
// home, with a job's environment.
func checkJob(t *testing.T, f *fixture, runID string) {
	t.Helper()
	job := runJob(t, f, runID, `id -un
echo "GITHUB_ACTIONS=$GITHUB_ACTIONS"
echo "HOME=$HOME"
echo "PWD=$PWD"
echo "GITHUB_WORKSPACE=$GITHUB_WORKSPACE"
echo "RUNNER_TEMP=$RUNNER_TEMP"
`)
	home := "/home/" + f.inst.RunnerUser
	work := home + "/runner/_work"
	want := strings.Join([]string{
		f.inst.RunnerUser,
		"GITHUB_ACTIONS=true",
		"HOME=" + home,
		"PWD=" + work + "/" + repo + "/" + repo,
		"GITHUB_WORKSPACE=" + work + "/" + repo + "/" + repo,
		"RUNNER_TEMP=" + work + "/_temp",
	}, "\n") + "\n"
	if job.ExitCode != 0 || job.Output != want || job.Runner != f.instanceID {
		t.Errorf("job ran on %q with exit code %d and output:\n%s\nwant exit code 0 on %s and:\n%s", job.Runner, job.ExitCode, job.Output, f.instanceID, want)
	}
}

// checkIdentityOverIPv6 reads the instance identity document inside the
// instance, from the metadata service's IPv6 address: the emulator's account
// and the image the instance was launched from.
func checkIdentityOverIPv6(t *testing.T, inst *scripttest.Instance) {
	t.Helper()
	caller, err := stsClient.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	image, err := emulator.Image(context.Background(), clients.EC2)
	if err != nil {
		t.Fatal(err)
	}
	out, err := inst.Command("bash", "-c", `imds=http://[fd00:ec2::254]/latest
		token=$(curl -gsSf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$imds/api/token") &&
		curl -gsSf -H "X-aws-ec2-metadata-token: $token" "$imds/dynamic/instance-identity/document"`).CombinedOutput()
	for _, want := range []string{`"accountId" : "` + aws.ToString(caller.Account) + `"`, `"imageId" : "` + image + `"`,
		`"instanceId" : "` + inst.ID + `"`, `"region" : "` + region + `"`} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("identity document over IPv6: %v\n%s\nwant %s in it", err, out, want)
		}
	}
}

// checkInstanceGone checks that the instance's cleanup left nothing behind.
func checkInstanceGone(t *testing.T, inst *scripttest.Instance) {
	if inst == nil {
		return
	}
	if _, err := user.Lookup(inst.RunnerUser); err == nil {
		t.Errorf("the runner user %s outlived the instance", inst.RunnerUser)
	}
	for _, path := range []string{inst.Root, "/home/" + inst.RunnerUser} {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s outlived the instance", path)
		}
	}
}

// A fresh fleet instance: the pre-runner script runs once, as root, and
// UD_OK is signalled for the InitialRunId tag; then it registers for that
// run at organization level, as the claim's created record asks.
func TestInstance_fleetInstanceRegistersForInitialRun(t *testing.T) {
	tags := map[string]string{protocol.TagInitialRunID: "run-0"}
	f := newFixture(t, "", tags)
	f.env.GitHub.AddRunnerGroup(owner, "Trusted builds", scripttest.GroupAccess{})
	f.putToken(owner, "run-0", "Trusted builds")
	f.putRecord(protocol.StateCreated, "run-0", time.Now().Add(10*time.Minute))
	o := f.options()
	marker := filepath.Join(markerDir(t), "pre-runner-ran") // /tmp is the instance's own
	o.PreRunnerScript = "id -un >> " + marker
	inst := f.start(o, tags)
	f.waitSignal(protocol.SignalRegistered, "run-0")
	if r := f.env.GitHub.Runners()[f.instanceID]; r.Target != owner || r.Labels != f.label("run-0") || r.Group != "Trusted builds" {
		t.Errorf("runner = %+v, want organization %s with label %s in Trusted builds", r, owner, f.label("run-0"))
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "root\n" {
		t.Errorf("pre-runner script output %q, %v; want it run once, as root", b, err)
	}
	if !strings.Contains(inst.Output(), "signal UD_OK for run run-0") {
		t.Errorf("no UD_OK for run-0 in the agent's log:\n%s", inst.Output())
	}
	f.checkSignatures("dynamodb PutItem", "dynamodb GetItem")
}

// markerDir is a directory both the test and the instance see.
func markerDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/var/tmp", "ec2runners-marker-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// A failing pre-runner script signals UD_FAILED and the instance goes
// silent: no more heartbeats, no registration.
func TestInstance_preRunnerFailureSignalsUDFailed(t *testing.T) {
	tags := map[string]string{protocol.TagInitialRunID: "run-0"}
	f := newFixture(t, repo, tags)
	f.putToken(owner+"/"+repo, "run-0", "")
	f.putRecord(protocol.StateCreated, "run-0", time.Now().Add(10*time.Minute))
	o := f.options()
	o.PreRunnerScript = "echo provisioning failed >&2; exit 3"
	f.start(o, tags)
	f.waitSignal(protocol.SignalUserDataFailed, "run-0")
	// The agent stops heartbeating before it signals; a beat already on the
	// wire may still land.
	before := len(f.heartbeats())
	time.Sleep(3 * o.HeartbeatInterval)
	if after := len(f.heartbeats()); after > before+1 {
		t.Errorf("%d heartbeats in the %s after UD_FAILED: they went on", after-before, 3*o.HeartbeatInterval)
	}
	if s := f.get(protocol.SortKeySignal); s["state"] != protocol.SignalUserDataFailed {
		t.Errorf("signal = %v, want UD_FAILED to stay the last", s)
	}
	if n := len(f.env.GitHub.Runners()); n != 0 {
		t.Errorf("%d runners registered after UD_FAILED", n)
	}
}

// Past its threshold (plus the grace) the instance terminates itself in EC2,
// and the agent ends, unless its record keeps it in the pool's stopped tier
// and EC2 stops it: without a stopped time, or past it, it terminates; and
// so does a Spot instance in the stopped tier, which EC2 refuses to stop
// (the stand-in's proxy answers UnsupportedOperation for Spot instances, as
// EC2 does: the emulator would stop it).
func TestInstance_terminatesItselfPastThreshold(t *testing.T) {
	for _, tc := range []struct {
		name       string
		usageClass string
		stopUntil  time.Duration // from now; 0: none
	}{
		{"noStoppedTime", protocol.UsageOnDemand, 0},
		{"stoppedTimeOver", protocol.UsageOnDemand, -time.Minute},
		{"spotInTheStoppedTier", protocol.UsageSpot, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureOf(t, tc.usageClass, repo, nil)
			var stopUntil time.Time
			if tc.stopUntil != 0 {
				stopUntil = time.Now().Add(tc.stopUntil)
			}
			f.putIdle(time.Now().Add(-2*time.Minute), stopUntil)
			inst := f.start(f.options(), nil)
			f.awaitEC2State(ec2types.InstanceStateNameTerminated, ec2types.InstanceStateNameShuttingDown)
			await.Done(t, "the agent ending after terminating its instance", inst.Done())
			f.checkSignatures("ec2 TerminateInstances")
			stops := f.env.Proxy.Verified()["ec2 StopInstances"]
			if tc.usageClass != protocol.UsageSpot {
				if stops != 0 {
					t.Errorf("%d StopInstances calls; want none outside the stopped tier", stops)
				}
				return
			}
			if stops == 0 || !strings.Contains(inst.Output(), "UnsupportedOperation") {
				t.Errorf("%d StopInstances calls; want one, refused with UnsupportedOperation in the agent's log:\n%s", stops, inst.Output())
			}
		})
	}
}

// A registration GitHub refuses (as it refuses a runner group the
// organization does not have), or one without a token handed for the run
// and the agent's own target, signals UD_REG_FAILED, which fails the claim
// at once.
func TestInstance_registrationFailureSignalsUDRegFailed(t *testing.T) {
	for _, tc := range []struct {
		name, log      string
		poolRepository string // "": the organization's runners
		refuse         bool
		runnerGroup    string
	}{
		{"refused", "config.sh failed", repo, true, ""},
		// The pool registers with another repository than the agent's: the
		// claim hands it a token for that one, which it must not use.
		{"tokenOfAnotherTarget", "no TOKEN#REGISTER token for run run-1 and octo/app", "other", false, ""},
		{"missingRunnerGroup", `could not find any self-hosted runner group named "Untrusted"`, "", false, "Untrusted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.poolRepository, nil)
			f.env.GitHub.RefuseRegistrations(tc.refuse)
			f.runnerGroup = tc.runnerGroup
			agentRepository := repo
			if tc.poolRepository == "" {
				agentRepository = ""
			}
			o := f.env.Options(f.pool, owner, agentRepository)
			o.Intervals.TokenWait = protocol.Duration(2 * time.Second) // the claim writes it first: none later
			f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
			inst := f.start(o, nil)
			f.awaitServing()
			_, err := f.claim("run-1")
			if err == nil || !strings.Contains(err.Error(), protocol.SignalRegistrationFailed) {
				t.Fatalf("claim error = %v, want one naming %s", err, protocol.SignalRegistrationFailed)
			}
			if !strings.Contains(inst.Output(), tc.log) {
				t.Errorf("agent log lacks %q:\n%s", tc.log, inst.Output())
			}
			if slices.ContainsFunc(f.env.GitHub.Events(), func(e string) bool { return strings.HasPrefix(e, "register ") }) {
				t.Errorf("a runner got registered: %v", f.env.GitHub.Events())
			}
		})
	}
}
