package poolworld

// The agents of the pool: the real agent (package agent), one per
// instance, on a machine that touches nothing (package agenttest), driven
// one step at a time by what the claim writes, so that the tests stay
// in-memory and deterministic.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agenttest"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// Behavior is how an instance's agent acts.
type Behavior int

const (
	Healthy              Behavior = iota
	StaleHeartbeat                // dead: its last heartbeat a minute old, it writes nothing
	NoHeartbeat                   // its heartbeats never reach the table; otherwise Healthy
	NeverRegisters                // heartbeats; its registration hangs (no signal for the run, nor after)
	RegistrationFails             // its registration fails: UD_REG_FAILED
	NeverConfirmsRelease          // registers; its deregistration hangs (no signal on release)
	ReleasesWrongRun              // registers; confirms a release, but for another run id
	RegistersLate                 // heartbeats; its registration ends only when its record changes again
)

func (b Behavior) String() string {
	return [...]string{"Healthy", "stale-heartbeat", "no-heartbeat", "never-registers", "registration-fails",
		"never-confirms-release", "releases-wrong-run", "registers-late"}[b]
}

// runnerVersion is the runner the agents install (pinned: none asks GitHub).
const runnerVersion = "2.331.0"

// Agents runs the agents of a test's instances. Each instance has a
// machine (an agenttest Host and Runner, kept across its boots) and, while
// it runs, the real agent of its current boot. The agent acts when the
// table tells of a change of its record (awsfake.Table.AfterInstance, after
// the write and before the write call returns): Boot for an instance's
// first record, then Poll (it registers for the run the record names, or
// releases the one it no longer names) until the record has nothing more
// for it, and SelfCheck when the record keeps it in the stopped tier (a
// fill's runner stops itself). Before every BatchGetItem each running
// agent writes its heartbeat (BeforeBatchGet), as its heartbeat
// loop would have meanwhile; a stopped instance's agent boots again when
// StartInstances starts it (awsfake.EC2.OnStart), and one whose instance
// EC2 terminated is gone with it. An instance has an agent when the test
// seeds its record (World.SeedRecord), or when its first record is written
// through the table's API (a fleet's instance); a record the test writes
// by hand has none, and a hand-written change is not seen (poll makes an
// agent look again).
//
// Every step runs in a goroutine of its own and the hook waits until it
// ends, or parks in the runner (a registration or deregistration that
// hangs or is slow, as its Behavior says): what the agent writes is in the
// table before the claim's write returns, so the tests are deterministic.
// A parked step goes on when the record changes again (a late
// registration), by itself (a slow deregistration; the next step waits for
// it), or never (a hang, until the test ends).
//
// The agents reach the table directly (awsfake.Table.GetKey and Put):
// their calls are not the claim's, so the tests' call counts and injected
// failures stay the claim's, as they were with the hand-written fakes.
type Agents struct {
	t   *testing.T
	db  *awsfake.Table
	ec2 *awsfake.EC2

	ctx    context.Context // the agents': ends with the test
	cancel context.CancelFunc
	steps  sync.WaitGroup

	mu sync.Mutex
	// target: the pool's GitHub target ("": none, no tokens needed).
	target string
	// broker: the pool's broker, which the agents ask for each job's
	// registration when a claim hands them grants (nil: none).
	broker *agenttest.Broker
	// clockSkew: the agents' clocks run this far ahead of the provider's
	// (behind when negative).
	clockSkew time.Duration
	// releaseDelay: each deregistration takes this long, so the release
	// confirmation arrives that much later.
	releaseDelay time.Duration
	behaviors    map[string]Behavior
	machines     map[string]*machine
	signalled    map[string]time.Time // instance -> when its release confirmation was written
	closed       bool
}

func NewAgents(t *testing.T, db *awsfake.Table, ec2 *awsfake.EC2) *Agents {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Agents{t: t, db: db, ec2: ec2, ctx: ctx, cancel: cancel,
		behaviors: map[string]Behavior{}, machines: map[string]*machine{}, signalled: map[string]time.Time{}}
	db.AfterInstance = h.changed
	db.BeforeBatchGet = h.heartbeats
	ec2.OnStart = h.started
	t.Cleanup(func() {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		cancel() // ends the steps that hang
		h.steps.Wait()
	})
	return h
}

// Set makes the agent of id act as b from now on.
func (h *Agents) Set(id string, b Behavior) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.behaviors[id] = b
}

// SetTarget sets the pool's GitHub target the agents are configured with.
func (h *Agents) SetTarget(target string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.target = target
}

// SetBroker gives the agents the pool's broker (nil: none).
func (h *Agents) SetBroker(b *agenttest.Broker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.broker = b
}

// SetClockSkew sets the agents' clocks d ahead of the provider's (behind
// when negative).
func (h *Agents) SetClockSkew(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clockSkew = d
}

// SetReleaseDelay makes each deregistration take d.
func (h *Agents) SetReleaseDelay(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releaseDelay = d
}

// Signalled tells when the release confirmation of id was written.
func (h *Agents) Signalled(id string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.signalled[id]
	return at, ok
}

// Registered is the registration the runner of id holds (nil: none, or
// id has no machine).
func (h *Agents) Registered(id string) *agent.Registration {
	m := h.machine(id, false)
	if m == nil {
		return nil
	}
	return m.runner.Registered()
}

func (h *Agents) get(id string) Behavior {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.behaviors[id]
}

func (h *Agents) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// machine is the instance id's machine; a new one when create, else nil
// when there is none (an instance the test gave no agent).
func (h *Agents) machine(id string, create bool) *machine {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.machines[id]
	if m == nil && create {
		m = &machine{h: h, id: id, host: &agenttest.Host{}, runner: &agenttest.Runner{}}
		h.machines[id] = m
	}
	return m
}

// stopped tells whether EC2 has the instance stopped.
func (h *Agents) stopped(id string) bool {
	h.ec2.Mu.Lock()
	defer h.ec2.Mu.Unlock()
	return h.ec2.Stopped[id]
}

// gone tells whether EC2 terminated the instance: its agent is gone with it.
func (h *Agents) gone(id string) bool {
	h.ec2.Mu.Lock()
	defer h.ec2.Mu.Unlock()
	return slices.Contains(h.ec2.Terminated, id)
}

// initialRunID is the InitialRunId tag of a fleet's instance, when it is a
// run id (as the agent reads it from instance metadata).
func (h *Agents) initialRunID(id string) string {
	h.ec2.Mu.Lock()
	defer h.ec2.Mu.Unlock()
	if tag := h.ec2.InitialRunIDs[id]; protocol.ValidateRunID(tag) == nil {
		return tag
	}
	return ""
}

// changed is the table's AfterInstance: the agent of the instance acts on
// its record.
func (h *Agents) changed(_ context.Context, old, cur protocol.Instance, existed bool) {
	m := h.machine(cur.ID, !existed)
	if m == nil || h.isClosed() {
		return
	}
	m.step.Lock()
	defer m.step.Unlock()
	b := h.get(cur.ID)
	if b == StaleHeartbeat || h.gone(cur.ID) || h.stopped(cur.ID) || !m.settle() {
		return
	}
	if b == ReleasesWrongRun && existed && old.RunID != "" && cur.RunID == "" {
		// A confirmation for another run is no bug the agent's code can
		// have: the harness writes it in the agent's place.
		h.confirm(cur.ID, "some-other-run")
		return
	}
	boot := m.current() == nil
	if boot && existed {
		return // no agent runs there (the instance stopped, or was never booted)
	}
	stoppedTier := cur.State == protocol.StateIdle && cur.StopUntil != ""
	m.run(b, boot, func(ctx context.Context, a *agent.Agent) {
		if boot {
			m.boot(ctx, a)
		}
		poll(ctx, a)
		if stoppedTier && a.SelfCheck(ctx) != agent.EndNone {
			m.ended(a) // it stopped (or terminated) its instance
		}
	})
}

// started is EC2's OnStart: the instance boots, with a new agent.
func (h *Agents) started(id string) {
	m := h.machine(id, false)
	if m == nil || h.isClosed() {
		return
	}
	m.step.Lock()
	defer m.step.Unlock()
	b := h.get(id)
	if b == StaleHeartbeat || !m.settle() {
		return
	}
	m.run(b, true, func(ctx context.Context, a *agent.Agent) {
		m.boot(ctx, a)
		poll(ctx, a)
	})
}

// Seed gives a record the test wrote an agent that has been running for
// long (or, for a stopped instance, a machine that ran one): prepared, its
// runner installed, its heartbeat written, its record acted on.
func (h *Agents) Seed(id string, b Behavior) {
	m := h.machine(id, true)
	m.step.Lock()
	defer m.step.Unlock()
	if err := m.host.Prepare(h.ctx); err != nil {
		h.t.Error(err)
	}
	if err := m.runner.Install(h.ctx, agent.Archive{Version: runnerVersion}); err != nil {
		h.t.Error(err)
	}
	switch {
	case b == StaleHeartbeat:
		// A dead agent is no agent's code: the harness writes the last
		// heartbeat it left.
		h.db.Put(HeartbeatAt(id, time.Now().Add(-time.Minute)))
		return
	case h.stopped(id) || !m.settle():
		return
	}
	m.run(b, true, func(ctx context.Context, a *agent.Agent) {
		m.boot(ctx, a)
		poll(ctx, a)
	})
}

// poll runs the agent's Poll until the record has nothing more for it
// now (Poll asks to be called again at once after a registration or a
// release).
func poll(ctx context.Context, a *agent.Agent) {
	for range 4 {
		if a.Poll(ctx) != 0 {
			return
		}
	}
}

// heartbeats is the table's BeforeBatchGet: every running agent
// writes its heartbeat.
func (h *Agents) heartbeats(context.Context) {
	h.mu.Lock()
	var machines []*machine
	for id, m := range h.machines {
		if !h.closed && h.behaviors[id] != StaleHeartbeat {
			machines = append(machines, m)
		}
	}
	h.mu.Unlock()
	for _, m := range machines {
		if a := m.current(); a != nil && !h.stopped(m.id) && !h.gone(m.id) {
			if err := a.Heartbeat(h.ctx); err != nil && h.ctx.Err() == nil {
				h.t.Errorf("agent of %s: %v", m.id, err)
			}
		}
	}
}

// Poll makes the agent of id look at its record once more, as its serving
// loop does every few hundred milliseconds: for a test that changed the
// record behind the agents' back (a table write the hooks do not see).
func (h *Agents) Poll(id string) {
	m := h.machine(id, false)
	if m == nil {
		h.t.Fatalf("no agent for %s", id)
	}
	m.step.Lock()
	defer m.step.Unlock()
	if m.current() == nil || !m.settle() {
		h.t.Fatalf("the agent of %s does not run", id)
	}
	m.run(h.get(id), false, func(ctx context.Context, a *agent.Agent) { poll(ctx, a) })
}

// confirm writes a release confirmation for runID in the agent of id's
// place.
func (h *Agents) confirm(id, runID string) {
	h.db.Put(SignalItem(id, protocol.SignalDeregistered, runID))
	h.mu.Lock()
	h.signalled[id] = time.Now()
	h.mu.Unlock()
	h.db.Put(SignalItem(id, protocol.SignalReleased, runID))
}

func (h *Agents) config() agent.Config {
	h.mu.Lock()
	defer h.mu.Unlock()
	short := protocol.Duration(10 * time.Millisecond)
	return agent.Config{
		Pool: Pool, GitHubURL: "https://github.com", GitHubTarget: h.target, RunnerUser: "runner", BrokerFunction: brokerFunction(h.broker),
		Runner: agent.RunnerSource{Version: runnerVersion},
		Intervals: agent.Intervals{
			Heartbeat: protocol.Duration(time.Second), SelfCheck: short, ClaimPoll: short, ReleasePoll: short, RunnerCheck: short,
			// Zero takes the default (a minute): a nanosecond is as good as
			// none. A token not there at once is missing, as the claim
			// hands it before the record names the run; a runner past its
			// threshold stops or terminates at once.
			TokenWait: 1, SelfTerminationGrace: 1,
			// OrphanTimeout stays the default: the steps are not timed, and
			// a fill's runner prepares at once.
		},
	}
}

// ---------------------------------------------------------------- machine

// machine is one instance: its Host and Runner, its current agent, and the
// step of the agent under way.
type machine struct {
	h      *Agents
	id     string
	host   *agenttest.Host
	runner *agenttest.Runner
	// Knobs of this harness's runner, set before each step as its
	// Behavior says (with the agenttest Runner's).
	late        bool          // a registration waits until the record changes again
	removeDelay time.Duration // a deregistration takes this long

	step sync.Mutex // held while a step is started and waited for: one at a time

	mu    sync.Mutex
	agent *agent.Agent // of the current boot; nil when none runs
	cur   *stepRun     // the step under way (parked), nil when none
}

func (m *machine) current() *agent.Agent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.agent
}

// ended: the agent a stopped or terminated its instance.
func (m *machine) ended(a *agent.Agent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agent == a {
		m.agent = nil
	}
}

// boot is a boot of the instance: the first heartbeat goes before
// anything slow, then the agent prepares and tells its InitialRunId, as
// Agent.Run does.
func (m *machine) boot(ctx context.Context, a *agent.Agent) {
	_ = a.Heartbeat(ctx)
	if err := a.Boot(ctx, nil); err != nil && ctx.Err() == nil {
		m.h.t.Errorf("agent of %s: %v", m.id, err)
	}
}

// run starts step f of the agent (a new one when boot) in a goroutine and
// waits until it ends or parks. Called with m.step held and no step under
// way.
func (m *machine) run(b Behavior, boot bool, f func(ctx context.Context, a *agent.Agent)) {
	h := m.h
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.steps.Add(1) // before the test's end waits for the steps
	h.mu.Unlock()
	m.apply(b)
	var a *agent.Agent
	if boot {
		a = m.newAgent()
	}
	m.mu.Lock()
	if boot {
		m.agent = a
	}
	a = m.agent
	s := &stepRun{done: make(chan struct{}), parks: make(chan func())}
	m.cur = s
	m.mu.Unlock()
	go func() {
		defer h.steps.Done()
		defer close(s.done)
		f(context.WithValue(h.ctx, stepKey{}, s), a)
	}()
	m.await(s)
}

// settle waits for the step under way to end, going on with it if it is
// parked for the record's next change or waits by itself; false when the
// step hangs for good (the agent is stuck). Called with m.step held.
func (m *machine) settle() bool {
	m.mu.Lock()
	s := m.cur
	m.mu.Unlock()
	if s == nil {
		return true
	}
	if s.stuck {
		return false
	}
	s.resume()
	return m.await(s)
}

// await waits until step s ends (true) or parks (false).
func (m *machine) await(s *stepRun) bool {
	select {
	case <-s.done:
		m.mu.Lock()
		m.cur = nil
		m.mu.Unlock()
		return true
	case resume := <-s.parks:
		s.resume, s.stuck = resume, resume == nil
		return false
	case <-time.After(await.Patience):
		m.h.t.Errorf("a step of the agent of %s neither ended nor parked", m.id)
		s.stuck = true
		return false
	}
}

// apply sets the runner's knobs as b says. Called with no step under way.
func (m *machine) apply(b Behavior) {
	r := m.runner
	r.RegisterFails, r.RegisterHangs, r.RemoveHangs = nil, false, false
	switch b {
	case RegistrationFails:
		r.RegisterFails = agenttest.ErrRefused
	case NeverRegisters:
		r.RegisterHangs = true
	case NeverConfirmsRelease:
		r.RemoveHangs = true
	}
	m.late = b == RegistersLate
	m.h.mu.Lock()
	m.removeDelay = m.h.releaseDelay
	m.h.mu.Unlock()
}

// brokerFunction is the broker's function the agents are configured with:
// none without a broker.
func brokerFunction(b *agenttest.Broker) string {
	if b == nil {
		return ""
	}
	return "ec2runners-" + Pool + "-broker"
}

// brokerDep is the agents' broker dependency: none without one.
func (h *Agents) brokerDep() agent.Broker {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broker == nil {
		return nil
	}
	return h.broker
}

func (m *machine) newAgent() *agent.Agent {
	h := m.h
	return agent.New(h.config(), agent.Identity{InstanceID: m.id, InstanceARN: ARN(m.id), InitialRunID: h.initialRunID(m.id)}, agent.Deps{
		Table: agentTable{m}, EC2: h.ec2, Clock: agentClock{h}, Host: m.host, Runner: harnessRunner{m.runner, m}, Broker: h.brokerDep(),
		Background: func(f func()) { f() },
		Logf: func(format string, args ...any) {
			if !h.isClosed() {
				h.t.Logf("agent %s: %s", m.id, fmt.Sprintf(format, args...))
			}
		},
	})
}

// stepRun is a step of an agent under way.
type stepRun struct {
	done chan struct{}
	// parks: the step parks by sending how it goes on (nil: never).
	parks  chan func()
	resume func()
	stuck  bool
}

type stepKey struct{}

// park parks the step of ctx until resume is called (nil: for good).
func park(ctx context.Context, resume func()) {
	s, _ := ctx.Value(stepKey{}).(*stepRun)
	if s == nil {
		return
	}
	select {
	case s.parks <- resume:
	case <-ctx.Done():
	}
}

// harnessRunner is the machine's agenttest Runner, which parks the step
// that calls it when it hangs (RegisterHangs, RemoveHangs), and waits as
// the harness's knobs say.
type harnessRunner struct {
	*agenttest.Runner
	m *machine
}

func (r harnessRunner) Register(ctx context.Context, reg agent.Registration) error {
	switch {
	case r.RegisterHangs:
		park(ctx, nil)
	case r.m.late:
		next := make(chan struct{})
		park(ctx, func() { close(next) })
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return r.Runner.Register(ctx, reg)
}

func (r harnessRunner) Remove(ctx context.Context, token string) error {
	switch {
	case r.RemoveHangs:
		park(ctx, nil)
	case r.m.removeDelay > 0:
		park(ctx, func() {}) // goes on by itself
		if err := (agent.SystemClock{}).Sleep(ctx, r.m.removeDelay); err != nil {
			return err
		}
	}
	return r.Runner.Remove(ctx, token)
}

// agentClock is the agents' clock: the machine's, skewed.
type agentClock struct{ h *Agents }

func (c agentClock) Now() time.Time {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	return time.Now().Add(c.h.clockSkew)
}

func (c agentClock) Sleep(ctx context.Context, d time.Duration) error {
	return agent.SystemClock{}.Sleep(ctx, d)
}

// agentTable is an agent's way to the table: straight to its items, not
// through the calls the tests count and fail. Heartbeats of an agent whose
// Behavior drops them do not arrive.
type agentTable struct{ m *machine }

func (t agentTable) check(ctx context.Context, table *string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if aws.ToString(table) != protocol.TableName(Pool) {
		return &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
	}
	return nil
}

func (t agentTable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := t.check(ctx, in.TableName); err != nil {
		return nil, err
	}
	return &dynamodb.GetItemOutput{Item: t.m.h.db.GetKey(in.Key)}, nil
}

func (t agentTable) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := t.check(ctx, in.TableName); err != nil {
		return nil, err
	}
	if t.m.h.get(t.m.id) == NoHeartbeat && protocol.StringAttr(in.Item, protocol.AttrSK) == protocol.SortKeyHeartbeat {
		return &dynamodb.PutItemOutput{}, nil // lost on its way
	}
	if sig, ok := protocol.SignalFromItem(in.Item); ok && sig.State == protocol.SignalReleased {
		h := t.m.h
		h.mu.Lock()
		h.signalled[t.m.id] = time.Now()
		h.mu.Unlock()
	}
	t.m.h.db.Put(in.Item)
	return &dynamodb.PutItemOutput{}, nil
}
