package agentscript_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript/scripttest"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
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

// fixture is one pool with one instance in EC2 whose agent is the script.
type fixture struct {
	t          *testing.T
	env        *scripttest.Env
	pool       string
	instanceID string
	arnPrefix  string // of the pool's instances, from its config item
	queueURL   string
	claimer    *claim.Claimer
}

func newFixture(t *testing.T, tags map[string]string) *fixture {
	t.Parallel()
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	f := &fixture{t: t, env: scripttest.NewEnv(t, endpoint, region), pool: "agent-" + hex.EncodeToString(b)}
	m := &pool.Manager{DynamoDB: clients.DynamoDB, SQS: clients.SQS, EC2: clients.EC2, STS: stsClient, Region: region}
	st, err := m.Create(ctx, pool.Spec{
		Name:            f.pool,
		ResourceClasses: map[string]protocol.ResourceClass{class: {CPU: 2, MemoryMiB: 4096}},
		IdleTimeout:     10 * time.Minute, MaxRuntime: 30 * time.Minute,
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
	if f.instanceID, err = scripttest.LaunchInstance(ctx, clients, f.pool, tags); err != nil {
		t.Fatal(err)
	}
	f.claimer = &claim.Claimer{DynamoDB: clients.DynamoDB, SQS: clients.SQS, EC2: clients.EC2}
	return f
}

// arn is the instance's ARN.
func (f *fixture) arn() string { return protocol.InstanceARN(f.arnPrefix, f.instanceID) }

// putTokens hands the instance its registration and removal tokens for
// runID, as a claim and its release would, with tokens the stub GitHub
// issued for target.
func (f *fixture) putTokens(target, runID string) {
	for kind, sk := range map[string]string{"registration-token": protocol.SortKeyRegistrationToken, "remove-token": protocol.SortKeyRemovalToken} {
		value, expires := f.env.GitHub.IssueToken(kind, target)
		item := protocol.RunnerToken{
			InstanceARN: f.arn(), SortKey: sk, Token: value, ExpiresAt: expires, RunID: runID, Target: target, UpdatedAt: protocol.FormatTime(time.Now()),
		}.Item()
		if _, err := clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.pool), Item: item}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) putRecord(state, runID string, threshold time.Time) {
	if err := scripttest.PutRecord(context.Background(), clients, f.pool, f.queueURL, f.instanceID, state, runID, threshold); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) start(o agentscript.Options, tags map[string]string) *scripttest.Agent {
	return scripttest.StartAgent(f.t, o, scripttest.NewIMDS(f.t, f.arn(), tags))
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
	return f.claimer.Create(context.Background(), claim.Request{
		Pool: f.pool, RunID: runID, InstanceCount: 1, ResourceClass: class, UsageClass: protocol.UsageOnDemand, AllowedTypes: []string{"*"}, Timings: timings,
	})
}

// A warm runner served by the real script: heartbeats, then for each claim a
// registration under the run id, and on release the runner stopped, removed
// from GitHub and the instance back in the queue for the next claim.
func TestAgent_servesClaimsAndReleases(t *testing.T) {
	f := newFixture(t, nil)
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	o := f.env.Options(t, f.pool, owner, repo)
	f.start(o, nil)

	// Heartbeats keep coming, spaced by about the interval, judged from
	// their own timestamps (whole seconds): n beats span at least n-1
	// intervals less the rounding, and on average no more than a few
	// seconds beyond the interval.
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
	span, interval := last.Sub(first), o.HeartbeatInterval
	if span < (n-1)*interval-time.Second || span > (n-1)*(interval+5*time.Second) {
		t.Errorf("%d heartbeats %v span %s, want about %d intervals of %s", n, beats, span, n-1, interval)
	}

	for _, runID := range []string{"run-1", "run-2"} {
		f.putTokens(owner+"/"+repo, runID)
		res, err := f.claim(runID)
		if err != nil {
			t.Fatalf("claim %s: %v", runID, err)
		}
		if len(res.Instances) != 1 || res.Instances[0].ID != f.instanceID || res.Reused != 1 {
			t.Fatalf("claim %s = %+v, want the warm instance %s", runID, res, f.instanceID)
		}
		f.waitSignal(protocol.SignalRegistered, runID)
		await.True(t, "the runner online with label "+runID, func() error {
			if r, ok := f.env.GitHub.Runners()[f.instanceID]; !ok || r.Labels != runID || r.Target != owner+"/"+repo || !r.Running {
				return fmt.Errorf("runner %+v (registered: %t)", r, ok)
			}
			return nil
		})

		outcomes, err := f.claimer.Release(context.Background(), f.pool, runID)
		if err != nil {
			t.Fatalf("release %s: %v (%v)", runID, err, outcomes)
		}
		f.waitSignal(protocol.SignalReleased, runID)
		if r, registered := f.env.GitHub.Runners()[f.instanceID]; registered {
			t.Fatalf("after release of %s the runner is still registered: %+v", runID, r)
		}
	}
	want := []string{"register " + f.instanceID + " run-1", "run " + f.instanceID, "stop " + f.instanceID, "remove " + f.instanceID}
	want = append(want, strings.ReplaceAll(strings.Join(want, "\n"), "run-1", "run-2"))
	got := strings.Join(f.env.GitHub.Events(), "\n")
	if wantAll := strings.Join(want[:4], "\n") + "\n" + want[4]; got != wantAll {
		t.Errorf("GitHub saw:\n%s\nwant:\n%s", got, wantAll)
	}
	msgs, err := clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil || len(msgs.Messages) != 1 || !strings.Contains(aws.ToString(msgs.Messages[0].Body), f.instanceID) {
		t.Errorf("queue after the last release: %v, %v; want the instance's message", msgs, err)
	}
	f.checkSignatures("dynamodb PutItem", "dynamodb GetItem")
}

// A fresh fleet instance: the pre-runner script runs once and UD_OK is
// signalled for the InitialRunId tag, then it registers for that run at
// organization level, as the claim's created record asks.
func TestAgent_fleetInstanceRegistersForInitialRun(t *testing.T) {
	tags := map[string]string{protocol.TagInitialRunID: "run-0"}
	f := newFixture(t, tags)
	f.putTokens(owner, "run-0")
	f.putRecord(protocol.StateCreated, "run-0", time.Now().Add(10*time.Minute))
	o := f.env.Options(t, f.pool, owner, "")
	marker := filepath.Join(t.TempDir(), "pre-runner-ran")
	o.PreRunnerScript = "echo ran >> " + marker
	a := f.start(o, tags)
	f.waitSignal(protocol.SignalRegistered, "run-0")
	if r := f.env.GitHub.Runners()[f.instanceID]; r.Target != owner || r.Labels != "run-0" {
		t.Errorf("runner = %+v, want organization %s with label run-0", r, owner)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "ran\n" {
		t.Errorf("pre-runner script output %q, %v; want it run once", b, err)
	}
	if !strings.Contains(a.Output(), "signal UD_OK for run run-0") {
		t.Errorf("no UD_OK for run-0 in the agent's log:\n%s", a.Output())
	}
	f.checkSignatures("dynamodb PutItem", "dynamodb GetItem")
}

// A failing pre-runner script signals UD_FAILED and the instance goes
// silent: no more heartbeats, no registration.
func TestAgent_preRunnerFailureSignalsUDFailed(t *testing.T) {
	tags := map[string]string{protocol.TagInitialRunID: "run-0"}
	f := newFixture(t, tags)
	f.putTokens(owner+"/"+repo, "run-0")
	f.putRecord(protocol.StateCreated, "run-0", time.Now().Add(10*time.Minute))
	o := f.env.Options(t, f.pool, owner, repo)
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

// Past its threshold (plus the minute of grace) the instance terminates
// itself in EC2, and the agent ends.
func TestAgent_terminatesItselfPastThreshold(t *testing.T) {
	f := newFixture(t, nil)
	f.putRecord(protocol.StateIdle, "", time.Now().Add(-2*time.Minute))
	a := f.start(f.env.Options(t, f.pool, owner, repo), nil)
	await.True(t, "the instance terminated in EC2", func() error {
		out, err := clients.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{f.instanceID}})
		if err != nil {
			return err
		}
		if st := out.Reservations[0].Instances[0].State.Name; st != ec2types.InstanceStateNameTerminated && st != ec2types.InstanceStateNameShuttingDown {
			return fmt.Errorf("instance is %s", st)
		}
		return nil
	})
	await.Done(t, "the agent ending after terminating its instance", a.Done())
	f.checkSignatures("ec2 TerminateInstances")
}

// A registration GitHub refuses, or one without a token handed for the run
// and the agent's target, signals UD_REG_FAILED, which fails the claim at
// once.
func TestAgent_registrationFailureSignalsUDRegFailed(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		setup     func(*fixture)
	}{
		{"refused", "config.sh failed", func(f *fixture) {
			f.putTokens(owner+"/"+repo, "run-1")
			f.env.GitHub.RefuseRegistrations(true)
		}},
		{"noToken", "configure the provider's github block", func(*fixture) {}},
		{"tokenOfAnotherRun", "no TOKEN#REGISTER token for run run-1", func(f *fixture) { f.putTokens(owner+"/"+repo, "run-0") }},
		{"tokenOfAnotherTarget", "no TOKEN#REGISTER token for run run-1 and octo/app", func(f *fixture) { f.putTokens("mallory/"+repo, "run-1") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			tc.setup(f)
			f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
			a := f.start(f.env.Options(t, f.pool, owner, repo), nil)
			await.Until(t, "a first heartbeat", func() bool { return f.get(protocol.SortKeyHeartbeat)["updatedAt"] != "" })
			_, err := f.claim("run-1")
			if err == nil || !strings.Contains(err.Error(), protocol.SignalRegistrationFailed) {
				t.Fatalf("claim error = %v, want one naming %s", err, protocol.SignalRegistrationFailed)
			}
			if !strings.Contains(a.Output(), tc.log) {
				t.Errorf("agent log lacks %q:\n%s", tc.log, a.Output())
			}
			if slices.ContainsFunc(f.env.GitHub.Events(), func(e string) bool { return strings.HasPrefix(e, "register ") }) {
				t.Errorf("a runner got registered: %v", f.env.GitHub.Events())
			}
		})
	}
}

// As user data, the script installs itself as a systemd service and starts it.
func TestAgent_installsSystemdService(t *testing.T) {
	t.Parallel()
	env := scripttest.NewEnv(t, endpoint, region)
	o := env.Options(t, "ci-runners", owner, repo)
	script, err := agentscript.Render(o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	userData := filepath.Join(dir, "user-data")
	calls := filepath.Join(dir, "systemctl.calls")
	if err := os.WriteFile(userData, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(o.SystemdDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho \"$*\" >> "+calls+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := scripttest.Command(userData)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("user data: %v\n%s", err, out)
	}
	if installed, err := os.ReadFile(o.AgentPath); err != nil || string(installed) != script {
		t.Errorf("installed agent differs from the user data (%v)", err)
	}
	unit, err := os.ReadFile(filepath.Join(o.SystemdDir, "ec2runners-agent.service"))
	if err != nil || !strings.Contains(string(unit), "ExecStart="+o.AgentPath+" run\n") || !strings.Contains(string(unit), "Restart=always") {
		t.Errorf("unit file = %q, %v", unit, err)
	}
	if got, _ := os.ReadFile(calls); string(got) != "daemon-reload\nenable --now ec2runners-agent.service\n" {
		t.Errorf("systemctl calls = %q", got)
	}
}
