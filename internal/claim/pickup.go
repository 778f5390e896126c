package claim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

const (
	// sightingLimit: an id seen this many times means the claim is cycling
	// through runners it cannot use (the seeds' tolerance of 5). Mismatches
	// stay hidden until Close, so only duplicate messages can trip it.
	sightingLimit = 5
	// batchSize is SQS's most messages per receive, delete or send.
	batchSize = 10
	// receiveVisibility hides a received message from other claims while
	// this one holds it: a mismatch until Close, a candidate until it is
	// deleted. If the process dies, SQS hands them out again after it.
	receiveVisibility = 120
	// confirmWait is the long poll that confirms an empty queue: a short
	// poll samples only some SQS servers and can miss a few messages.
	confirmWait = 1
)

// Pickup is the Pickup Manager of one claim: it receives the pool's idle
// runner messages ten at a time, classifies them, and hands the suitable ones
// to the claim's workers. Mismatches are not deleted and sent again: they
// stay invisible until Close makes them visible again, so this claim looks
// at each message once, other claims see them as soon as it is done, and a
// crash loses none (SQS shows them again when their visibility ends).
// Every message it receives is handed out (and deleted), made visible
// again, or deleted because it can never be valid.
type Pickup struct {
	sqs      SQSClient
	queueURL string
	wants    Wants
	now      func() time.Time
	log      Logger

	waiting atomic.Int32 // workers inside Next: how many runners are needed

	mu        sync.Mutex
	ready     []candidate // accepted, not yet handed out
	held      []*string   // receipt handles of mismatches, visible again at Close
	sightings map[string]int
	exhausted bool
	stats     PickupStats
}

// candidate is an accepted message; deleted once it is about to be handed out.
type candidate struct {
	m       protocol.Message
	handle  *string
	deleted bool
}

// PickupStats count what the Pickup Manager did.
type PickupStats struct {
	Received, Discarded, Requeued, Accepted, Returned int
}

// NewPickup makes the Pickup Manager of one claim; log may be nil.
func NewPickup(client SQSClient, queueURL string, w Wants, now func() time.Time, log Logger) *Pickup {
	if log == nil {
		log = func(string, ...any) {}
	}
	return &Pickup{sqs: client, queueURL: queueURL, wants: w, now: now, log: log, sightings: map[string]int{}}
}

// Next returns the next suitable runner, or ok false once the pool is
// exhausted for this claim. Safe for concurrent workers.
func (p *Pickup) Next(ctx context.Context) (m protocol.Message, ok bool, err error) {
	p.waiting.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.waiting.Add(-1)
	for len(p.ready) == 0 && !p.exhausted {
		if err := p.fetch(ctx); err != nil {
			return protocol.Message{}, false, err
		}
	}
	if len(p.ready) == 0 {
		return protocol.Message{}, false, nil
	}
	if !p.ready[0].deleted {
		// Delete it with the ones the other waiting workers take next.
		if err := p.deleteReady(ctx, max(1, int(p.waiting.Load()))); err != nil {
			return protocol.Message{}, false, err
		}
	}
	c := p.ready[0]
	p.ready = p.ready[1:]
	return c.m, true, nil
}

// fetch receives one batch and sorts it: discards are deleted, mismatches
// held, candidates kept for the workers. It asks for as many messages as
// the waiting workers need at the share of suitable runners seen so far:
// few when most runners fit (others claims find the rest), ten when most
// do not (the fewest calls per message).
func (p *Pickup) fetch(ctx context.Context) error {
	fit := float64(p.stats.Accepted+1) / float64(p.stats.Received+1)
	want := int32(min(batchSize, int(math.Ceil(float64(max(1, p.waiting.Load()))/fit))))
	out, err := p.receive(ctx, want, 0)
	if err == nil && len(out) == 0 {
		out, err = p.receive(ctx, batchSize, confirmWait)
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
	for _, msg := range out {
		p.stats.Received++
		m, verdict, reason := Classify(aws.ToString(msg.Body), p.wants, p.now())
		if verdict != Discard {
			p.sightings[m.ID]++
			if p.sightings[m.ID] >= sightingLimit {
				p.exhausted = true // cycling: stop after sorting this batch
			}
		}
		switch verdict {
		case Discard:
			p.stats.Discarded++
			discard = append(discard, msg.ReceiptHandle)
			p.log("pickup: discarded message", "reason", reason)
		case Requeue:
			p.stats.Requeued++
			p.held = append(p.held, msg.ReceiptHandle)
			p.log("pickup: held back runner", "instance", m.ID, "reason", reason)
		case Accept:
			p.stats.Accepted++
			p.ready = append(p.ready, candidate{m: m, handle: msg.ReceiptHandle})
		}
	}
	_, err = p.deleteHandles(ctx, discard)
	return err
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

// deleteReady deletes the first n undeleted candidates in one batch. A
// failed entry may still have been deleted (a retried batch whose first
// answer was lost fails on a handle already used), so the candidate is
// handed out anyway: the conditional claim decides, and a message left
// behind is a stale one, dropped by whoever receives it.
func (p *Pickup) deleteReady(ctx context.Context, n int) error {
	var idx []int
	var handles []*string
	for i := 0; i < len(p.ready) && len(idx) < min(n, batchSize); i++ {
		if !p.ready[i].deleted {
			idx = append(idx, i)
			handles = append(handles, p.ready[i].handle)
		}
	}
	ok, err := p.deleteHandles(ctx, handles)
	if err != nil {
		return err
	}
	for j, i := range idx {
		p.ready[i].deleted = true
		if !ok[j] {
			p.log("pickup: SQS did not confirm deleting a runner's message", "instance", p.ready[i].m.ID)
		}
	}
	return nil
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
		if err == nil && len(out.Failed) > 0 {
			err = errors.New(aws.ToString(out.Failed[0].Message))
		}
		if err != nil {
			p.log("pickup: runners stay hidden until their visibility timeout", "count", len(chunk), "error", err.Error())
		}
	}
}

// Return sends runners back to the queue at once: the surplus a claim did
// not need, or one a worker could not try because of a transient error.
func (p *Pickup) Return(ctx context.Context, msgs ...protocol.Message) error {
	bodies := make([]string, len(msgs))
	for i, m := range msgs {
		bodies[i] = m.Body()
	}
	p.mu.Lock()
	p.stats.Returned += len(msgs)
	p.mu.Unlock()
	return sendAll(ctx, p.sqs, p.queueURL, bodies, 0)
}

// Close makes every runner received but not handed out available again:
// held mismatches and undeleted candidates become visible, candidates
// already deleted are sent again.
func (p *Pickup) Close(ctx context.Context) error {
	p.mu.Lock()
	handles := p.held
	var resend []protocol.Message
	for _, c := range p.ready {
		if c.deleted {
			resend = append(resend, c.m)
		} else {
			handles = append(handles, c.handle)
			p.stats.Returned++
		}
	}
	p.ready, p.held, p.exhausted = nil, nil, true
	p.mu.Unlock()
	p.makeVisible(ctx, handles)
	if len(resend) == 0 {
		return nil
	}
	return p.Return(ctx, resend...)
}

// Stats reports what the Pickup Manager did so far.
func (p *Pickup) Stats() PickupStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// sendRetries bounds resending the entries a batch send failed: a message
// that cannot be sent back is a runner the pool no longer knows of.
const sendRetries = 5

// sendAll sends bodies in batches of ten, retrying failed entries.
func sendAll(ctx context.Context, client SQSClient, queueURL string, bodies []string, delay int32) error {
	for start := 0; start < len(bodies); start += 10 {
		pending := bodies[start:min(start+10, len(bodies))]
		var lastErr error
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt == sendRetries {
				return fmt.Errorf("sending %d runner message(s) back to %s failed: %w", len(pending), queueURL, lastErr)
			}
			if attempt > 0 {
				if err := sleep(ctx, time.Duration(attempt)*200*time.Millisecond); err != nil {
					return fmt.Errorf("sending %d runner message(s) back to %s: %w", len(pending), queueURL, err)
				}
			}
			entries := make([]sqstypes.SendMessageBatchRequestEntry, len(pending))
			for i, b := range pending {
				entries[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b), DelaySeconds: delay}
			}
			out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
			if err != nil {
				lastErr = err
				continue
			}
			var failed []string
			for _, f := range out.Failed {
				i, _ := strconv.Atoi(aws.ToString(f.Id))
				failed = append(failed, pending[i])
				lastErr = errors.New(aws.ToString(f.Message))
			}
			pending = failed
		}
	}
	return nil
}

// Logger records what a claim does: a message and key/value pairs.
type Logger func(msg string, keyvals ...any)
