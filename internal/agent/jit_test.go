package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agenttest"
)

// machineLog records, in order, what the agent did to the machine: ended
// the runner user's processes, wiped it, started a just-in-time runner.
type machineLog struct {
	mu      sync.Mutex
	entries []string
}

func (l *machineLog) add(entry string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, entry)
}

func (l *machineLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

type loggedHost struct {
	*agenttest.Host
	log       *machineLog
	wipeFails error
}

func (h loggedHost) EndJobs(ctx context.Context) error {
	h.log.add("end jobs")
	return h.Host.EndJobs(ctx)
}

func (h loggedHost) Wipe(ctx context.Context) error {
	h.log.add("wipe")
	if h.wipeFails != nil {
		return h.wipeFails
	}
	return h.Host.Wipe(ctx)
}

type loggedRunner struct {
	*agenttest.Runner
	log *machineLog
}

func (r loggedRunner) StartJIT(ctx context.Context, config string) error {
	r.log.add("start " + config)
	return r.Runner.StartJIT(ctx, config)
}

// jitWorld is a world whose agent has the pool's broker, its machine's
// doings logged.
type jitWorld struct {
	*world
	broker *agenttest.Broker
	log    *machineLog
	label  string // run-1's
	secret string // of run-1's grant
}

func newJITWorld(t *testing.T) *jitWorld {
	w := &jitWorld{world: newWorld(t), broker: &agenttest.Broker{}, log: &machineLog{}, label: protocol.NewLabel("run-1")}
	w.deps.Broker = w.broker
	w.deps.Host = loggedHost{Host: w.host, log: w.log}
	w.deps.Runner = loggedRunner{Runner: w.runner, log: w.log}
	w.runner.Install(context.Background(), agent.Archive{Version: "2.331.0"})
	return w
}

// grant hands the instance a registration grant, as a claim through the
// broker does; it returns its secret.
func (w *jitWorld) grant(runID, grantTarget, label string, expires time.Time) string {
	secret := protocol.NewGrantSecret()
	w.table.Put(protocol.RegistrationGrant{InstanceARN: arn, Grant: secret, ExpiresAt: expires, RunID: runID, Target: grantTarget, Label: label,
		UpdatedAt: protocol.FormatTime(w.clock.Now())}.Item())
	return secret
}

// serving boots the agent and has it claimed for run-1 through the broker.
func (w *jitWorld) serving() *agent.Agent {
	w.t.Helper()
	a := w.agent("")
	if err := a.Boot(context.Background(), nil); err != nil {
		w.t.Fatal(err)
	}
	w.record(protocol.StateClaimed, "run-1", w.clock.Now().Add(5*time.Minute))
	w.secret = w.grant("run-1", target, w.label, w.clock.Now().Add(time.Hour))
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalRegistered, "run-1")
	return a
}

// Two jobs of one run start on two registrations, each minted with the
// run's grant: the first before UD_REG_OK (with the grant's label), the
// second once the first job's runner exited, after every process of the
// job ended and the runner user was wiped, while the record still names
// the run. Leaving the run stops the runner and has the broker delete the
// last registration, then wipes, and signals as a release does.
func TestTwoJobsOfARunStartOnTwoRegistrations(t *testing.T) {
	w := newJITWorld(t)
	a := w.serving()
	if s := w.signal(); s.Label != w.label {
		t.Errorf("UD_REG_OK with label %q, want the grant's", s.Label)
	}
	w.clock.Sleep(context.Background(), time.Minute) // the first job runs
	w.runner.EndJob()
	a.Poll(context.Background())

	minted := w.broker.Minted()
	if len(minted) != 2 || minted[0].RunnerID == minted[1].RunnerID || minted[0].RunnerName == minted[1].RunnerName {
		t.Fatalf("minted %+v, want two registrations", minted)
	}
	for i, g := range w.broker.Presented() {
		if g.Grant != w.secret || g.RunID != "run-1" || g.InstanceARN != arn {
			t.Errorf("mint %d presented grant %+v, want run-1's", i+1, g)
		}
	}
	if got := w.runner.JITConfigs(); !slices.Equal(got, []string{minted[0].EncodedJITConfig, minted[1].EncodedJITConfig}) {
		t.Errorf("runners started with %v, want one per registration, in order", got)
	}
	log := w.log.get()
	first, second := slices.Index(log, "start "+minted[0].EncodedJITConfig), slices.Index(log, "start "+minted[1].EncodedJITConfig)
	between := log[first+1 : second]
	if !slices.Contains(between, "end jobs") || !slices.Contains(between, "wipe") || slices.Index(between, "wipe") < slices.Index(between, "end jobs") {
		t.Errorf("between the two jobs the machine saw %v; want the jobs ended, then the runner user wiped", between)
	}
	w.wantSignal(protocol.SignalRegistered, "run-1")
	if w.runner.Registered() != nil {
		t.Error("a registration token was used")
	}

	w.record(protocol.StateIdle, "", w.clock.Now().Add(5*time.Minute))
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalReleased, "run-1")
	if got := w.broker.Deregistered(); !slices.Equal(got, []int64{minted[1].RunnerID}) {
		t.Errorf("deleted %v, want the last registration %d", got, minted[1].RunnerID)
	}
	if w.runner.Running() {
		t.Error("the runner still runs after the release")
	}
	if log := w.log.get(); log[len(log)-1] != "wipe" {
		t.Errorf("the release ended with %v, want the wipe last", log)
	}
}

// While the job's runner runs, nothing is minted; a runner that exits at
// once waits longer and longer for the next (it most likely ran no job), up
// to the runner check interval, instead of minting in a loop.
func TestRunnersThatExitAtOnceBackOff(t *testing.T) {
	w := newJITWorld(t)
	a := w.serving()
	a.Poll(context.Background())
	if n := len(w.broker.Minted()); n != 1 {
		t.Fatalf("%d registrations while the first job runs", n)
	}
	for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		minted := len(w.broker.Minted())
		w.runner.EndJob()
		if next := a.Poll(context.Background()); next != wait {
			t.Errorf("after a runner that exited at once: poll again in %s, want %s", next, wait)
		}
		if len(w.broker.Minted()) != minted {
			t.Fatal("minted at once after a runner that exited at once")
		}
		w.clock.Sleep(context.Background(), wait)
		a.Poll(context.Background())
		if len(w.broker.Minted()) != minted+1 {
			t.Fatalf("no registration %s after the runner exited", wait)
		}
	}
	w.clock.Sleep(context.Background(), time.Minute) // a job that ran
	w.runner.EndJob()
	a.Poll(context.Background())
	if n := len(w.runner.JITConfigs()); n != 5 {
		t.Errorf("%d runners started; the one after a job must start at once", n)
	}
}

// A registration the broker does not mint is asked for again after a
// wait: the run's next job starts once it is minted.
func TestNextJobWaitsForTheBroker(t *testing.T) {
	w := newJITWorld(t)
	a := w.serving()
	w.clock.Sleep(context.Background(), time.Minute)
	w.broker.RegisterFails = errors.New("GitHub is down")
	w.runner.EndJob()
	a.Poll(context.Background())
	if n := len(w.runner.JITConfigs()); n != 1 {
		t.Fatalf("%d runners started without a registration", n)
	}
	w.broker.RegisterFails = nil
	w.clock.Sleep(context.Background(), time.Second)
	a.Poll(context.Background())
	if n := len(w.runner.JITConfigs()); n != 2 || len(w.ec2.terminated) != 0 {
		t.Errorf("%d runners started, terminated %v; want the next job's runner once minted", n, w.ec2.terminated)
	}
}

// A runner user that cannot be wiped between two jobs retires the
// instance: no job starts where another left traces.
func TestUnwipedRunnerUserRetiresTheInstance(t *testing.T) {
	w := newJITWorld(t)
	w.deps.Host = loggedHost{Host: w.host, log: w.log, wipeFails: errors.New("a file survives")}
	a := w.serving()
	w.clock.Sleep(context.Background(), time.Minute)
	w.runner.EndJob()
	a.Poll(context.Background())
	if n := len(w.runner.JITConfigs()); n != 1 || !slices.Equal(w.ec2.terminated, []string{id}) {
		t.Errorf("%d runners started, terminated %v; want the instance retired before a second runner", n, w.ec2.terminated)
	}
}

// A grant for another run (a stale one), for a target of another owner,
// or about to expire, is not used: the registration token handed for the
// run is, and without one the registration fails. An agent without a
// broker uses no grant at all.
func TestGrantOfAnotherRunOrStaleIsNotUsed(t *testing.T) {
	for name, tc := range map[string]struct {
		runID, target string
		expires       time.Duration
		noBroker      bool
	}{
		"another run":               {runID: "run-0", target: target, expires: time.Hour},
		"another owner":             {runID: "run-1", target: "mallory/app", expires: time.Hour},
		"expiring":                  {runID: "run-1", target: target, expires: 30 * time.Second},
		"an agent without a broker": {runID: "run-1", target: target, expires: time.Hour, noBroker: true},
	} {
		t.Run(name, func(t *testing.T) {
			for _, withToken := range []bool{false, true} {
				w := newJITWorld(t)
				if tc.noBroker {
					w.deps.Broker = nil
				}
				a := w.agent("")
				if err := a.Boot(context.Background(), nil); err != nil {
					t.Fatal(err)
				}
				w.record(protocol.StateClaimed, "run-1", w.clock.Now().Add(5*time.Minute))
				w.grant(tc.runID, tc.target, protocol.NewLabel(tc.runID), w.clock.Now().Add(tc.expires))
				if withToken {
					w.token(protocol.SortKeyRegistrationToken, "run-1", target, w.clock.Now().Add(time.Hour))
				}
				a.Poll(context.Background())
				if len(w.broker.Presented()) != 0 {
					t.Fatalf("the grant was presented: %+v", w.broker.Presented())
				}
				if !withToken {
					w.wantSignal(protocol.SignalRegistrationFailed, "run-1")
					continue
				}
				w.wantSignal(protocol.SignalRegistered, "run-1")
				if reg := w.runner.Registered(); reg == nil || reg.Token != "T-run-1" {
					t.Errorf("registration %+v, want run-1's token", reg)
				}
			}
		})
	}
}

// With a broker, a run claimed directly (a registration token, no grant)
// is served as before: one registration for the run, removed with the
// removal token when it leaves; the broker is never asked.
func TestDirectClaimUnchangedWithABroker(t *testing.T) {
	w := newJITWorld(t)
	a := w.agent("")
	if err := a.Boot(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	w.record(protocol.StateClaimed, "run-1", w.clock.Now().Add(5*time.Minute))
	w.token(protocol.SortKeyRegistrationToken, "run-1", target, w.clock.Now().Add(time.Hour))
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalRegistered, "run-1")
	if reg := w.runner.Registered(); reg == nil || reg.Token != "T-run-1" || reg.Name != id {
		t.Fatalf("registration %+v, want run-1's token", reg)
	}
	w.record(protocol.StateIdle, "", w.clock.Now().Add(5*time.Minute))
	w.token(protocol.SortKeyRemovalToken, "run-1", target, w.clock.Now().Add(time.Hour))
	a.Poll(context.Background())
	w.wantSignal(protocol.SignalReleased, "run-1")
	if w.runner.Registered() != nil {
		t.Error("the runner was not removed with the removal token")
	}
	if len(w.broker.Presented())+len(w.broker.Deregistered()) != 0 || len(w.runner.JITConfigs()) != 0 {
		t.Errorf("the broker was asked: %+v, %v", w.broker.Presented(), w.broker.Deregistered())
	}
}

// The serving loop acts as soon as the job's runner exits, not at the next
// poll of its record (here an hour away): the next job's runner starts
// after the wait a runner that exited at once gets, a second.
func TestNextJobStartsWhenTheRunnerExits(t *testing.T) {
	w := newJITWorld(t)
	w.deps.Clock = agent.SystemClock{}
	w.cfg.Intervals.ReleasePoll = protocol.Duration(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.record(protocol.StateClaimed, "run-1", time.Now().Add(5*time.Minute))
	w.grant("run-1", target, w.label, time.Now().Add(time.Hour))
	done := make(chan struct{})
	go func() { defer close(done); w.agent("").Run(ctx) }()
	defer func() { cancel(); <-done }()
	await(t, "the first job's runner", func() bool { return len(w.runner.JITConfigs()) == 1 })
	w.runner.EndJob()
	await(t, "the second job's runner", func() bool { return len(w.runner.JITConfigs()) == 2 })
}

// await waits up to 10 s for cond.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
	}
}

// The grant's secret never reaches the log.
func TestGrantStaysOutOfTheLog(t *testing.T) {
	w := newJITWorld(t)
	var logged strings.Builder
	w.deps.Logf = func(format string, args ...any) { fmt.Fprintf(&logged, format+"\n", args...) }
	w.serving()
	if strings.Contains(logged.String(), w.secret) || strings.Contains(logged.String(), w.label) {
		t.Errorf("the log shows the grant's secret or label:\n%s", logged.String())
	}
}
