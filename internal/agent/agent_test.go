package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agenttest"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

const (
	pool   = "pool1"
	id     = "i-0123456789abcdef0"
	arn    = "arn:aws:ec2:eu-west-1:123456789012:instance/" + id
	target = "octo/app"
	digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// clock is a clock the test moves; Sleep moves it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// instances records what the agent asked of EC2.
type instances struct {
	mu                  sync.Mutex
	terminated, stopped []string
	stopErr             error
}

func (e *instances) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.terminated = append(e.terminated, in.InstanceIds...)
	return &ec2.TerminateInstancesOutput{}, nil
}

func (e *instances) StopInstances(_ context.Context, in *ec2.StopInstancesInput, _ ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopErr != nil {
		return nil, e.stopErr
	}
	e.stopped = append(e.stopped, in.InstanceIds...)
	return &ec2.StopInstancesOutput{}, nil
}

// releases is a Releases with one release.
type releases struct{ newest protocol.RunnerRelease }

func (r releases) Newest(context.Context) (protocol.RunnerRelease, error) { return r.newest, nil }

// world is one agent on a machine of agenttest, with the table in memory.
type world struct {
	t      *testing.T
	table  *awsfake.Table
	ec2    *instances
	clock  *clock
	host   *agenttest.Host
	runner *agenttest.Runner
	events []agent.Event
	cfg    agent.Config
	deps   agent.Deps
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, table: awsfake.NewTable(pool), ec2: &instances{}, clock: &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)},
		host: &agenttest.Host{}, runner: &agenttest.Runner{}}
	w.cfg = agent.Config{Pool: pool, Region: "eu-west-1", GitHubURL: "https://github.com", GitHubTarget: target, RunnerUser: "runner",
		Intervals: agent.Intervals{TokenWait: protocol.Duration(5 * time.Second), SelfTerminationGrace: protocol.Duration(time.Minute)}}
	w.deps = agent.Deps{Table: w.table, EC2: w.ec2, Clock: w.clock, Host: w.host, Runner: w.runner,
		Background: func(f func()) { f() }, Logf: t.Logf, OnEvent: func(e agent.Event) { w.events = append(w.events, e) }}
	return w
}

func (w *world) agent(initialRunID string) *agent.Agent {
	return agent.New(w.cfg, agent.Identity{InstanceID: id, InstanceARN: arn, InitialRunID: initialRunID}, w.deps)
}

func (w *world) record(state, runID string, threshold time.Time) {
	w.table.Put(protocol.Instance{ID: id, State: state, RunID: runID, Threshold: protocol.FormatTime(threshold),
		ResourceClass: "large", InstanceType: "m7i.large", UsageClass: protocol.UsageOnDemand, UpdatedAt: protocol.FormatTime(w.clock.Now())}.Item())
}

func (w *world) token(sk, runID, tokenTarget string, expires time.Time) {
	w.table.Put(protocol.RunnerToken{InstanceARN: arn, SortKey: sk, Token: "T-" + runID, ExpiresAt: expires, RunID: runID,
		Target: tokenTarget, UpdatedAt: protocol.FormatTime(w.clock.Now())}.Item())
}

func (w *world) tell(version, minimum string) {
	w.table.Put(protocol.RunnerReleaseItem{InstanceARN: arn, Minimum: minimum, UpdatedAt: protocol.FormatTime(w.clock.Now()),
		Release: protocol.RunnerRelease{Version: version, PublishedAt: w.clock.Now(), SHA256: map[string]string{"linux-x64": digest, "linux-arm64": digest}}}.Item())
}

func (w *world) signal() protocol.Signal {
	s, _ := protocol.SignalFromItem(w.table.GetKey(protocol.AgentKey(arn, protocol.SortKeySignal)))
	return s
}

func (w *world) wantSignal(state, runID string) {
	w.t.Helper()
	if s := w.signal(); s.State != state || s.RunID != runID {
		w.t.Fatalf("signal %s for %q, want %s for %q (events %v)", s.State, s.RunID, state, runID, w.events)
	}
}

// A run is served with the token handed for it and the agent's target: one
// for another run or target, or about to expire, is not used, and none
// within the token wait fails the registration; the release removes the
// runner with the removal token of the run it leaves.
func TestServesARunWithItsOwnToken(t *testing.T) {
	w := newWorld(t)
	w.runner.Install(context.Background(), agent.Archive{Version: "2.331.0"})
	a := w.agent("")
	if err := a.Boot(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	w.record(protocol.StateClaimed, "run-1", w.clock.Now().Add(5*time.Minute))
	w.token(protocol.SortKeyRegistrationToken, "run-0", target, w.clock.Now().Add(time.Hour))
	w.token(protocol.SortKeyRegistrationToken, "run-1", "mallory/app", w.clock.Now().Add(time.Hour))
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalRegistrationFailed, "run-1")
	if w.runner.Registered() != nil {
		t.Fatal("registered with a token of another run or target")
	}

	w.record(protocol.StateClaimed, "run-2", w.clock.Now().Add(5*time.Minute))
	w.token(protocol.SortKeyRegistrationToken, "run-2", target, w.clock.Now().Add(30*time.Second)) // expires within the minute
	a.Poll(context.Background())                                                                   // leaves run-1
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalRegistrationFailed, "run-2")

	w.record(protocol.StateClaimed, "run-3", w.clock.Now().Add(5*time.Minute))
	w.token(protocol.SortKeyRegistrationToken, "run-3", target, w.clock.Now().Add(time.Hour))
	a.Poll(context.Background())
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalRegistered, "run-3")
	if reg := w.runner.Registered(); reg == nil || reg.Token != "T-run-3" || reg.Label != "run-3" || reg.Name != id || reg.URL != "https://github.com/octo/app" {
		t.Fatalf("registration %+v", reg)
	}

	w.record(protocol.StateIdle, "", w.clock.Now().Add(5*time.Minute))
	w.token(protocol.SortKeyRemovalToken, "run-3", target, w.clock.Now().Add(time.Hour))
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalReleased, "run-3")
	if w.runner.Registered() != nil {
		t.Error("the runner was not removed")
	}
}

// An instance without its record waits for it up to the orphan timeout,
// then terminates itself; one whose record is terminated terminates at once.
func TestSelfCheckWaitsForARecord(t *testing.T) {
	w := newWorld(t)
	a := w.agent("")
	for range 5 {
		if end := a.SelfCheck(context.Background()); end != agent.EndNone {
			t.Fatalf("terminated without a record %s after boot", w.clock.Now().Sub(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)))
		}
		w.clock.Sleep(context.Background(), time.Minute)
	}
	w.clock.Sleep(context.Background(), 6*time.Minute)
	if end := a.SelfCheck(context.Background()); end != agent.EndTerminated || len(w.ec2.terminated) != 1 {
		t.Fatalf("end %v, terminated %v past the orphan timeout", end, w.ec2.terminated)
	}

	w = newWorld(t)
	w.record(protocol.StateTerminated, "", w.clock.Now().Add(time.Hour))
	if end := w.agent("").SelfCheck(context.Background()); end != agent.EndTerminated {
		t.Errorf("a terminated record: end %v", end)
	}
}

// Past its threshold and the grace, a runner of the stopped tier stops its
// instance once prepared (terminating it when EC2 refuses), and any other
// terminates it.
func TestSelfCheckPastItsThreshold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stopUntil time.Duration // from now; 0: none
		stopErr   error
		want      agent.End
	}{
		{"idle", 0, nil, agent.EndTerminated},
		{"stoppedTier", time.Hour, nil, agent.EndStopped},
		{"stopRefused", time.Hour, errors.New("UnsupportedOperation"), agent.EndTerminated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.ec2.stopErr = tc.stopErr
			w.runner.Install(context.Background(), agent.Archive{Version: "2.331.0"})
			rec := protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: protocol.FormatTime(w.clock.Now().Add(-2 * time.Minute)),
				UpdatedAt: protocol.FormatTime(w.clock.Now())}
			if tc.stopUntil != 0 {
				rec.StopUntil = protocol.FormatTime(w.clock.Now().Add(tc.stopUntil))
			}
			w.table.Put(rec.Item())
			a := w.agent("")
			if err := a.Boot(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if end := a.SelfCheck(context.Background()); end != tc.want {
				t.Errorf("end %v, want %v", end, tc.want)
			}
		})
	}
}

// A boot installs the release the pool told it of, checked against GitHub's
// digest; without one it asks GitHub; a pinned version is installed as
// pinned; a release without a digest for this machine is not installed,
// and the boot fails with UD_FAILED for its InitialRunId.
func TestBootInstallsTheRunner(t *testing.T) {
	newest := protocol.RunnerRelease{Version: "2.331.0", SHA256: map[string]string{"linux-x64": digest, "linux-arm64": digest}}
	for _, tc := range []struct {
		name    string
		prepare func(w *world)
		want    string // version installed; "": none, the boot fails
	}{
		{"told", func(w *world) { w.tell("2.332.0", "2.331.0") }, "2.332.0"},
		{"asked", func(w *world) { w.deps.Releases = releases{newest} }, "2.331.0"},
		{"pinned", func(w *world) { w.cfg.Runner.Version = "2.330.0" }, "2.330.0"},
		{"noDigest", func(w *world) { w.deps.Releases = releases{protocol.RunnerRelease{Version: "2.331.0"}} }, ""},
		{"nothingToAsk", func(*world) {}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.prepare(w)
			err := w.agent("fill-1").Boot(context.Background(), nil)
			if got := w.runner.Installed(); got != tc.want || (err == nil) != (tc.want != "") {
				t.Fatalf("installed %q (boot: %v), want %q", got, err, tc.want)
			}
			want := protocol.SignalUserDataOK
			if tc.want == "" {
				want = protocol.SignalUserDataFailed
			}
			w.wantSignal(want, "fill-1")
		})
	}
}

// A failed boot writes no heartbeat after its UD_FAILED.
func TestNoHeartbeatAfterAFailedBoot(t *testing.T) {
	w := newWorld(t)
	a := w.agent("run-0")
	if err := a.Boot(context.Background(), errors.New("no firewall")); err == nil {
		t.Fatal("a boot with the walls down prepared the instance")
	}
	if err := a.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if hb := w.table.GetKey(protocol.AgentKey(arn, protocol.SortKeyHeartbeat)); hb != nil {
		t.Errorf("a heartbeat after UD_FAILED: %v", hb)
	}
	w.wantSignal(protocol.SignalUserDataFailed, "run-0")
}

// While idle, an agent updates its runner to the release the pool told it
// of; a pinned version never changes; the heartbeat tells the version.
func TestIdleAgentUpdatesItsRunner(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		w := newWorld(t)
		if pinned {
			w.cfg.Runner.Version = "2.330.0"
		}
		w.runner.Install(context.Background(), agent.Archive{Version: "2.330.0"})
		w.record(protocol.StateIdle, "", w.clock.Now().Add(10*time.Minute))
		a := w.agent("")
		if err := a.Boot(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		w.tell("2.331.0", "2.330.0")
		a.Poll(context.Background())
		want := "2.331.0"
		if pinned {
			want = "2.330.0"
		}
		if got := w.runner.Installed(); got != want {
			t.Errorf("pinned %v: installed %s, want %s", pinned, got, want)
		}
		if err := a.Heartbeat(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := protocol.HeartbeatRunnerVersion(w.table.GetKey(protocol.AgentKey(arn, protocol.SortKeyHeartbeat))); got != want {
			t.Errorf("pinned %v: the heartbeat tells %q, want %s", pinned, got, want)
		}
	}
}

// A runner older than GitHub accepts, as the pool told it with the run's
// token, does not register: the claim replaces it.
func TestOutdatedRunnerDoesNotRegister(t *testing.T) {
	w := newWorld(t)
	w.cfg.Runner.Version = "2.330.0" // pinned: it cannot update
	w.runner.Install(context.Background(), agent.Archive{Version: "2.330.0"})
	a := w.agent("")
	if err := a.Boot(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	w.tell("2.332.0", "2.331.0")
	w.record(protocol.StateClaimed, "run-1", w.clock.Now().Add(5*time.Minute))
	w.token(protocol.SortKeyRegistrationToken, "run-1", target, w.clock.Now().Add(time.Hour))
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalRegistrationFailed, "run-1")
	if w.runner.Registered() != nil {
		t.Error("an outdated runner registered")
	}
	if last := w.events[len(w.events)-1]; !strings.Contains(last.Detail, "older than GitHub accepts") {
		t.Errorf("last event %+v", last)
	}
}

// servingRun boots an agent with runner 2.331.0 installed (pinned when
// pinned) and GitHub's newest release 2.332.0, and registers it for run-1.
func (w *world) servingRun(pinned bool) *agent.Agent {
	w.t.Helper()
	w.deps.Releases = releases{protocol.RunnerRelease{Version: "2.332.0", SHA256: map[string]string{"linux-x64": digest, "linux-arm64": digest}}}
	if pinned {
		w.cfg.Runner.Version = "2.331.0"
	}
	w.runner.Install(context.Background(), agent.Archive{Version: "2.331.0"})
	a := w.agent("")
	if err := a.Boot(context.Background(), nil); err != nil {
		w.t.Fatal(err)
	}
	w.record(protocol.StateClaimed, "run-1", w.clock.Now().Add(5*time.Minute))
	w.token(protocol.SortKeyRegistrationToken, "run-1", target, w.clock.Now().Add(time.Hour))
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalRegistered, "run-1")
	return a
}

// A runner that stops while it serves a run (GitHub refuses it after a
// critical security release no date foretells) starts again, on the newest
// release GitHub publishes when that is newer and the runner is not
// pinned; a running runner is never started again.
func TestStoppedRunnerStartsAgainOnGitHubsNewest(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		w := newWorld(t)
		a := w.servingRun(pinned)
		a.Poll(context.Background())
		if n := w.runner.Restarts(); n != 0 || w.runner.Installed() != "2.331.0" {
			t.Fatalf("pinned %v: a running runner was started again %d times, on %s", pinned, n, w.runner.Installed())
		}
		w.runner.RefuseOlderThan = "2.332.0"
		a.Poll(context.Background())
		want := "2.332.0"
		if pinned {
			want = "2.331.0"
		}
		if got, n := w.runner.Installed(), w.runner.Restarts(); got != want || n != 1 {
			t.Errorf("pinned %v: started again %d times on %s, want once on %s", pinned, n, got, want)
		}
		if w.runner.Running() == pinned {
			t.Errorf("pinned %v: running %v after the restart", pinned, w.runner.Running())
		}
	}
}

// A runner that keeps stopping (a pinned one GitHub refuses) starts again
// once per runner check interval, not at every poll.
func TestRunnerThatKeepsStoppingStartsAgainOncePerCheck(t *testing.T) {
	w := newWorld(t)
	a := w.servingRun(true)
	w.runner.RefuseOlderThan = "2.332.0"
	for range 5 {
		a.Poll(context.Background())
	}
	if n := w.runner.Restarts(); n != 1 {
		t.Fatalf("started again %d times in five polls, want once", n)
	}
	w.clock.Sleep(context.Background(), agent.DefaultRunnerCheck)
	a.Poll(context.Background())
	if n := w.runner.Restarts(); n != 2 {
		t.Errorf("started again %d times after a runner check interval, want twice", n)
	}
}

// A runner that cannot start again is retired with its instance: the
// agent terminates it and writes no heartbeat after.
func TestRunnerThatCannotStartAgainIsRetired(t *testing.T) {
	w := newWorld(t)
	a := w.servingRun(true)
	w.runner.RefuseOlderThan = "2.332.0"
	w.runner.RestartFails = errors.New("the installation differs from what was installed")
	a.Poll(context.Background())
	if len(w.ec2.terminated) != 1 || w.ec2.terminated[0] != id {
		t.Fatalf("terminated %v, want the instance", w.ec2.terminated)
	}
	if err := a.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if hb := w.table.GetKey(protocol.AgentKey(arn, protocol.SortKeyHeartbeat)); hb != nil {
		t.Errorf("a heartbeat after the runner was retired: %v", hb)
	}
	a.Poll(context.Background())
	if n := w.runner.Restarts(); n != 1 {
		t.Errorf("a retired runner was started %d times, want once", n)
	}
}

// An organization's runner registers with the label and in the runner
// group its registration token names, signals UD_REG_OK with that label
// (the claim checks it), and never logs the label: the instance's console
// output may show the log.
func TestRegistersWithTheTokensLabelAndGroup(t *testing.T) {
	w := newWorld(t)
	w.cfg.GitHubTarget = "octo"
	var logs []string
	w.deps.Logf = func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }
	w.runner.Install(context.Background(), agent.Archive{Version: "2.331.0"})
	a := w.agent("")
	if err := a.Boot(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	const label = "run-1-abcdefgh23456"
	w.record(protocol.StateClaimed, "run-1", w.clock.Now().Add(5*time.Minute))
	w.table.Put(protocol.RunnerToken{InstanceARN: arn, SortKey: protocol.SortKeyRegistrationToken, Token: "T-run-1", ExpiresAt: w.clock.Now().Add(time.Hour),
		RunID: "run-1", Target: "octo", Label: label, RunnerGroup: "Trusted builds", UpdatedAt: protocol.FormatTime(w.clock.Now())}.Item())
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalRegistered, "run-1")
	if s := w.signal(); s.Label != label {
		t.Errorf("UD_REG_OK names label %q, want %q", s.Label, label)
	}
	if reg := w.runner.Registered(); reg == nil || reg.Label != label || reg.RunnerGroup != "Trusted builds" || reg.URL != "https://github.com/octo" {
		t.Fatalf("registration %+v, want label %s in Trusted builds at https://github.com/octo", reg, label)
	}
	if all := strings.Join(logs, "\n"); strings.Contains(all, "abcdefgh23456") || !strings.Contains(all, "Trusted builds") {
		t.Errorf("the agent's log shows the label's secret, or not the group:\n%s", all)
	}
}

// An organization's agent registers at one repository of the organization
// when its token says so (a claim through the pool's broker registers its
// runners with its own repository), and uses no token for a repository of
// another owner, nor, as a repository's agent, for another repository.
func TestRegistersAtTheTokensRepositoryOfItsOrganization(t *testing.T) {
	cases := []struct {
		name, agentTarget, tokenTarget, wantURL string
	}{
		{"organization agent, its repository", "octo", "octo/app", "https://github.com/octo/app"},
		{"organization agent, another owner's repository", "octo", "evil/app", ""},
		{"repository agent, another repository", "octo/app", "octo/other", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			w.cfg.GitHubTarget = c.agentTarget
			w.cfg.Intervals.TokenWait = protocol.Duration(3 * time.Second)
			w.runner.Install(context.Background(), agent.Archive{Version: "2.331.0"})
			a := w.agent("")
			if err := a.Boot(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			w.record(protocol.StateClaimed, "run-1", w.clock.Now().Add(5*time.Minute))
			w.table.Put(protocol.RunnerToken{InstanceARN: arn, SortKey: protocol.SortKeyRegistrationToken, Token: "T-run-1", ExpiresAt: w.clock.Now().Add(time.Hour),
				RunID: "run-1", Target: c.tokenTarget, Label: "run-1-abcdefgh23456", UpdatedAt: protocol.FormatTime(w.clock.Now())}.Item())
			a.Poll(context.Background())
			reg := w.runner.Registered()
			switch {
			case c.wantURL == "" && reg != nil:
				t.Fatalf("registered at %s with a token for %s, want no registration", reg.URL, c.tokenTarget)
			case c.wantURL != "" && (reg == nil || reg.URL != c.wantURL):
				t.Fatalf("registration %+v, want one at %s", reg, c.wantURL)
			}
		})
	}
}
