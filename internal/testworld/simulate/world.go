package simulate

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// The simulated pool and account.
const (
	poolName   = "sim"
	arnPrefix  = "arn:aws:ec2:us-east-1:123456789012:instance/"
	queuePath  = "https://sqs.us-east-1.amazonaws.com/123456789012/"
	imageID    = "ami-sim"
	maxRuntime = 24 * time.Hour // the pool's max_runtime: a replay measures waiting and idling, no run may outlive it
)

// stuckAfter is how long (real time) the replay's goroutines may run
// without settling (World.settle) before the replay reports them stuck.
const stuckAfter = time.Minute

// World is one replay: the fakes of DynamoDB, SQS and EC2 with the agents
// of the pool's runners, the real Claimer on top, the virtual clock, and
// the events still to happen. Events run in time order, each in its own
// goroutine, at its instant; one that waits on the clock (a claim whose
// runners boot) waits while others run, as claims overlap on AWS.
type World struct {
	clock   *Clock
	policy  Policy
	latency map[string]time.Duration
	db      *awsfake.Table
	sqs     *awsfake.SQS
	ec2     *awsfake.EC2
	claimer *claim.Claimer

	mu        sync.Mutex // events and the meters: agents run inside claim calls
	events    eventQueue
	running   int           // events under way
	failed    error         // the first event that failed
	finished  chan struct{} // an event ended (capacity 1: a nudge, not a count)
	instances map[string]*instanceLife
	jobs      []jobStat
}

// jobStat is one job's time to runner, its runner's source, and its
// run's start and class.
type jobStat struct {
	wait   time.Duration
	source string
	runAt  time.Time
	class  string
}

// NewWorld is an empty pool under policy at start, with latency as a job's
// time to runner by source (and its runner's boot, LatencyBySource).
func NewWorld(start time.Time, policy Policy, latency map[string]time.Duration) *World {
	w := &World{clock: NewClock(start), policy: policy, latency: latency, finished: make(chan struct{}, 1), instances: map[string]*instanceLife{}}
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
	ec2Fake := &awsfake.EC2{Pool: poolName, Now: w.clock.Now, LtImage: imageID, OnStart: w.started,
		Images: map[string]ec2types.ArchitectureValues{imageID: ec2types.ArchitectureValuesX8664}}
	var urls []string
	for _, name := range slices.Sorted(maps.Keys(Classes)) {
		c := Classes[name]
		cfg.ResourceClasses[name] = protocol.ResourceClass{CPU: c.CPU, MemoryMiB: c.MemoryMiB}
		cfg.QueueURLs[name] = queuePath + protocol.QueueName(poolName, name)
		urls = append(urls, cfg.QueueURLs[name])
		ec2Fake.Catalog = append(ec2Fake.Catalog, awsfake.InstanceTypeInfo(c.InstanceType, int32(c.CPU), int64(c.MemoryMiB), false, ec2types.ArchitectureTypeX8664))
	}
	w.db, w.sqs, w.ec2 = awsfake.NewTable(protocol.TableName(poolName)), awsfake.NewSQS(urls...), ec2Fake
	w.sqs.Clock = start
	w.db.AfterInstance = w.changed
	w.db.Put(cfg.Item(protocol.FormatTime(start)))
	w.claimer = &claim.Claimer{DynamoDB: w.db, SQS: orderedSQS{w.sqs}, EC2: meteredEC2{ec2Fake, w}, Now: w.clock.Now, Sleep: w.clock.Sleep}
	return w
}

// At schedules do at t; key orders it among the events of the same
// instant, and names it (what it is, and for which run or instance).
func (w *World) At(t time.Time, key string, do func(context.Context) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events.push(event{at: t, key: key, do: do})
}

// Run runs the events until none is left, none runs and nothing waits.
// Time moves only once everything under way is blocked (settle): then
// the next event starts, or the earliest wait on the clock ends, one at a
// time (events first at the same instant: an agent's answer is there for
// the claim that polls for it then).
func (w *World) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a failed replay unwinds the events still waiting
	for {
		if err := w.settle(); err != nil {
			return err
		}
		w.mu.Lock()
		next, hasEvent := w.events.peek()
		for hasEvent && next.dropped != nil && *next.dropped {
			heap.Pop(&w.events) // superseded: it never happens, nor moves the clock
			next, hasEvent = w.events.peek()
		}
		wake, hasWake := w.clock.NextWake()
		switch {
		case hasEvent && (!hasWake || !wake.Before(next.at)):
			heap.Pop(&w.events)
			w.running++
			w.mu.Unlock()
			w.setTime(next.at)
			go w.runEvent(ctx, next)
		case hasWake:
			w.mu.Unlock()
			w.setTime(wake)
			w.clock.WakeNext()
		case w.running > 0:
			w.mu.Unlock()
			return fmt.Errorf("stuck at %s: %d event(s) wait for what nothing left will do (no event is due, no wait on the clock)", protocol.FormatTime(w.clock.Now()), w.running)
		default:
			w.mu.Unlock()
			return nil
		}
	}
}

// setTime moves the clock, and the queues' own, to t.
func (w *World) setTime(t time.Time) {
	w.clock.Advance(t)
	w.sqs.Mu.Lock()
	w.sqs.Clock = later(w.sqs.Clock, t)
	w.sqs.Mu.Unlock()
}

func (w *World) runEvent(ctx context.Context, ev event) {
	err := ev.do(withEventKey(ctx, ev.key))
	w.mu.Lock()
	w.running--
	if err != nil && w.failed == nil {
		w.failed = fmt.Errorf("at %s: %w", protocol.FormatTime(ev.at), err)
	}
	w.mu.Unlock()
	select {
	case w.finished <- struct{}{}:
	default:
	}
}

// settle waits until no event runs, or all the replay's goroutines are
// blocked (settled), and returns the first event's failure. Goroutines that
// keep running for stuckAfter are reported stuck.
func (w *World) settle() error {
	giveUp := time.Now().Add(stuckAfter)
	pause := time.NewTimer(0)
	defer pause.Stop()
	for backoff := time.Duration(0); ; backoff = min(2*backoff+time.Microsecond, time.Millisecond) {
		w.mu.Lock()
		running, failed := w.running, w.failed
		w.mu.Unlock()
		switch {
		case failed != nil:
			return failed
		case running == 0 || settled():
			return nil
		case time.Now().After(giveUp):
			return fmt.Errorf("stuck at %s: the replay's goroutines kept running for %s (real time)", protocol.FormatTime(w.clock.Now()), stuckAfter)
		}
		pause.Reset(backoff)
		select {
		case <-w.finished:
		case <-pause.C:
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// event is something that happens at a virtual instant. Events of the
// same instant happen in the order of their keys, whatever goroutine
// scheduled them first (the claim code writes in parallel, and its agents
// schedule as they answer), then as they were scheduled.
type event struct {
	at  time.Time
	key string
	seq int
	do  func(context.Context) error
	// dropped, when set (under World.mu), cancels the event: an agent's
	// self-check superseded by a later one, or whose agent is down.
	dropped *bool
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

// peek is the next event (called with World.mu held).
func (q *eventQueue) peek() (event, bool) {
	if len(q.items) == 0 {
		return event{}, false
	}
	return q.items[0], true
}

func (q *eventQueue) Len() int { return len(q.items) }
func (q *eventQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	return cmp.Or(a.at.Compare(b.at), strings.Compare(a.key, b.key), a.seq-b.seq) < 0
}
func (q *eventQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *eventQueue) Push(x any)    { q.items = append(q.items, x.(event)) }
func (q *eventQueue) Pop() any {
	e := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return e
}

// orderedSQS receives the messages of a batch in the order of their
// bodies: SQS promises no order a claim could rely on, and a replay must
// not depend on the order the claim code lists them in (a release lists
// its runners from a map).
type orderedSQS struct{ *awsfake.SQS }

func (q orderedSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	sorted := *in
	sorted.Entries = slices.SortedFunc(slices.Values(in.Entries), func(a, b sqstypes.SendMessageBatchRequestEntry) int {
		return strings.Compare(aws.ToString(a.MessageBody), aws.ToString(b.MessageBody))
	})
	return q.SQS.SendMessageBatch(ctx, &sorted, opts...)
}
