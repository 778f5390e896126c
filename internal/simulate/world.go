package simulate

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsfake"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The simulated pool and account.
const (
	poolName   = "sim"
	arnPrefix  = "arn:aws:ec2:us-east-1:123456789012:instance/"
	queuePath  = "https://sqs.us-east-1.amazonaws.com/123456789012/"
	imageID    = "ami-sim"
	maxRuntime = 24 * time.Hour // the pool's max_runtime: a replay measures waiting and idling, no run may outlive it
)

// stuckAfter is how long (real time) an event may take before the replay
// reports it stuck: a claim waiting on the virtual clock, which does not
// move while an event runs.
const stuckAfter = time.Minute

// World is one replay: the fakes of DynamoDB, SQS and EC2 with the agents
// of the pool's runners, the real Claimer on top, the virtual clock, and
// the events still to happen. Events run one at a time, in time order;
// each sets the clock to its time and runs the real claim code there.
type World struct {
	clock   *Clock
	policy  Policy
	latency map[string]time.Duration
	db      *awsfake.Table
	sqs     *awsfake.SQS
	ec2     *awsfake.EC2
	claimer *claim.Claimer

	stuckAfter time.Duration

	mu        sync.Mutex // events and the meters: agents run inside claim calls
	events    eventQueue
	instances map[string]*instanceLife
	jobs      []jobStat
}

// instanceLife is what one instance cost and did.
type instanceLife struct {
	class            string
	launched, ended  time.Time     // ended zero: still running
	busy             time.Duration // running jobs
	held             time.Duration // claimed by runs (busy, booting, waiting for the run's other jobs)
	terminatedByIdle bool          // its agent terminated it at its idle deadline
}

// jobStat is one job's time to runner and its runner's source.
type jobStat struct {
	wait   time.Duration
	source string
}

// NewWorld is an empty pool under policy at start, with latency as a job's
// time to runner by source.
func NewWorld(start time.Time, policy Policy, latency map[string]time.Duration) *World {
	w := &World{clock: NewClock(start), policy: policy, latency: latency, stuckAfter: stuckAfter, instances: map[string]*instanceLife{}}
	cfg := protocol.PoolConfig{
		Name: poolName, InstanceARNPrefix: arnPrefix,
		ResourceClasses: map[string]protocol.ResourceClass{}, QueueURLs: map[string]string{},
		MaxRuntime: protocol.Duration(maxRuntime),
		Fleet: &protocol.FleetConfig{
			LaunchTemplateID: "lt-sim", LaunchTemplateVersion: "$Latest", SubnetIDs: []string{"subnet-sim"},
			InstanceSelection: protocol.SelectionExplicit,
		},
	}
	policy.configure(&cfg)
	ec2Fake := &awsfake.EC2{Pool: poolName, Now: w.clock.Now, LtImage: imageID,
		Images: map[string]ec2types.ArchitectureValues{imageID: ec2types.ArchitectureValuesX8664}}
	var urls []string
	for name, c := range Classes {
		cfg.ResourceClasses[name] = protocol.ResourceClass{CPU: c.CPU, MemoryMiB: c.MemoryMiB}
		cfg.QueueURLs[name] = queuePath + protocol.QueueName(poolName, name)
		urls = append(urls, cfg.QueueURLs[name])
		ec2Fake.Catalog = append(ec2Fake.Catalog, awsfake.InstanceTypeInfo(c.InstanceType, int32(c.CPU), int64(c.MemoryMiB), false, ec2types.ArchitectureTypeX8664))
	}
	w.db, w.sqs, w.ec2 = awsfake.NewTable(protocol.TableName(poolName)), awsfake.NewSQS(urls...), ec2Fake
	w.sqs.Clock = start
	w.db.OnInstance = w.agent
	w.db.Put(cfg.Item(protocol.FormatTime(start)))
	w.claimer = &claim.Claimer{DynamoDB: w.db, SQS: w.sqs, EC2: meteredEC2{ec2Fake, w}, Now: w.clock.Now, Sleep: w.clock.Sleep}
	return w
}

// At schedules do at t.
func (w *World) At(t time.Time, do func(context.Context) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events.push(event{at: t, do: do})
}

// Run runs the events in time order until none is left.
func (w *World) Run(ctx context.Context) error {
	for {
		w.mu.Lock()
		if w.events.Len() == 0 {
			w.mu.Unlock()
			return nil
		}
		ev := heap.Pop(&w.events).(event)
		w.mu.Unlock()
		w.clock.Set(ev.at)
		w.sqs.Mu.Lock()
		w.sqs.Clock = later(w.sqs.Clock, ev.at) // the queue's own clock follows
		w.sqs.Mu.Unlock()
		if err := w.runEvent(ctx, ev); err != nil {
			return fmt.Errorf("at %s: %w", protocol.FormatTime(ev.at), err)
		}
	}
}

// runEvent runs one event; one stuck for stuckAfter is cancelled.
func (w *World) runEvent(ctx context.Context, ev event) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ev.do(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(w.stuckAfter):
		waits := w.clock.Waiting()
		cancel()
		return fmt.Errorf("stuck: the event did not finish in %s (real time), with %d wait(s) on the virtual clock, which does not move while an event runs: an agent did not answer in the call that asked it", w.stuckAfter, waits)
	}
}

// agent plays the agents of PROTOCOL.md through the table, healthy and
// prompt: called with every changed instance record, it writes what the
// agent would (a heartbeat, UD_REG_OK for a new run, the release
// confirmation), and when the record is idle, schedules the agent's
// self-termination check at its idle deadline. It runs under the table's
// lock, inside the claim call that changed the record.
func (w *World) agent(old, cur protocol.Instance, existed bool) []map[string]types.AttributeValue {
	if cur.State == protocol.StateTerminated {
		return nil
	}
	now := protocol.FormatTime(w.clock.Now())
	arn := protocol.InstanceARN(arnPrefix, cur.ID)
	out := []map[string]types.AttributeValue{protocol.HeartbeatItem(arn, now)}
	switch {
	case cur.RunID != "" && (!existed || old.RunID != cur.RunID):
		out = append(out, protocol.Signal{InstanceARN: arn, State: protocol.SignalRegistered, RunID: cur.RunID, UpdatedAt: now}.Item())
	case existed && old.RunID != "" && cur.RunID == "":
		out = append(out, protocol.Signal{InstanceARN: arn, State: protocol.SignalReleased, RunID: old.RunID, UpdatedAt: now}.Item())
	}
	if threshold, err := protocol.ParseTime(cur.Threshold); err == nil && cur.State == protocol.StateIdle {
		id := cur.ID
		w.At(threshold.Add(SelfTerminationGrace+SelfCheckInterval), func(ctx context.Context) error { return w.idleDeadline(ctx, id) })
	}
	return out
}

// idleDeadline is the agent's step 2 at its idle deadline: it terminates
// its instance once its record's threshold is SelfTerminationGrace past,
// at its first check after. A record claimed since has a later threshold
// (and a check of its own).
func (w *World) idleDeadline(ctx context.Context, id string) error {
	it := w.db.Get(protocol.TypeInstance, id)
	rec, err := protocol.InstanceFromItem(it)
	if err != nil {
		return fmt.Errorf("agent of %s reading its record: %w", id, err)
	}
	threshold, err := protocol.ParseTime(rec.Threshold)
	if err != nil || rec.State == protocol.StateTerminated || !w.clock.Now().After(threshold.Add(SelfTerminationGrace)) {
		return err
	}
	w.mu.Lock()
	life := w.instances[id]
	gone := life == nil || !life.ended.IsZero()
	w.mu.Unlock()
	if gone {
		return nil // the reaper was first
	}
	if _, err := w.claimer.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		return fmt.Errorf("agent of %s terminating itself: %w", id, err)
	}
	w.mu.Lock()
	life.terminatedByIdle = true
	w.mu.Unlock()
	return nil
}

// meteredEC2 records when each instance starts and ends.
type meteredEC2 struct {
	*awsfake.EC2
	w *World
}

func (m meteredEC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	out, err := m.EC2.CreateFleet(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	now := m.w.clock.Now()
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	for _, g := range out.Instances {
		for _, id := range g.InstanceIds {
			m.w.instances[id] = &instanceLife{class: classOf(string(g.InstanceType)), launched: now}
		}
	}
	return out, nil
}

func (m meteredEC2) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	out, err := m.EC2.TerminateInstances(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	now := m.w.clock.Now()
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	for _, id := range in.InstanceIds {
		if life := m.w.instances[id]; life != nil && life.ended.IsZero() {
			life.ended = now
		}
	}
	return out, nil
}

func classOf(instanceType string) string {
	for name, c := range Classes {
		if c.InstanceType == instanceType {
			return name
		}
	}
	return ""
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// event is something that happens at a virtual instant; seq orders events
// of the same instant as they were scheduled.
type event struct {
	at  time.Time
	seq int
	do  func(context.Context) error
}

// eventQueue is a heap of events; seq numbers them as they come.
type eventQueue struct {
	items []event
	seq   int
}

// push schedules e (called with World.mu held).
func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	heap.Push(q, e)
}

func (q *eventQueue) Len() int { return len(q.items) }
func (q *eventQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.seq < b.seq
}
func (q *eventQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *eventQueue) Push(x any)    { q.items = append(q.items, x.(event)) }
func (q *eventQueue) Pop() any {
	e := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return e
}
