package claim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

const (
	// sightingLimit: a runner, or one message, seen this many times means
	// the claim is cycling through runners it cannot use (the original
	// design's tolerance of 5): mismatches it handed back and received
	// again at later Takes, several messages of one runner, or one message
	// delivered again and again while the claim holds it.
	sightingLimit = 5
	// batchSize is SQS's most messages per receive, delete or send.
	batchSize = awslimits.MaxBatchEntries
	// receiveVisibility hides a received message from other claims while
	// this one holds it: a mismatch until Close, a candidate until its
	// runner is claimed. If the process dies, SQS hands them out again after it.
	receiveVisibility = 120
	// confirmWait is the long poll that confirms an empty queue: a short
	// poll samples only some SQS servers and can miss a few messages.
	confirmWait = 1
	// inFlightPolls bounds the long polls of a claim that finds the queue
	// empty while other claims hold messages in flight, counted from the
	// last runner it accepted that it had not seen before. In a burst, each
	// claim hides the runners it received while it sorts them, and makes
	// those it does not take visible again a moment later: a claim that
	// launched instead would leave a warm runner idle.
	inFlightPolls = 10
	// consumeBudget bounds the deletes of claimed runners' messages, which
	// outlive a cancelled claim.
	consumeBudget = 30 * time.Second
)

// Pickup is the Pickup Manager of one claim: it receives the pool's idle
// runner messages ten at a time, classifies them, and hands the suitable ones
// to the claim. Nothing it receives is deleted before its runner is claimed,
// and mismatches are not deleted and sent again: a message stays in flight,
// hidden from other claims, while the claim takes runners; what it does not
// hand to the claim is made visible again when the claim stops taking for a
// while (HandBack, before it waits for its agents), and a runner handed
// over stays hidden until Consume deletes its message (claimed, or the
// message is stale) or Close makes it visible again. So Takes that follow
// each other look at each message once, other claims see the rest as soon
// as this one waits, and a crash loses none: SQS shows them again when their
// visibility ends. Only messages that can never be valid are deleted at
// once.
type Pickup struct {
	sqs      SQSClient
	queueURL string
	wants    Wants
	now      func() time.Time
	log      Logger

	mu        sync.Mutex
	ready     []candidate       // suitable, not yet taken
	taken     []candidate       // handed to the claim, not yet consumed
	held      []candidate       // mismatches
	sightings map[string]int    // runners and messages, since the claim last handed them back
	seen      map[string]bool   // runners ever received
	retired   map[string]string // runners to end, and why, not yet handed to the claim
	exhausted bool
	// lookedAgain: the claim found the queue empty, nobody else holding
	// anything, and looked once more (see awaitMessages).
	lookedAgain bool
	// waits counts the long polls for messages other claims hold since the
	// claim last accepted a runner it had not seen (see inFlightPolls).
	waits int
	stats PickupStats
	// Sleep waits d unless ctx ends first (nil: a timer); a simulation on
	// a virtual clock sets it with now.
	Sleep     func(ctx context.Context, d time.Duration) error
	consuming sync.WaitGroup // deletes under way
}

// candidate is a received message (a suitable runner's, or a mismatch), its
// SQS message id and its newest receipt handle.
type candidate struct {
	m         protocol.Message
	messageID string
	handle    *string
}

// PickupStats count what the Pickup Manager did. InFlightWaits counts the
// long polls it made, past the confirming one, for messages other claims
// held.
type PickupStats struct {
	Received, Discarded, Requeued, Accepted, Returned, Retired, InFlightWaits int
}

// NewPickup makes the Pickup Manager of one claim; log may be nil.
func NewPickup(client SQSClient, queueURL string, w Wants, now func() time.Time, log Logger) *Pickup {
	if log == nil {
		log = func(string, ...any) {}
	}
	return &Pickup{sqs: client, queueURL: queueURL, wants: w, now: now, log: log, sightings: map[string]int{}, seen: map[string]bool{}, retired: map[string]string{}}
}

// Take returns n suitable runners, fewer only when the pool is exhausted for
// this claim (then every later Take returns none). Their messages stay in
// flight until Consume or Close; what else it received stays in flight
// until HandBack or Close, so that the next Take does not receive it again.
func (p *Pickup) Take(ctx context.Context, n int) ([]protocol.Message, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready) < n && !p.exhausted {
		if err := p.fetch(ctx, n-len(p.ready)); err != nil {
			return nil, err
		}
	}
	k := min(n, len(p.ready))
	out := make([]protocol.Message, k)
	for i, c := range p.ready[:k] {
		out[i] = c.m
	}
	p.taken = append(p.taken, p.ready[:k]...)
	p.ready = p.ready[k:]
	return out, nil
}

// HandBack makes the messages this claim received but does not need
// visible again at once: surplus candidates and mismatches. The claim calls
// it when it stops taking runners for a while (it waits for its agents):
// held until Close, they would hide runners from concurrent claims for as
// long as it waits, and in a burst those claims find the queue empty and
// launch. A later Take (a runner that failed its checks) may receive them
// again; that is rare, and cheaper than a launch.
func (p *Pickup) HandBack(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	handles := handlesOf(p.ready)
	p.stats.Returned += len(p.ready)
	p.ready = nil
	p.makeVisible(ctx, append(handles, p.releaseHeld()...))
}

// releaseHeld lets go of the mismatches held and returns their receipt
// handles, to be made visible. Their sightings are forgotten: receiving
// again a runner the claim handed back is not cycling, and claims of a
// burst hand the same runners back and forth until each finds its own.
// The waits that follow are bounded (inFlightPolls).
func (p *Pickup) releaseHeld() []*string {
	for _, c := range p.held {
		delete(p.sightings, c.m.ID)
	}
	handles := handlesOf(p.held)
	p.held = nil
	return handles
}

// handlesOf lists the receipt handles of received messages.
func handlesOf(cs []candidate) []*string {
	handles := make([]*string, len(cs))
	for i, c := range cs {
		handles[i] = c.handle
	}
	return handles
}

// fetch receives one batch and sorts it: discards are deleted, mismatches
// held, candidates kept. It asks for as many messages as need runners take
// at the share of suitable runners seen so far: few when most runners fit
// (other claims find the rest), ten when most do not (the fewest calls per
// message).
func (p *Pickup) fetch(ctx context.Context, need int) error {
	fit := float64(p.stats.Accepted+1) / float64(p.stats.Received+1)
	want := int32(min(batchSize, int(math.Ceil(float64(max(1, need))/fit))))
	out, err := p.receive(ctx, want, 0)
	if err == nil && len(out) == 0 {
		out, err = p.awaitMessages(ctx, want)
	}
	if err != nil {
		return err
	}
	if len(out) == 0 {
		p.exhausted = true
		p.log("pickup: queue empty", "received", p.stats.Received)
		return nil
	}
	var discard []*string
	fresh := false    // a runner this claim had not seen
	accepted := false // a suitable runner
	for _, msg := range out {
		m, verdict, reason := Classify(aws.ToString(msg.Body), p.wants, p.now())
		// SQS delivers at least once: the same message again (a duplicate
		// delivery, or its visibility ended while this claim held it) comes
		// with a new receipt handle, the only one sure to work. It is the
		// message this claim holds, not another one for its runner: it
		// counts as a sighting of the message, not of the runner.
		if p.redelivered(aws.ToString(msg.MessageId), msg.ReceiptHandle) {
			p.sighted("message " + aws.ToString(msg.MessageId))
			continue
		}
		if verdict != Discard && verdict != Retire {
			p.sighted(m.ID)
			if !p.seen[m.ID] {
				p.seen[m.ID] = true
				fresh = true
				if verdict == Accept {
					p.waits = 0
				}
			}
		}
		p.stats.Received++
		if verdict == Accept && p.holdsRunner(m.ID) {
			// Until the claim settles the runner, neither message is known
			// to be the stale one: both go back at Close.
			verdict, reason = Requeue, "a second message for a runner this claim holds"
		}
		c := candidate{m: m, messageID: aws.ToString(msg.MessageId), handle: msg.ReceiptHandle}
		switch verdict {
		case Discard:
			p.stats.Discarded++
			discard = append(discard, msg.ReceiptHandle)
			p.log("pickup: discarded message", "reason", reason)
		case Retire:
			p.stats.Retired++
			discard = append(discard, msg.ReceiptHandle)
			p.retired[m.ID] = reason
			p.log("pickup: retiring runner", "instance", m.ID, "reason", reason)
		case Requeue:
			p.stats.Requeued++
			p.held = append(p.held, c)
			p.log("pickup: held back runner", "instance", m.ID, "reason", reason)
		case Accept:
			p.stats.Accepted++
			p.ready = append(p.ready, c)
			accepted = true
		}
	}
	if _, err := p.deleteHandles(ctx, discard); err != nil {
		return err
	}
	if !fresh && !accepted {
		return p.stepAside(ctx)
	}
	return nil
}

// stepAside follows a batch of runners the claim had judged before and
// handed back: mismatches it receives again. Once it has looked once more
// (see awaitMessages), they are all there is, unless other claims hold
// messages. While others do, the claim hands its mismatches back at once
// and waits before its next receive: in a burst, the runners it keeps
// receiving are the ones other claims wait for, and receiving them again
// at once would hide them from those claims for good.
func (p *Pickup) stepAside(ctx context.Context) error {
	others, known := p.othersHolding(ctx)
	switch {
	case !known:
		p.exhausted = true
		return nil
	case others == 0:
		p.exhausted = p.exhausted || p.lookedAgain
		return nil
	case p.waits == inFlightPolls:
		p.exhausted = true
		return nil
	}
	p.makeVisible(ctx, p.releaseHeld())
	p.log("pickup: received only runners already seen while other claims hold messages; stepping aside", "in_flight", others)
	p.waited()
	return sleepOn(p.Sleep, ctx, confirmWait*time.Second)
}

// waited counts one wait for messages other claims hold.
func (p *Pickup) waited() {
	p.waits++
	p.stats.InFlightWaits++
}

// sighted counts a sighting of a runner, or of a message delivered again;
// at sightingLimit the claim is cycling, and stops after sorting this batch.
func (p *Pickup) sighted(key string) {
	p.sightings[key]++
	if p.sightings[key] >= sightingLimit {
		p.exhausted = true
	}
}

// Retired hands over the runners whose messages said they must leave the
// pool (Retire), with why, since the last call; their messages are gone,
// and the claim ends them.
func (p *Pickup) Retired() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.retired
	p.retired = map[string]string{}
	return out
}

// holdsRunner tells whether a runner's message was accepted and the claim
// has not settled it yet (ready or taken, not consumed). A runner consumed
// is judged afresh by a later message: given back meanwhile, it is idle
// again, and if not, its claim write fails and the message is dropped.
func (p *Pickup) holdsRunner(id string) bool {
	inList := func(c candidate) bool { return c.m.ID == id }
	return slices.ContainsFunc(p.ready, inList) || slices.ContainsFunc(p.taken, inList)
}

// redelivered records handle as the newest of a message this claim already
// holds, and tells whether it held it.
func (p *Pickup) redelivered(messageID string, handle *string) bool {
	if messageID == "" {
		return false
	}
	for _, list := range [][]candidate{p.ready, p.taken, p.held} {
		for i := range list {
			if list[i].messageID == messageID {
				list[i].handle = handle
				return true
			}
		}
	}
	return false
}

// awaitMessages long-polls a queue that looked empty: once to confirm it,
// and again while other claims hold messages in flight, at most
// inFlightPolls times since the claim last accepted a new runner. It asks
// for no more than want: a long poll answers with what it finds, and a
// batch this claim does not need would be hidden from the claims started
// with it.
func (p *Pickup) awaitMessages(ctx context.Context, want int32) ([]sqstypes.Message, error) {
	for {
		out, err := p.receive(ctx, want, confirmWait)
		if err != nil || len(out) > 0 || p.waits == inFlightPolls {
			return out, err
		}
		// Claims that find the queue empty may each hold runners that
		// another one waits for: each hands its mismatches back. A claim
		// looks once more even when nobody else seems to hold anything: a
		// message may become visible just after a poll (handed back, or
		// its visibility run out), and SQS's count is approximate and may
		// lag, the more in a burst, where messages change hands: a zero
		// it read may miss what other claims hold now. It counts before it
		// hands back: its own messages are left out only while it holds
		// them.
		others, known := p.othersHolding(ctx)
		mismatches := len(p.held)
		p.makeVisible(ctx, p.releaseHeld())
		if !known {
			return nil, nil
		}
		switch {
		case others > 0:
			p.log("pickup: queue empty while other claims hold messages; waiting for them", "in_flight", others)
		case !p.lookedAgain:
			p.lookedAgain = true
			p.log("pickup: queue empty; looking once more", "mismatches_handed_back", mismatches)
		default:
			return nil, nil
		}
		p.waited()
	}
}

// othersHolding is othersInFlight, and whether it is known: an error is
// logged, and the caller takes the queue as empty.
func (p *Pickup) othersHolding(ctx context.Context) (int, bool) {
	others, err := p.othersInFlight(ctx)
	if err != nil {
		p.log("pickup: cannot tell whether other claims hold messages; taking the queue as empty", "error", err.Error())
	}
	return others, err == nil
}

// othersInFlight is the number of the queue's messages in flight that this
// claim does not hold: SQS's approximate count less what it holds.
func (p *Pickup) othersInFlight(ctx context.Context) (int, error) {
	out, err := p.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(p.queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		return 0, fmt.Errorf("reading the in-flight count of %s: %w", p.queueURL, err)
	}
	raw := out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
	n, err := strconv.Atoi(raw)
	if err != nil {
		return 0, fmt.Errorf("reading the in-flight count of %s: %q is not a number", p.queueURL, raw)
	}
	return max(0, n-len(p.ready)-len(p.taken)-len(p.held)), nil
}

func (p *Pickup) receive(ctx context.Context, n int32, wait int32) ([]sqstypes.Message, error) {
	out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(p.queueURL),
		MaxNumberOfMessages: n,
		VisibilityTimeout:   receiveVisibility,
		WaitTimeSeconds:     wait,
	})
	if err != nil {
		return nil, fmt.Errorf("receiving from %s: %w", p.queueURL, err)
	}
	return out.Messages, nil
}

// Consume deletes the messages of taken runners: claimed ones, and ones the
// claim found owned by someone else (stale messages). The deletes run in the
// background, overlapping the claim's next calls, and are not cancelled with
// the claim (a runner it gives back would have two messages); Close waits
// for them. A delete that fails only logs: the message left behind is
// stale, dropped by whoever receives it (a retried batch whose first answer
// was lost even fails on a handle already used).
func (p *Pickup) Consume(ctx context.Context, ids []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var handles []*string
	for _, id := range ids {
		i := slices.IndexFunc(p.taken, func(c candidate) bool { return c.m.ID == id })
		if i < 0 {
			continue
		}
		handles = append(handles, p.taken[i].handle)
		p.taken = slices.Delete(p.taken, i, i+1)
	}
	if len(handles) == 0 {
		return
	}
	p.consuming.Add(1)
	go func() {
		defer p.consuming.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), consumeBudget)
		defer cancel()
		ok, err := p.deleteHandles(ctx, handles)
		if err != nil {
			p.log("pickup: deleting claimed runners' messages failed; they are stale now", "count", len(handles), "error", err.Error())
			return
		}
		for i, deleted := range ok {
			if !deleted {
				p.log("pickup: SQS did not confirm deleting a claimed runner's message", "handle", aws.ToString(handles[i]))
			}
		}
	}()
}

// deleteHandles deletes messages in batches and reports which were deleted.
func (p *Pickup) deleteHandles(ctx context.Context, handles []*string) ([]bool, error) {
	ok := make([]bool, len(handles))
	for start := 0; start < len(handles); start += batchSize {
		chunk := handles[start:min(start+batchSize, len(handles))]
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(chunk))
		for i, h := range chunk {
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(start + i)), ReceiptHandle: h}
		}
		out, err := p.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.queueURL), Entries: entries})
		if err != nil {
			return nil, fmt.Errorf("deleting received messages from %s: %w", p.queueURL, err)
		}
		for _, s := range out.Successful {
			i, _ := strconv.Atoi(aws.ToString(s.Id))
			ok[i] = true
		}
	}
	return ok, nil
}

// makeVisible ends the invisibility of held messages. A failure only logs:
// their visibility timeout ends anyway.
func (p *Pickup) makeVisible(ctx context.Context, handles []*string) {
	for start := 0; start < len(handles); start += batchSize {
		chunk := handles[start:min(start+batchSize, len(handles))]
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, h := range chunk {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: h, VisibilityTimeout: 0}
		}
		out, err := p.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(p.queueURL), Entries: entries})
		failed := len(chunk)
		if err == nil && len(out.Failed) > 0 {
			failed, err = len(out.Failed), errors.New(aws.ToString(out.Failed[0].Message))
		}
		if err != nil {
			p.log("pickup: runners stay hidden until their visibility timeout", "count", failed, "error", err.Error())
		}
	}
}

// Close waits for the deletes under way and makes every message still held
// visible again: mismatches, and runners taken or ready but not consumed.
// Failures only log (the messages' visibility ends anyway).
func (p *Pickup) Close(ctx context.Context) {
	p.consuming.Wait()
	p.mu.Lock()
	handles := handlesOf(slices.Concat(p.held, p.ready, p.taken))
	p.stats.Returned += len(p.ready) + len(p.taken)
	p.ready, p.taken, p.held, p.exhausted = nil, nil, nil, true
	p.mu.Unlock()
	p.makeVisible(ctx, handles)
}

// Stats reports what the Pickup Manager did so far.
func (p *Pickup) Stats() PickupStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// sendRetries paces resending the entries a batch send failed, and bounds
// it: a message that cannot be sent back is a runner the pool no longer
// knows of. Its waits, 2.2 s in all, ride out a brief SQS failure.
var sendRetries = retry.Policy{Backoff: retry.Backoff{First: 200 * time.Millisecond, Max: 800 * time.Millisecond}, Attempts: 5}

// sendAll sends bodies in batches of ten, retrying failed entries.
func sendAll(ctx context.Context, client SQSClient, queueURL string, bodies []string, delay int32) error {
	for start := 0; start < len(bodies); start += 10 {
		pending := bodies[start:min(start+10, len(bodies))]
		err := retry.Do(ctx, sendRetries, func() error {
			entries := make([]sqstypes.SendMessageBatchRequestEntry, len(pending))
			for i, b := range pending {
				entries[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b), DelaySeconds: delay}
			}
			out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
			if err != nil {
				return err
			}
			var failed []string
			for _, f := range out.Failed {
				i, _ := strconv.Atoi(aws.ToString(f.Id))
				failed = append(failed, pending[i])
				err = errors.New(aws.ToString(f.Message))
			}
			pending = failed
			return err
		})
		if err != nil {
			return fmt.Errorf("sending %d runner message(s) back to %s: %w", len(pending), queueURL, err)
		}
	}
	return nil
}

// Logger records what a claim does: a message and key/value pairs.
type Logger func(msg string, keyvals ...any)
