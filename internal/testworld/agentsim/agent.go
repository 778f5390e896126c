package agentsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	agentpkg "github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agenttest"
)

// TagSeeded marks instances launched by SeedIdle, which WatchFleet leaves
// alone (SeedIdle starts their agents with the behaviour asked for).
const TagSeeded = "ec2runners:agentsim"

// DefaultRunnerVersion is the runner the simulated instances run: a release
// GitHub accepts, as the tests' stub GitHub has it.
const DefaultRunnerVersion = "2.331.0"

// agent is one simulated instance: its machine (an agenttest Host and
// Runner, which keep the runner installed and the preparation across its
// boots) and the real agent (package agent) of each of its boots. Its
// fields belong to its goroutine, but for the machine's own locks.
type agent struct {
	sim *Sim
	id  string
	b   Behavior
	rng *rand.Rand

	arn    string // its instance's
	target string // the GitHub target it registers with; "": no tokens needed

	host   *agenttest.Host
	runner *agenttest.Runner
	broker *simBroker // the pool's, as the instance reaches it; nil: none

	described    bool
	initialRunID string // the InitialRunId tag (if a run id), once described
	runID        string // the run last registered for, for the stopped event

	mu         sync.Mutex
	endBoot    context.CancelCauseFunc // ends the current boot
	lastErr    string                  // last error logged, to log each distinct error once
	stopRecord bool                    // its last record read kept it in the stopped tier past its grace: the next read is the agent's re-check
	gone       string                  // why the boot ends from outside the agent (the table deleted)
}

// newMachine is the machine of an instance whose agent acts as b.
func (a *agent) newMachine() {
	a.host = &agenttest.Host{}
	a.runner = &agenttest.Runner{Clock: skewedClock{a.sim.opts.ClockSkew}}
	runner, s := a.runner, a.sim
	switch a.b {
	case SlowRegister:
		runner.RegisterDelay = s.opts.RegisterDelay
	case NeverRegisters:
		runner.RegisterHangs = true
	case RegistrationFails:
		runner.RegisterFails = agenttest.ErrRefused
	case NeverConfirmsRelease:
		runner.RemoveHangs = true
		runner.OnRemoveHang = func() { a.emit(EventReleaseSilent, a.runID, "") }
	}
}

// jitter spreads d by ±10% so agents started together do not poll in step.
func (a *agent) jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.9 + 0.2*a.rng.Float64()))
}

func (a *agent) emit(kind EventKind, runID, detail string) {
	a.sim.emit(Event{Time: time.Now(), InstanceID: a.id, Kind: kind, RunID: runID, Detail: detail})
}

// fail records and logs an error of one of the agent's calls (each
// distinct error once until a call succeeds). A missing table is no
// error: the pool was deleted, and the instance's boot ends.
func (a *agent) fail(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return // cancelled: not an error of the agent
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var noTable *ddbtypes.ResourceNotFoundException
	if errors.As(err, &noTable) {
		a.gone = "the pool's table " + protocol.TableName(a.sim.pool) + " does not exist"
		if a.endBoot != nil {
			a.endBoot(errors.New(a.gone))
		}
		return
	}
	err = fmt.Errorf("agent %s: %s: %w", a.id, what, err)
	a.sim.recordErr(err)
	if msg := ErrorKey(err); msg != a.lastErr {
		a.lastErr = msg
		a.sim.logf("%v (retrying)", err)
	}
}

func (a *agent) ok() {
	a.mu.Lock()
	a.lastErr = ""
	a.mu.Unlock()
}

// loop runs the instance until ctx is done or it is gone.
func (a *agent) loop(ctx context.Context) {
	a.emit(EventStarted, "", a.b.String())
	a.emit(EventStopped, a.runID, a.live(ctx))
}

// live runs the instance through its stops and starts, and returns why its
// agent ends.
func (a *agent) live(ctx context.Context) (end string) {
	running := true // an instance SeedIdle launched
	if !a.described {
		// As the real agent reads its instance metadata first. An instance
		// found stopped (one of the stopped tier) waits to be started like
		// one whose agent stopped it.
		state, end := a.watchInstance(ctx, anyState)
		if end != "" {
			return end
		}
		running = started(state)
	}
	for {
		if running {
			if end := a.boot(ctx); end != "" {
				return end
			}
		}
		// The emulator shows a stopped instance stopped at once. Should a
		// stale "running" wake the agent early, as EC2's eventual
		// consistency could, its next self-check stops the instance again.
		if _, end := a.watchInstance(ctx, started); end != "" {
			return end
		}
		if a.b == NoResume {
			_, end := a.watchInstance(ctx, neverState)
			return end
		}
		select {
		case <-ctx.Done():
			return "cancelled"
		case <-time.After(a.sim.opts.BootDelay):
		}
		a.emit(EventResumed, "", "its instance runs again; booted in "+protocol.FormatDuration(a.sim.opts.BootDelay))
		running = true
	}
}

// boot runs the agent of one boot of the instance until it stops its
// instance ("" returned) or the boot ends (why returned): the agent
// terminated its instance, EC2 ended the instance (a claim or the reaper
// terminated it: the instance is watched, as its machine would go down),
// the table is gone, or ctx ended.
func (a *agent) boot(ctx context.Context) (end string) {
	bctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.mu.Lock()
	a.endBoot = cancel
	a.mu.Unlock()
	go func() {
		if _, end := a.watchInstance(bctx, neverState); end != "" && bctx.Err() == nil {
			cancel(errors.New(end))
		}
	}()
	switch a.core().Run(bctx) {
	case agentpkg.EndStopped:
		return ""
	case agentpkg.EndTerminated:
		return "terminated itself"
	}
	a.mu.Lock()
	gone := a.gone
	a.mu.Unlock()
	switch {
	case gone != "":
		return gone
	case ctx.Err() != nil:
		return "cancelled"
	}
	return context.Cause(bctx).Error()
}

// core is the real agent of a boot of the instance.
func (a *agent) core() *agentpkg.Agent {
	cfg := a.sim.config(a.target)
	deps := agentpkg.Deps{
		Table: simTable{a}, EC2: simEC2{a}, Clock: skewedClock{a.sim.opts.ClockSkew}, Host: a.host, Runner: a.runner,
		OnEvent: a.onEvent,
	}
	if a.broker != nil {
		cfg.BrokerFunction, deps.Broker = a.broker.lambda.Function, a.broker
	}
	return agentpkg.New(cfg, agentpkg.Identity{InstanceID: a.id, InstanceARN: a.arn, InitialRunID: a.initialRunID}, deps)
}

// prime makes a seeded instance a runner a release gave back: prepared,
// its runner installed, its first heartbeat written, so that a claim that
// gets its message at once sees it alive.
func (a *agent) prime(ctx context.Context) error {
	if err := a.host.Prepare(ctx); err != nil {
		return err
	}
	if err := a.runner.Install(ctx, agentpkg.Archive{Version: DefaultRunnerVersion}); err != nil {
		return err
	}
	if a.b == NoHeartbeat {
		return nil
	}
	return a.core().Heartbeat(ctx)
}

// onEvent turns what the agent did into the Sim's events.
func (a *agent) onEvent(e agentpkg.Event) {
	kinds := map[agentpkg.EventKind]EventKind{
		agentpkg.EventRegistered: EventRegistered, agentpkg.EventRegistrationFailed: EventRegistrationFailed,
		agentpkg.EventReleased: EventReleased, agentpkg.EventReleaseFailed: EventReleaseFailed,
		agentpkg.EventSelfTerminated: EventSelfTerminated, agentpkg.EventSelfStopped: EventStoppedSelf,
	}
	switch {
	case e.Kind == agentpkg.EventPrepared && e.RunID != "":
		a.emit(EventUserDataOK, e.RunID, "")
	case e.Kind == agentpkg.EventRegistered:
		a.runID = e.RunID
		a.emit(EventRegistered, e.RunID, "")
	case kinds[e.Kind] != "":
		a.emit(kinds[e.Kind], e.RunID, e.Detail)
	}
}

// skewedClock is an instance's clock, skew off the machine's.
type skewedClock struct{ skew time.Duration }

func (c skewedClock) Now() time.Time { return time.Now().Add(c.skew) }

func (c skewedClock) Sleep(ctx context.Context, d time.Duration) error {
	return agentpkg.SystemClock{}.Sleep(ctx, d)
}

// simTable is the instance's way to the pool table: the Sim's client, with
// errors recorded, heartbeats dropped for NoHeartbeat, and the Sim's hook
// before the agent reads its record again to stop its instance.
type simTable struct{ a *agent }

func (t simTable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	a := t.a
	record := protocol.StringAttr(in.Key, protocol.AttrPK) == protocol.TypeInstance
	a.mu.Lock()
	// One read consumes the recheck: another read of the record running
	// meanwhile, or one after this read failed, is not the stop's.
	recheck := record && a.stopRecord
	a.stopRecord = a.stopRecord && !recheck
	a.mu.Unlock()
	if recheck && a.sim.beforeStopRecheck != nil {
		a.sim.beforeStopRecheck(a.id)
	}
	out, err := a.sim.c.DynamoDB.GetItem(ctx, in, opts...)
	if err != nil {
		a.fail(ctx, "reading "+protocol.StringAttr(in.Key, protocol.AttrSK), err)
		return out, err
	}
	a.ok()
	if record {
		rec, rerr := protocol.InstanceFromItem(out.Item)
		stopping := rerr == nil && rec.Stopped(skewedClock{a.sim.opts.ClockSkew}.Now()) && pastGrace(rec, a.sim.opts)
		a.mu.Lock()
		a.stopRecord = stopping && !recheck
		a.mu.Unlock()
	}
	return out, nil
}

func (t simTable) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	a := t.a
	if a.b == NoHeartbeat && protocol.StringAttr(in.Item, protocol.AttrSK) == protocol.SortKeyHeartbeat {
		return &dynamodb.PutItemOutput{}, nil
	}
	out, err := a.sim.c.DynamoDB.PutItem(ctx, in, opts...)
	if err != nil {
		a.fail(ctx, "writing "+protocol.StringAttr(in.Item, protocol.AttrSK), err)
		return out, err
	}
	a.ok()
	return out, nil
}

// pastGrace tells whether rec's threshold is more than the grace past on
// the instance's clock, as the agent judges it.
func pastGrace(rec protocol.Instance, o Options) bool {
	th, err := protocol.ParseTime(rec.Threshold)
	return err == nil && time.Now().Add(o.ClockSkew).After(th.Add(o.SelfTerminationGrace))
}

// simEC2 is the instance's way to EC2: the Sim's client, a failed
// termination recorded (a failed stop is the protocol's to answer: the
// agent terminates instead).
type simEC2 struct{ a *agent }

// TerminateInstances is the agent terminating its own instance. The call
// outlives the boot: the emulator shows the instance terminated at once,
// and the instance's watcher would end the boot before the answer reached
// the agent, where EC2 shuts a machine down well after it answers.
func (e simEC2) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	out, err := e.a.sim.c.EC2.TerminateInstances(context.WithoutCancel(ctx), in, opts...)
	if err != nil {
		e.a.fail(ctx, "terminating itself", err)
	}
	return out, err
}

func (e simEC2) StopInstances(ctx context.Context, in *ec2.StopInstancesInput, opts ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error) {
	out, err := e.a.sim.c.EC2.StopInstances(ctx, in, opts...)
	if err != nil && ctx.Err() == nil {
		e.a.sim.logf("agent %s: stopping its instance failed, terminating it instead: %v", e.a.id, err)
	}
	return out, err
}

// simBroker is the instance's way to the pool's broker: the binary's
// (agent.LambdaBroker), with errors recorded and the runners it minted
// kept for JITRunners.
type simBroker struct {
	a      *agent
	lambda agentpkg.LambdaBroker
}

func (b *simBroker) Register(ctx context.Context, g protocol.RegistrationGrant) (protocol.JITRunner, error) {
	runner, err := b.lambda.Register(ctx, g)
	if err != nil {
		b.a.fail(ctx, "asking the pool's broker for a registration", err)
		return runner, err
	}
	b.a.ok()
	s := b.a.sim
	s.mu.Lock()
	s.jit[b.a.id] = append(s.jit[b.a.id], runner)
	s.mu.Unlock()
	return runner, nil
}

func (b *simBroker) Deregister(ctx context.Context, g protocol.RegistrationGrant, runnerID int64) error {
	err := b.lambda.Deregister(ctx, g, runnerID)
	if err != nil {
		b.a.fail(ctx, "asking the pool's broker to delete its runner", err)
		return err
	}
	b.a.ok()
	return nil
}

// watchInstance looks at the instance's EC2 state at once and then every
// self-check interval until until accepts it, and returns that state; or
// why the agent ends, when the instance is gone or ctx done.
func (a *agent) watchInstance(ctx context.Context, until func(ec2types.InstanceStateName) bool) (ec2types.InstanceStateName, string) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", "cancelled"
		case <-t.C:
		}
		state, end := a.instanceState(ctx)
		if end != "" {
			return "", end
		}
		if state != "" && until(state) {
			return state, ""
		}
		t.Reset(a.jitter(a.sim.opts.SelfCheckInterval))
	}
}

// anyState makes watchInstance return at its first answer, neverState only
// once the instance is gone.
func anyState(ec2types.InstanceStateName) bool   { return true }
func neverState(ec2types.InstanceStateName) bool { return false }

// started tells whether an instance in state is booting or booted.
func started(state ec2types.InstanceStateName) bool {
	return state == ec2types.InstanceStateNamePending || state == ec2types.InstanceStateNameRunning
}

// instanceState describes the instance: its state ("" when the call
// failed, to be tried again), or why the agent ends when it is gone.
func (a *agent) instanceState(ctx context.Context) (state ec2types.InstanceStateName, end string) {
	state, err := a.describe(ctx)
	switch {
	case isNotFound(err):
		return "", "its instance does not exist"
	case err != nil:
		a.fail(ctx, "describing its instance", err)
		return "", ""
	case state == ec2types.InstanceStateNameTerminated, state == ec2types.InstanceStateNameShuttingDown:
		return "", "its instance is " + string(state)
	}
	return state, ""
}

// errNoInstance is describe's error when EC2 returns no instance for the id.
var errNoInstance = errors.New("no such instance")

// describe returns the instance's EC2 state and, the first time, its
// InitialRunId tag, which a real agent reads from instance metadata.
func (a *agent) describe(ctx context.Context) (ec2types.InstanceStateName, error) {
	out, err := a.sim.c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{a.id}})
	if err != nil {
		return "", err
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			if aws.ToString(inst.InstanceId) != a.id {
				continue
			}
			if !a.described {
				a.described = true
				a.initialRunID = tagValue(inst.Tags, protocol.TagInitialRunID)
				if protocol.ValidateRunID(a.initialRunID) != nil {
					a.initialRunID = "" // as the real agent, which ignores a tag that is no run id
				}
			}
			if inst.State == nil {
				return "", nil
			}
			return inst.State.Name, nil
		}
	}
	return "", errNoInstance
}

func isNotFound(err error) bool {
	if errors.Is(err, errNoInstance) {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "InvalidInstanceID.NotFound"
}

func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
