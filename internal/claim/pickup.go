package claim

import (
	"context"
	"errors"
	"fmt"
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
	// through runners it cannot use (the seeds' tolerance of 5).
	sightingLimit = 5
	// requeueDelay keeps a mismatch out of this claim's next receives.
	requeueDelay = 2
	// receiveVisibility hides a received message until it is deleted; if
	// the process dies in between, SQS hands it out again.
	receiveVisibility = 30
	// confirmWait is the long poll that confirms an empty queue: a short
	// poll samples only some SQS servers and can miss a few messages.
	confirmWait = 1
)

// Pickup is the Pickup Manager of one claim: it receives the pool's idle
// runner messages, deletes them at once, classifies them, and hands the
// suitable ones to the claim's workers. Every message it receives is either
// handed out, sent back to the queue, or discarded because it can never be
// valid.
type Pickup struct {
	sqs      SQSClient
	queueURL string
	wants    Wants
	now      func() time.Time
	log      Logger

	waiting atomic.Int32 // workers inside Next: how many messages to ask for

	mu        sync.Mutex
	ready     []protocol.Message // accepted, not yet handed out
	sightings map[string]int
	exhausted bool
	stats     PickupStats
}

// PickupStats count what the Pickup Manager did.
type PickupStats struct {
	Received, Discarded, Requeued, Accepted, Returned int
}

// NewPickup makes the Pickup Manager of one claim.
func NewPickup(client SQSClient, queueURL string, w Wants, now func() time.Time, log Logger) *Pickup {
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
	m, p.ready = p.ready[0], p.ready[1:]
	return m, true, nil
}

// fetch receives one batch, as many messages as workers are waiting (so
// concurrent claims do not hoard each other's runners), and sorts it.
func (p *Pickup) fetch(ctx context.Context) error {
	want := int32(min(10, max(1, int(p.waiting.Load()))))
	out, err := p.receive(ctx, want, 0)
	if err == nil && len(out) == 0 {
		out, err = p.receive(ctx, want, confirmWait)
	}
	if err != nil {
		return err
	}
	if len(out) == 0 {
		p.exhausted = true
		p.log("pickup: queue empty", "received", p.stats.Received)
		return nil
	}
	deleted, err := p.deleteAll(ctx, out)
	if err != nil {
		return err
	}
	var requeue []string
	for _, msg := range deleted {
		p.stats.Received++
		body := aws.ToString(msg.Body)
		m, verdict, reason := Classify(body, p.wants, p.now())
		if verdict != Discard {
			p.sightings[m.ID]++
			if p.sightings[m.ID] >= sightingLimit {
				p.exhausted = true // cycling: stop after sorting this batch
			}
		}
		switch verdict {
		case Discard:
			p.stats.Discarded++
			p.log("pickup: discarded message", "reason", reason)
		case Requeue:
			p.stats.Requeued++
			requeue = append(requeue, body)
			p.log("pickup: requeued runner", "instance", m.ID, "reason", reason)
		case Accept:
			p.stats.Accepted++
			p.ready = append(p.ready, m)
		}
	}
	return sendAll(ctx, p.sqs, p.queueURL, requeue, requeueDelay)
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

// deleteAll deletes a received batch and returns the messages deleted; one
// SQS did not delete stays in the queue for others, so it is not used here.
func (p *Pickup) deleteAll(ctx context.Context, msgs []sqstypes.Message) ([]sqstypes.Message, error) {
	entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	out, err := p.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.queueURL), Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("deleting received messages from %s: %w", p.queueURL, err)
	}
	var deleted []sqstypes.Message
	for _, ok := range out.Successful {
		i, _ := strconv.Atoi(aws.ToString(ok.Id))
		deleted = append(deleted, msgs[i])
	}
	return deleted, nil
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

// Close returns every runner received but not handed out.
func (p *Pickup) Close(ctx context.Context) error {
	p.mu.Lock()
	surplus := p.ready
	p.ready, p.exhausted = nil, true
	p.mu.Unlock()
	if len(surplus) == 0 {
		return nil
	}
	return p.Return(ctx, surplus...)
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
