package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Pickup benchmark: the Pickup Manager alone (no claim worker, no
// DynamoDB), ours (claim.NewPickup) against the seeds' (NewBaselinePickup),
// on queues holding the same messages.

// pickupWants is what every pickup benchmark claims: a large on-demand c*.
var pickupWants = claim.Wants{
	ResourceClass: "large", Class: protocol.ResourceClass{CPU: 2, MemoryMiB: 4096},
	AllowedTypes: []string{"c*"}, UsageClass: protocol.UsageOnDemand,
}

// pickupMode is what the consumers of one run ask of the Pickup Manager.
type pickupMode struct {
	name    string
	workers int  // concurrent consumers, as a claim's workers
	drain   bool // each worker takes runners until the pickup is exhausted
}

var pickupModes = []pickupMode{
	{"claim1", 1, false},
	{"claim10", 10, false},
	// A claim that wants more runners than the pool has suitable ones:
	// ten workers take every suitable runner until the Pickup Manager
	// reports the pool exhausted.
	{"exhaust", 10, true},
}

// defaultExamineCap bounds the runs on pools larger than 100 messages: the
// emulator spends time proportional to the queue's length on every message
// it hands out (see the calibration rows), so scanning a pool of 1000 once
// takes about a minute, and the baseline's five passes over it many
// minutes. A capped run stops once that many messages were received: its
// rates are measured, how many times each message would have been examined
// is not. Ours runs to the end on the target scenario (exhaustion at 90 %
// unsuitable), where that count is the point.
// EC2RUNNERS_BENCH_PICKUP_CAP overrides the cap of every run on a large
// pool (0: none).
const defaultExamineCap = 150

func examineCap(size, pct int, mode pickupMode, algo string) int {
	if size <= 100 {
		return 0
	}
	if v, err := strconv.Atoi(os.Getenv("EC2RUNNERS_BENCH_PICKUP_CAP")); err == nil {
		return v
	}
	if algo == "ours" && mode.name == "exhaust" && pct == 90 {
		return 0
	}
	return defaultExamineCap
}

// pickupRunBudget bounds the wall time of one run, whatever the cap: on a
// slow emulator a pass over a pool of 1000 can outlast the visibility
// timeout of ours' held messages, which then come back and are examined
// again until their fifth sighting (minutes). A run cut short is reported
// as capped.
const pickupRunBudget = 3 * time.Minute

var errExamineCap = errors.New("bench: examination budget of the run reached")

// examSQS passes SQS calls through and records every message received:
// each is one examination by the Pickup Manager. It also times the long
// polls (ours confirms an empty queue with one).
type examSQS struct {
	*sqs.Client
	limit    int       // 0: no limit
	deadline time.Time // no receive after it

	mu        sync.Mutex
	seen      map[string]int
	total     int
	timedOut  bool          // a receive was refused for the deadline
	longPolls time.Duration // spent in receives with WaitTimeSeconds > 0
}

func newExamSQS(c *sqs.Client, limit int) *examSQS {
	return &examSQS{Client: c, limit: limit, deadline: time.Now().Add(pickupRunBudget), seen: map[string]int{}}
}

func (e *examSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	e.mu.Lock()
	late := time.Now().After(e.deadline)
	e.timedOut = e.timedOut || late
	capped := late || (e.limit > 0 && e.total >= e.limit)
	e.mu.Unlock()
	if capped {
		return nil, errExamineCap
	}
	start := time.Now()
	out, err := e.Client.ReceiveMessage(ctx, in, opts...)
	e.mu.Lock()
	defer e.mu.Unlock()
	if in.WaitTimeSeconds > 0 {
		e.longPolls += time.Since(start)
	}
	if err != nil {
		return out, err
	}
	for _, m := range out.Messages {
		pm, _ := protocol.ParseMessage(aws.ToString(m.Body))
		e.seen[pm.ID]++
		e.total++
	}
	return out, nil
}

func (e *examSQS) examined() (total, distinct, most int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.seen {
		most = max(most, n)
	}
	return e.total, len(e.seen), most
}

// pickupRun is what one or more runs of a scenario measured.
type pickupRun struct {
	runs                     int
	limit                    int // examinations a run may make (0: no cap)
	examined, distinct, most int
	handed                   int // runners handed to the consumers
	exhausted, capped        int // runs that ended so
	timedOut                 int // capped runs cut by pickupRunBudget
	calls                    Calls
	elapsed                  time.Duration
	longPolls                time.Duration // of elapsed, in long polls
}

func (r pickupRun) callsPerMsg() float64 {
	return float64(r.calls.Total()) / float64(max(1, r.examined))
}
func (r pickupRun) msgsPerSec() float64 { return float64(r.examined) / r.elapsed.Seconds() }

// msgsPerSecPolling is msgsPerSec without the time spent in long polls.
func (r pickupRun) msgsPerSecPolling() float64 {
	return float64(r.examined) / (r.elapsed - r.longPolls).Seconds()
}
func (r pickupRun) examinedPerMsg() float64 {
	return float64(r.examined) / float64(max(1, r.distinct))
}

// pickupData makes the bodies of a pool of size idle runners, pct percent
// of them unsuitable for pickupWants (half by instance type, half by usage
// class: both are requeued), spread by a fixed shuffle so that every run
// of a scenario sees the same layout.
func pickupData(size, pct int) []string {
	threshold := protocol.FormatTime(time.Now().Add(6 * time.Hour))
	unsuitable := size * pct / 100
	order := rand.New(rand.NewPCG(uint64(size), uint64(pct))).Perm(size)
	prefix := "i-" + randomSuffix()
	bodies := make([]string, size)
	for i, pos := range order {
		m := protocol.Message{
			ID: fmt.Sprintf("%s%05d", prefix, pos), ResourceClass: "large", InstanceType: "c6i.large",
			CPU: 2, MemoryMiB: 4096, UsageClass: protocol.UsageOnDemand, Threshold: threshold,
		}
		if i < unsuitable {
			if i%2 == 0 {
				m.InstanceType = "m6i.large"
			} else {
				m.UsageClass = protocol.UsageSpot
			}
		}
		bodies[pos] = m.Body()
	}
	return bodies
}

// pickupQueue is one queue of runner messages in the emulator.
type pickupQueue struct {
	url    string
	bodies []string
}

func newPickupQueue(b *testing.B, e *env, size, pct int) *pickupQueue {
	b.Helper()
	ctx := context.Background()
	out, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("bench-pickup-%d-%d-%s", size, pct, randomSuffix()))})
	if err != nil {
		b.Fatal(err)
	}
	q := &pickupQueue{url: aws.ToString(out.QueueUrl), bodies: pickupData(size, pct)}
	if err := sendBodies(ctx, e.sqs, q.url, q.bodies); err != nil {
		b.Fatal(err)
	}
	return q
}

func (q *pickupQueue) delete(e *env) {
	_, _ = e.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(q.url)})
}

// restore makes the queue hold its whole set of messages again, visible:
// it sends back the runners handed out and waits out the requeue delays.
// The set is the same; the order is rotated (requeued messages went to the
// back), which changes where the suitable runners sit but not how many
// there are, nor what a message costs.
func (q *pickupQueue) restore(b *testing.B, e *env, handed []protocol.Message) {
	b.Helper()
	ctx := context.Background()
	bodies := make([]string, len(handed))
	for i, m := range handed {
		bodies[i] = m.Body()
	}
	if err := sendBodies(ctx, e.sqs, q.url, bodies); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(q.url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
		})
		if err != nil {
			b.Fatal(err)
		}
		n, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
		if n == len(q.bodies) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("queue holds %d visible messages, want %d", n, len(q.bodies))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func sendBodies(ctx context.Context, c *sqs.Client, url string, bodies []string) error {
	for batch := range slices.Chunk(bodies, 10) {
		entries := make([]sqstypes.SendMessageBatchRequestEntry, len(batch))
		for i, body := range batch {
			entries[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body)}
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return err
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("sending %d messages failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
		}
	}
	return nil
}

// driveBaseline runs the consumers of one mode against the seeds' Pickup
// Manager, as its claim workers would, and closes it. It returns the
// runners handed out.
func driveBaseline(ctx context.Context, p *BaselinePickup, mode pickupMode) (handed []protocol.Message, exhausted, capped bool, err error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range mode.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, ok, err := p.Next(ctx)
				mu.Lock()
				switch {
				case errors.Is(err, errExamineCap):
					capped = true
				case err != nil:
					errs = append(errs, err)
				case !ok:
					exhausted = true
				default:
					handed = append(handed, m)
				}
				mu.Unlock()
				if err != nil || !ok || !mode.drain {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := p.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	return handed, exhausted, capped, errors.Join(errs...)
}

// driveOurs takes runners for one mode from our Pickup Manager, as a claim
// does (as many at a time as it has workers), consumes them (deletes their
// messages, as a claim does once it claimed them) and closes it. It
// returns the runners taken.
func driveOurs(ctx context.Context, p *claim.Pickup, mode pickupMode) (handed []protocol.Message, exhausted, capped bool, err error) {
	defer p.Close(ctx)
	for {
		msgs, err := p.Take(ctx, mode.workers)
		if errors.Is(err, errExamineCap) {
			return handed, false, true, nil
		}
		if err != nil {
			return handed, false, false, err
		}
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.ID
		}
		p.Consume(ctx, ids)
		handed = append(handed, msgs...)
		if len(msgs) < mode.workers {
			return handed, true, false, nil
		}
		if !mode.drain {
			return handed, false, false, nil
		}
	}
}

// baselinePickups holds the baseline's result per scenario, for the ratio.
var (
	baselinePickupsMu sync.Mutex
	baselinePickups   = map[string]pickupRun{}
)

// BenchmarkPickup: pools of 100 and 1000 idle runners, 0/50/90/99 %
// unsuitable; claims of 1 and 10 runners, and a run to exhaustion; the
// seeds' Pickup Manager first, ours second, on the same messages.
func BenchmarkPickup(b *testing.B) {
	for _, size := range []int{100, 1000} {
		for _, pct := range []int{0, 50, 90, 99} {
			// Pools of 1000 are seeded once per layout (seeding costs ~10 s
			// in the emulator) and restored after every run; pools of 100
			// are seeded afresh for every run.
			var shared *pickupQueue
			b.Run(fmt.Sprintf("pool=%d/unsuitable=%dpct", size, pct), func(b *testing.B) {
				if size > 100 {
					b.Cleanup(func() {
						if shared != nil && theEnv != nil {
							shared.delete(theEnv)
							shared = nil
						}
					})
				}
				if pct == 0 {
					b.Run("calibrate", func(b *testing.B) {
						e := getEnv(b)
						q := shared
						if size > 100 && q == nil {
							shared = newPickupQueue(b, e, size, pct)
							q = shared
						} else if q == nil {
							q = newPickupQueue(b, e, size, pct)
							defer q.delete(e)
						}
						calibrate(b, e, q.url, size)
					})
				}
				for _, mode := range pickupModes {
					for _, algo := range []string{"baseline", "ours"} {
						b.Run(mode.name+"/"+algo, func(b *testing.B) {
							e := getEnv(b)
							if size > 100 && shared == nil {
								shared = newPickupQueue(b, e, size, pct)
							}
							benchPickup(b, e, size, pct, mode, algo, shared)
						})
					}
				}
			})
		}
	}
}

func benchPickup(b *testing.B, e *env, size, pct int, mode pickupMode, algo string, shared *pickupQueue) {
	ctx := context.Background()
	limit := examineCap(size, pct, mode, algo)
	total := pickupRun{limit: limit}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		q := shared
		if q == nil {
			q = newPickupQueue(b, e, size, pct)
		}
		counter := NewCounter()
		_, csqs, _ := e.counted(counter)
		ex := newExamSQS(csqs, limit)
		b.StartTimer()

		start := time.Now()
		var (
			handed            []protocol.Message
			exhausted, capped bool
			err               error
		)
		if algo == "ours" {
			handed, exhausted, capped, err = driveOurs(ctx, claim.NewPickup(ex, q.url, pickupWants, time.Now, nil), mode)
		} else {
			handed, exhausted, capped, err = driveBaseline(ctx, NewBaselinePickup(ex, q.url, pickupWants, time.Now), mode)
		}
		elapsed := time.Since(start)

		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		examined, distinct, most := ex.examined()
		calls := counter.Snapshot()
		total.runs++
		total.examined += examined
		total.distinct += distinct
		total.most = max(total.most, most)
		total.handed += len(handed)
		total.calls = total.calls.Add(calls)
		total.elapsed += elapsed
		total.longPolls += ex.longPolls
		if exhausted {
			total.exhausted++
		}
		if capped {
			total.capped++
		}
		if ex.timedOut {
			total.timedOut++
		}
		if shared != nil {
			q.restore(b, e, handed)
		} else {
			q.delete(e)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportPickup(b, size, pct, mode, algo, total)
}

func reportPickup(b *testing.B, size, pct int, mode pickupMode, algo string, r pickupRun) {
	key := fmt.Sprintf("%d/%d/%s", size, pct, mode.name)
	b.ReportMetric(r.callsPerMsg(), "calls/msg")
	b.ReportMetric(r.msgsPerSec(), "msgs/s")
	b.ReportMetric(float64(r.calls.Total())/float64(r.runs), "calls/op")
	b.ReportMetric(float64(r.handed)/float64(r.runs), "runners/op")
	if r.capped == 0 {
		b.ReportMetric(r.examinedPerMsg(), "examined/msg")
		b.ReportMetric(float64(r.most), "max-examined")
	}
	b.Logf("%s %s: examined %d messages (%d distinct, at most %d times), %d runners, exhausted %d/%d runs, capped %d/%d; calls per run: %s",
		algo, key, r.examined/r.runs, r.distinct/r.runs, r.most, r.handed/r.runs, r.exhausted, r.runs, r.capped, r.runs, r.calls.Per(float64(r.runs)))

	if algo == "baseline" {
		baselinePickupsMu.Lock()
		baselinePickups[key] = r
		baselinePickupsMu.Unlock()
		return
	}
	baselinePickupsMu.Lock()
	base, haveBase := baselinePickups[key]
	baselinePickupsMu.Unlock()

	describe := func(r pickupRun) string {
		s := fmt.Sprintf("%.2f calls/msg, %.0f msgs/s", r.callsPerMsg(), r.msgsPerSec())
		switch {
		case r.timedOut > 0:
			s += fmt.Sprintf(", cut at %s", pickupRunBudget)
		case r.capped > 0:
			s += fmt.Sprintf(", capped at %d msgs", r.limit)
		}
		if r.capped > 0 && r.most > 1 {
			s += fmt.Sprintf(", examined up to %d×", r.most)
		} else if r.capped == 0 {
			s += fmt.Sprintf(", examined %.2f× (max %d)", r.examinedPerMsg(), r.most)
		}
		s += fmt.Sprintf(", %.2f s, %d runners", r.elapsed.Seconds()/float64(r.runs), r.handed/r.runs)
		if r.longPolls > 0 {
			s += fmt.Sprintf(" (%.2f s of it in long polls: %.0f msgs/s without)", r.longPolls.Seconds()/float64(r.runs), r.msgsPerSecPolling())
		}
		return s
	}
	row := summaryRow{
		Section:  "1. Pickup (Pickup Manager alone; 10 workers for claim10 and exhaust)",
		Scenario: fmt.Sprintf("pool %d, %d%% unsuitable, %s", size, pct, mode.name),
		Ours:     describe(r),
	}
	if haveBase {
		ratio := r.msgsPerSec() / base.msgsPerSec()
		b.ReportMetric(ratio, "ratio-vs-baseline")
		row.Baseline = describe(base)
		row.Ratio = fmt.Sprintf("msgs/s ×%.1f, calls/msg ×%.2f", ratio, r.callsPerMsg()/base.callsPerMsg())
		if r.longPolls > 0 {
			row.Ratio += fmt.Sprintf(" (msgs/s ×%.1f without ours' long polls)", r.msgsPerSecPolling()/base.msgsPerSec())
		}
		if mode.name == "exhaust" && pct == 90 {
			row.Target = "≤0.35 calls/msg, examined once, ≥5× msgs/s"
			var missed []string
			if r.callsPerMsg() > 0.35 {
				missed = append(missed, fmt.Sprintf("%.2f calls/msg", r.callsPerMsg()))
			}
			switch {
			case r.most > 1:
				missed = append(missed, fmt.Sprintf("examined up to %d×", r.most))
			case r.capped > 0:
				missed = append(missed, "examinations not measurable (capped)")
			}
			if ratio < 5 {
				missed = append(missed, fmt.Sprintf("×%.1f msgs/s", ratio))
			}
			row.Met = yesNo(len(missed) == 0)
			if len(missed) > 0 {
				row.Met += " (" + strings.Join(missed, ", ") + ")"
			}
		}
	}
	summary.add(row)
	if mode.name == "exhaust" {
		summary.addBreakdown(fmt.Sprintf("1. pickup pool %d, %d%% unsuitable, exhaust: per message examined: %s", size, pct, r.calls.Per(float64(max(1, r.examined)))))
	}
}

// calibrate measures what the emulator charges for one receive of 1 and of
// 10 messages from a queue of size visible messages, and leaves them
// visible. Real SQS charges about the same for both; moto spends time
// proportional to the queue's length on every message it hands out.
func calibrate(b *testing.B, e *env, url string, size int) {
	ctx := context.Background()
	const rounds = 3
	b.ResetTimer()
	for range b.N {
		for _, k := range []int32{1, 10} {
			var took time.Duration
			got := 0
			for range rounds {
				start := time.Now()
				out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: k, VisibilityTimeout: 30})
				took += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				got += len(out.Messages)
				entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(out.Messages))
				for i, m := range out.Messages {
					entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}
				}
				if len(entries) > 0 {
					if _, err := e.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
						b.Fatal(err)
					}
				}
			}
			perCall := took.Seconds() * 1000 / rounds
			perMsg := took.Seconds() * 1000 / float64(max(1, got))
			b.ReportMetric(perCall, fmt.Sprintf("ms/receive-of-%d", k))
			summary.add(summaryRow{
				Section:  "0. Emulator cost model (moto 5, shared by every benchmark)",
				Scenario: fmt.Sprintf("ReceiveMessage of up to %d from a queue of %d", k, size),
				Ours:     fmt.Sprintf("%.0f ms per call, %.1f ms per message", perCall, perMsg),
			})
		}
	}
}
