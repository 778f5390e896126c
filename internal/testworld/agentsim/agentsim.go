// Package agentsim simulates runner instances for tests and the demo. No
// real instance boots in the emulator, so each simulated instance runs the
// real agent (package agent) on a simulated machine (package agenttest: a
// Host and Runner that touch nothing, install at once and register without
// GitHub), against the emulator: the agent heartbeats, registers for the
// runs its record names with the token handed for the run and the pool's
// target (no token in a pool without a GitHub target) or, given the run's
// registration grant and the pool's broker (Options.Broker), starts
// each job's runner on a just-in-time registration the broker mints,
// confirms each release, and stops or terminates its instance past its
// record's deadlines, as on EC2.
//
// What the simulation adds is the instance around the agent: its
// InitialRunId tag is read from DescribeInstances (as the agent would from
// instance metadata); a boot ends when EC2 ends the instance (a claim or
// the reaper terminated it), when the agent stops or terminates it, or
// when the pool's table is deleted; a stopped instance runs no agent and is
// watched, once per Options.SelfCheckInterval, until it runs again (a
// claim started it), and then boots after Options.BootDelay, its runner and
// preparation kept.
//
// A Behavior per instance makes it misbehave in one specific way, through
// its machine (a registration that fails, hangs or is slow, a
// deregistration that hangs), its way to the table (heartbeats that never
// arrive) or its power (a boot that never comes back), so tests can drive
// a claim's failure paths.
//
// Instances talk to the emulator through small client interfaces satisfied
// by *dynamodb.Client, *ec2.Client and *sqs.Client, and to the pool's
// broker as the agent binary does (agent.LambdaBroker). The emulator is
// single-core (about 120-160 DynamoDB writes/s in total): the default
// intervals keep an idle agent at 4 reads/s and one write per 5 s, and a
// stopped instance at one DescribeInstances per 15 s.
package agentsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	agentpkg "github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Behavior is how one simulated agent acts.
type Behavior int

const (
	// Healthy follows the protocol.
	Healthy Behavior = iota
	// SlowRegister registers Options.RegisterDelay after it sees a runId.
	SlowRegister
	// NeverRegisters heartbeats but never signals UD_REG_OK (nor anything
	// else for the runs it is given).
	NeverRegisters
	// RegistrationFails signals UD_REG_FAILED with the runId.
	RegistrationFails
	// NoHeartbeat never writes heartbeats; otherwise it is Healthy.
	NoHeartbeat
	// NeverConfirmsRelease registers, but on release writes no UD_REMOVE_*
	// signal; it still goes back to waiting for the next runId.
	NeverConfirmsRelease
	// NoResume is Healthy until it stops its instance; once the instance is
	// started again, its agent never runs (a boot that hangs): no heartbeat,
	// no signal, no registration, until the instance is terminated.
	NoResume
)

var behaviorNames = [...]string{"healthy", "slow-register", "never-registers", "registration-fails", "no-heartbeat", "never-confirms-release", "no-resume"}

func (b Behavior) String() string {
	if b >= 0 && int(b) < len(behaviorNames) {
		return behaviorNames[b]
	}
	return "behavior(" + strconv.Itoa(int(b)) + ")"
}

// DynamoDBAPI is the part of the DynamoDB API the agents use.
type DynamoDBAPI interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// EC2API is the part of the EC2 API the agents (and SeedIdle, WatchFleet) use.
type EC2API interface {
	RunInstances(context.Context, *ec2.RunInstancesInput, ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	StopInstances(context.Context, *ec2.StopInstancesInput, ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error)
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// SQSAPI is the part of the SQS API SeedIdle uses. It may be nil when
// SeedIdle is not used.
type SQSAPI interface {
	GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Clients are the AWS clients of a Sim.
type Clients struct {
	DynamoDB DynamoDBAPI
	EC2      EC2API
	SQS      SQSAPI
}

// Options tune the agents; zero values take the defaults.
type Options struct {
	// HeartbeatInterval between heartbeat writes (default 5s).
	HeartbeatInterval time.Duration
	// WaitInterval between record reads while waiting for a runId (step 3;
	// default 250ms).
	WaitInterval time.Duration
	// PollInterval between record reads while registered (step 5; default 10s).
	PollInterval time.Duration
	// SelfCheckInterval between self-checks: one record read and one
	// DescribeInstances (default 15s). The agent of a stopped instance makes
	// only the DescribeInstances, to see it started again.
	SelfCheckInterval time.Duration
	// SelfTerminationGrace is how long past its record's threshold an agent
	// lets its instance run before it stops or terminates it (default 1m,
	// the protocol's).
	SelfTerminationGrace time.Duration
	// BootDelay stands in for an instance's boot: how long after the agent
	// of a stopped instance sees it running again it starts over (default
	// 1s). A first boot is not delayed: WatchFleet's discovery stands in for
	// it.
	BootDelay time.Duration
	// RegisterDelay is how long a SlowRegister agent takes (default 3s).
	RegisterDelay time.Duration
	// TokenWait is how long an agent waits for the token of a run before it
	// signals UD_REG_FAILED or UD_REMOVE_REG_FAILED (default 60s, the real
	// agent's).
	TokenWait time.Duration
	// FleetWatchInterval between WatchFleet's DescribeInstances (default 200ms).
	FleetWatchInterval time.Duration
	// Broker, if set, is the pool's broker as instance id's agent reaches
	// it, as the binary does: the function the user data names
	// (agent.Config.BrokerFunction), invoked with a Lambda client of the
	// instance's role (each instance has credentials of its own, as on
	// EC2). Asked once per instance, when its agent first starts. nil: the
	// pool has none.
	Broker func(instanceID string) agentpkg.LambdaBroker
	// ClockSkew: the agents' clocks run this far ahead of the machine's
	// (behind when negative), in what they write and in their deadlines,
	// as an instance's clock may be off the provider's.
	ClockSkew time.Duration
	// Logf, if set, receives errors (each distinct error once per agent until
	// the next success) and other diagnostics.
	Logf func(format string, args ...any)
	// OnEvent, if set, is called synchronously for every agent event; it must
	// return quickly.
	OnEvent func(Event)
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.HeartbeatInterval, 5*time.Second)
	def(&o.WaitInterval, 250*time.Millisecond)
	def(&o.PollInterval, 10*time.Second)
	def(&o.SelfCheckInterval, 15*time.Second)
	def(&o.SelfTerminationGrace, time.Minute)
	def(&o.BootDelay, time.Second)
	def(&o.RegisterDelay, 3*time.Second)
	def(&o.TokenWait, time.Minute)
	def(&o.FleetWatchInterval, 200*time.Millisecond)
	return o
}

// EventKind names what happened to an agent.
type EventKind string

// Agent events.
const (
	EventStarted            EventKind = "started"             // the agent began its loop
	EventUserDataOK         EventKind = "user-data-ok"        // UD_OK written at boot for RunID, its InitialRunId tag
	EventRegistered         EventKind = "registered"          // UD_REG_OK written for RunID
	EventRegistrationFailed EventKind = "registration-failed" // UD_REG_FAILED written for RunID
	EventReleaseFailed      EventKind = "release-failed"      // UD_REMOVE_REG_FAILED written for RunID (no removal token)
	EventReleased           EventKind = "released"            // UD_REMOVE_REG_REMOVE_RUN_OK written for RunID
	EventReleaseSilent      EventKind = "release-unconfirmed" // NeverConfirmsRelease saw RunID go and wrote nothing
	EventSelfTerminated     EventKind = "self-terminated"     // TerminateInstances on itself after its threshold
	EventStoppedSelf        EventKind = "self-stopped"        // StopInstances on itself: its record keeps it in the stopped tier
	EventResumed            EventKind = "resumed"             // its stopped instance was started and booted; the loop starts over
	EventStopped            EventKind = "stopped"             // the loop ended; Detail says why
)

// Event is one thing an agent did.
type Event struct {
	Time       time.Time
	InstanceID string
	Kind       EventKind
	RunID      string
	Detail     string
}

// Sim runs simulated agents for one pool.
type Sim struct {
	c    Clients
	pool string
	opts Options

	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	stopped  bool
	rendered *rendered         // read once from the pool config item
	agents   map[string]*agent // every agent ever started, by instance id
	regs     map[string][]string
	rels     map[string][]string
	jit      map[string][]protocol.JITRunner // the just-in-time runners minted for each agent, by instance id
	err      error

	// beforeStopRecheck, set by tests before any agent starts, runs between
	// an agent's decision to stop its instance and its second read of its
	// record, so that a test can claim the record in between.
	beforeStopRecheck func(instanceID string)
}

// New returns a Sim for pool; it starts nothing by itself.
func New(c Clients, pool string, opts Options) *Sim {
	ctx, cancel := context.WithCancel(context.Background())
	return &Sim{
		c: c, pool: pool, opts: opts.withDefaults(),
		ctx: ctx, cancel: cancel,
		agents: map[string]*agent{},
		regs:   map[string][]string{},
		rels:   map[string][]string{},
		jit:    map[string][]protocol.JITRunner{},
	}
}

// Start starts an agent for instanceID with behaviour b, and reports whether
// it did: there is at most one agent per instance id over the Sim's lifetime
// (an agent that stopped is not restarted), none after Stop, and none while
// the pool config item cannot be read (the agents' ARN and GitHub target). The agent
// runs until ctx is cancelled, Stop is called, or its instance is gone.
func (s *Sim) Start(ctx context.Context, instanceID string, b Behavior) bool {
	r, err := s.settings(ctx)
	if err != nil {
		if !errors.As(err, new(*ddbtypes.ResourceNotFoundException)) {
			s.recordErr(fmt.Errorf("agentsim: starting the agent of %s: %w", instanceID, err))
		}
		return false
	}
	a := s.newAgent(instanceID, b, r)
	if a == nil {
		return false
	}
	s.run(ctx, a)
	return true
}

// newAgent registers a new agent, or returns nil if one exists or the Sim stopped.
func (s *Sim) newAgent(id string, b Behavior, r rendered) *agent {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.agents[id] != nil {
		return nil
	}
	a := &agent{sim: s, id: id, b: b, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		arn: protocol.InstanceARN(r.arnPrefix, id), target: r.target}
	a.newMachine()
	if s.opts.Broker != nil {
		a.broker = &simBroker{a, s.opts.Broker(id)}
	}
	s.agents[id] = a
	s.wg.Add(1)
	return a
}

func (s *Sim) run(ctx context.Context, a *agent) {
	go func() {
		defer s.wg.Done()
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(s.ctx, cancel)
		defer stop()
		a.loop(actx)
	}()
}

// Stop stops every agent and watcher and waits for them. Start, SeedIdle
// and WatchFleet do nothing after Stop.
func (s *Sim) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// Registrations lists the runIds instanceID's agent signalled UD_REG_OK for,
// in order.
func (s *Sim) Registrations(instanceID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.regs[instanceID]...)
}

// Registration is the registration instanceID's runner holds, as its agent
// made it (the URL and token of the target it registered with, its label
// and runner group): its machine registers nowhere, so a test with a stub
// GitHub registers it there (scripttest.GitHub.RegisterAgent). ok is false
// while it holds none.
func (s *Sim) Registration(instanceID string) (reg agentpkg.Registration, ok bool) {
	s.mu.Lock()
	a := s.agents[instanceID]
	s.mu.Unlock()
	if a == nil {
		return reg, false
	}
	if r := a.runner.Registered(); r != nil {
		return *r, true
	}
	return reg, false
}

// JITRunners lists the just-in-time runners instanceID's agent started, in
// order: each on a registration the pool's broker minted when the agent
// asked for its run's next job's.
func (s *Sim) JITRunners(instanceID string) []string {
	s.mu.Lock()
	a, minted := s.agents[instanceID], slices.Clone(s.jit[instanceID])
	s.mu.Unlock()
	if a == nil {
		return nil
	}
	started := a.runner.JITConfigs()
	var names []string
	for _, runner := range minted {
		if slices.Contains(started, runner.EncodedJITConfig) {
			names = append(names, runner.RunnerName)
		}
	}
	return names
}

// EndJob makes the just-in-time runner instanceID's agent started last
// exit, as an ephemeral runner does once its job is done (its machine runs
// no job: a test runs it at its stub GitHub, scripttest.GitHub.RunJob), so
// that the agent starts the run's next job on a registration of its own.
func (s *Sim) EndJob(instanceID string) {
	s.mu.Lock()
	a := s.agents[instanceID]
	s.mu.Unlock()
	if a != nil {
		a.runner.EndJob()
	}
}

// Releases lists the runIds instanceID's agent signalled
// UD_REMOVE_REG_REMOVE_RUN_OK for, in order.
func (s *Sim) Releases(instanceID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.rels[instanceID]...)
}

// Err is the first error any agent or watcher of the Sim hit (agents retry,
// so it may have been transient), or nil. Cancellation is not an error, nor
// is a missing pool table: an agent whose table is gone just stops.
func (s *Sim) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Sim) recordErr(err error) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

func (s *Sim) emit(e Event) {
	s.mu.Lock()
	switch e.Kind {
	case EventRegistered:
		s.regs[e.InstanceID] = append(s.regs[e.InstanceID], e.RunID)
	case EventReleased:
		s.rels[e.InstanceID] = append(s.rels[e.InstanceID], e.RunID)
	}
	s.mu.Unlock()
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(e)
	}
}

// config is the agents' configuration, as the user data would render it
// with the Sim's intervals: the runner pinned (no GitHub to ask), and target
// the pool's GitHub target ("" for a pool without one).
func (s *Sim) config(target string) agentpkg.Config {
	o := s.opts
	d := func(v time.Duration) protocol.Duration { return protocol.Duration(v) }
	return agentpkg.Config{
		Pool: s.pool, GitHubURL: "https://github.com", GitHubTarget: target, RunnerUser: "runner",
		Runner: agentpkg.RunnerSource{Version: DefaultRunnerVersion},
		Intervals: agentpkg.Intervals{
			Heartbeat: d(o.HeartbeatInterval), SelfCheck: d(o.SelfCheckInterval), ClaimPoll: d(o.WaitInterval),
			ReleasePoll: d(o.PollInterval), SelfTerminationGrace: d(o.SelfTerminationGrace), TokenWait: d(o.TokenWait),
		},
	}
}

func (s *Sim) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}
