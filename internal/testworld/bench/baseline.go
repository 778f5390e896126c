package bench

// This file is the BASELINE the benchmarks compare the provider with: the
// original TypeScript system's algorithms as its design documents (the
// seeds: "Pickup Manager", "Resource Pool", "Provision" and "Claim Workers")
// describe them, reproduced faithfully against the same emulator, the same
// table and the same queue messages. It is not product code and nothing but
// the benchmarks uses it; do not "fix" it, or the comparison means nothing.
//
// The seeds' Pickup Manager, per received message:
//
//  1. ReceiveMessage, one message (MaxNumberOfMessages 1), short poll.
//  2. DeleteMessage at once, before any parsing.
//  3. Count a sighting of the instance id; on its 5th sighting the message
//     is still sent back (3b) but the pool is "locally exhausted" for this
//     workflow: null to every worker from then on.
//  4. Classify in memory: pass on to a claim worker; or send the exact body
//     back with SendMessage, DelaySeconds 3, one message per call; or
//     discard (already deleted).
//
// An empty receive means "globally exhausted". The Pickup Manager is a
// singleton shared by the claim workers: one message at a time.
//
// The seeds' claim worker, for each wanted runner (N in parallel):
//
//  1. Ask the Pickup Manager for a candidate (2 SQS calls, more if it
//     requeues mismatches on the way).
//  2. Conditional UpdateItem idle -> claimed (state = idle and runId = "").
//     A failed condition: ask for another candidate.
//  3. Poll the worker signal item (GetItem) until UD_REG_OK for the run
//     (about 10 s at most).
//  4. Read the heartbeat item (GetItem): fresh within about 15 s.
//
// That is 5 calls per runner before post-provision writes each runner's
// claimed -> running transition (one UpdateItem per runner). The seeds do
// not say whether those last writes are made one after the other or at
// once; the baseline gives itself the benefit of the doubt and makes them
// concurrently. The seeds' failure paths (expire and terminate a runner
// that fails its checks, re-release runners of a failed provision) are not
// reproduced: the benchmarks' agents are healthy, and a failed baseline
// claim fails the benchmark.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The seeds' constants.
const (
	// BaselineSightingLimit: the 5th sighting of an id exhausts the pool
	// for the workflow.
	BaselineSightingLimit = 5
	// BaselineRequeueDelay is the DelaySeconds of a requeued mismatch.
	BaselineRequeueDelay = 3
	// BaselineClaimedLifetime is the threshold of an idle -> claimed write.
	BaselineClaimedLifetime = 5 * time.Minute
)

// BaselineSQS is what the seeds' Pickup Manager calls.
type BaselineSQS interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// BaselineDynamoDB is what the seeds' claim workers call.
type BaselineDynamoDB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// BaselinePickupStats count what the baseline Pickup Manager did.
type BaselinePickupStats struct {
	Received, Discarded, Requeued, Accepted int
}

// BaselinePickup is the seeds' Pickup Manager for one workflow's selection.
type BaselinePickup struct {
	sqs      BaselineSQS
	queueURL string
	wants    claim.Wants
	now      func() time.Time

	mu        sync.Mutex // the singleton: one message at a time
	sightings map[string]int
	exhausted bool
	stats     BaselinePickupStats
}

// NewBaselinePickup makes the seeds' Pickup Manager for one selection.
func NewBaselinePickup(client BaselineSQS, queueURL string, w claim.Wants, now func() time.Time) *BaselinePickup {
	if now == nil {
		now = time.Now
	}
	return &BaselinePickup{sqs: client, queueURL: queueURL, wants: w, now: now, sightings: map[string]int{}}
}

// Next returns the next suitable runner, or ok false once the pool is
// exhausted (empty receive, or the 5th sighting of an id).
func (p *BaselinePickup) Next(ctx context.Context) (protocol.Message, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.exhausted {
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(p.queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 0,
		})
		if err != nil {
			return protocol.Message{}, false, fmt.Errorf("baseline pickup: receiving: %w", err)
		}
		if len(out.Messages) == 0 {
			p.exhausted = true // globally exhausted
			break
		}
		msg := out.Messages[0]
		if msg.Body == nil || msg.ReceiptHandle == nil {
			continue // not even basic validation: left alone
		}
		if _, err := p.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.queueURL), ReceiptHandle: msg.ReceiptHandle}); err != nil {
			return protocol.Message{}, false, fmt.Errorf("baseline pickup: deleting: %w", err)
		}
		p.stats.Received++
		body := aws.ToString(msg.Body)
		m, verdict, _ := claim.Classify(body, p.wants, p.now())
		if m.ID != "" {
			// The frequency check comes before classification and takes
			// precedence: the 5th sighting is requeued and ends the pickup.
			p.sightings[m.ID]++
			if p.sightings[m.ID] >= BaselineSightingLimit {
				p.exhausted = true // locally exhausted
				if err := p.requeue(ctx, body); err != nil {
					return protocol.Message{}, false, err
				}
				break
			}
		}
		switch verdict {
		case claim.Discard:
			p.stats.Discarded++
		case claim.Requeue:
			if err := p.requeue(ctx, body); err != nil {
				return protocol.Message{}, false, err
			}
		case claim.Accept:
			p.stats.Accepted++
			return m, true, nil
		}
	}
	return protocol.Message{}, false, nil
}

func (p *BaselinePickup) requeue(ctx context.Context, body string) error {
	p.stats.Requeued++
	_, err := p.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(p.queueURL), MessageBody: aws.String(body), DelaySeconds: BaselineRequeueDelay,
	})
	if err != nil {
		return fmt.Errorf("baseline pickup: requeueing: %w", err)
	}
	return nil
}

// Close does nothing: the seeds' Pickup Manager never holds a message it
// has not handed out.
func (p *BaselinePickup) Close(context.Context) error { return nil }

// Stats reports what the baseline Pickup Manager did so far.
func (p *BaselinePickup) Stats() BaselinePickupStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// BaselineClaimer is the seeds' selection of warm runners: a Pickup Manager
// and one claim worker per wanted runner, then the transitions to running.
type BaselineClaimer struct {
	DynamoDB BaselineDynamoDB
	SQS      BaselineSQS
	// PollInterval between reads of the worker signal.
	PollInterval time.Duration
	// RegistrationWait for UD_REG_OK (the seeds: about 10 s).
	RegistrationWait time.Duration
	// HeartbeatMaxAge: an older heartbeat is unhealthy (the seeds: 15 s).
	HeartbeatMaxAge time.Duration
	Now             func() time.Time
}

// BaselineRequest is one workflow's selection of Count warm runners.
type BaselineRequest struct {
	Table, QueueURL, RunID string
	InstanceARNPrefix      string // the pool config's: the agents' partitions
	Count                  int
	Wants                  claim.Wants
	MaxRuntime             time.Duration
}

// ErrBaselineExhausted: the pool could not give every runner (the seeds
// would go on to create the rest with CreateFleet).
var ErrBaselineExhausted = errors.New("baseline: the pool is exhausted for this workflow")

func (c *BaselineClaimer) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Claim selects req.Count warm runners and marks them running. It returns
// their ids. On failure, runners already claimed are left as they are.
func (c *BaselineClaimer) Claim(ctx context.Context, req BaselineRequest) ([]string, error) {
	pm := NewBaselinePickup(c.SQS, req.QueueURL, req.Wants, c.now)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  []string
		errs []error
	)
	for range req.Count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := c.worker(ctx, pm, req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids = append(ids, id)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return ids, err
	}
	// Post-provision: every selected runner goes claimed -> running.
	threshold := protocol.FormatTime(c.now().Add(req.MaxRuntime))
	errs = nil
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.transition(ctx, req.Table, id, protocol.StateClaimed, req.RunID, protocol.StateRunning, req.RunID, threshold)
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("baseline: %s claimed -> running: %w", id, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

// worker is one claim worker: candidates until one is claimed and passes
// its checks.
func (c *BaselineClaimer) worker(ctx context.Context, pm *BaselinePickup, req BaselineRequest) (string, error) {
	for {
		m, ok, err := pm.Next(ctx)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", ErrBaselineExhausted
		}
		err = c.transition(ctx, req.Table, m.ID, protocol.StateIdle, "", protocol.StateClaimed, req.RunID,
			protocol.FormatTime(c.now().Add(BaselineClaimedLifetime)))
		var ccf *ddbtypes.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			continue // claimed by someone else: the next candidate
		}
		if err != nil {
			return "", fmt.Errorf("baseline: claiming %s: %w", m.ID, err)
		}
		if err := c.checks(ctx, req.Table, protocol.InstanceARN(req.InstanceARNPrefix, m.ID), req.RunID); err != nil {
			return "", fmt.Errorf("baseline: %s failed its checks: %w", m.ID, err)
		}
		return m.ID, nil
	}
}

// transition is the seeds' conditional write: state and runId must be as
// expected.
func (c *BaselineClaimer) transition(ctx context.Context, table, id, fromState, fromRunID, toState, toRunID, threshold string) error {
	_, err := c.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(table),
		Key:                 protocol.Key(protocol.TypeInstance, id),
		UpdateExpression:    aws.String("SET #state = :to, #runId = :toRun, #threshold = :threshold, #updatedAt = :now"),
		ConditionExpression: aws.String("#state = :from AND #runId = :fromRun"),
		ExpressionAttributeNames: map[string]string{
			"#state": protocol.AttrState, "#runId": protocol.AttrRunID, "#threshold": protocol.AttrThreshold, "#updatedAt": protocol.AttrUpdatedAt,
		},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":from": &ddbtypes.AttributeValueMemberS{Value: fromState}, ":fromRun": &ddbtypes.AttributeValueMemberS{Value: fromRunID},
			":to": &ddbtypes.AttributeValueMemberS{Value: toState}, ":toRun": &ddbtypes.AttributeValueMemberS{Value: toRunID},
			":threshold": &ddbtypes.AttributeValueMemberS{Value: threshold},
			":now":       &ddbtypes.AttributeValueMemberS{Value: protocol.FormatTime(c.now())},
		},
	})
	return err
}

// checks polls the registration signal, then reads the heartbeat, of the
// instance instanceARN.
func (c *BaselineClaimer) checks(ctx context.Context, table, instanceARN, runID string) error {
	deadline := c.now().Add(c.RegistrationWait)
	for {
		out, err := c.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(table), Key: protocol.AgentKey(instanceARN, protocol.SortKeySignal), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return err
		}
		sig, _ := protocol.SignalFromItem(out.Item)
		if sig.RunID == runID && sig.State == protocol.SignalRegistered {
			break
		}
		if sig.RunID == runID && (sig.State == protocol.SignalRegistrationFailed || sig.State == protocol.SignalUserDataFailed) {
			return fmt.Errorf("the agent signalled %s", sig.State)
		}
		if c.now().After(deadline) {
			return fmt.Errorf("no %s within %s", protocol.SignalRegistered, c.RegistrationWait)
		}
		t := time.NewTimer(c.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	out, err := c.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: protocol.AgentKey(instanceARN, protocol.SortKeyHeartbeat), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return err
	}
	_, beat, ok := protocol.HeartbeatFromItem(out.Item)
	if !ok || c.now().Sub(beat) > c.HeartbeatMaxAge {
		return fmt.Errorf("unhealthy: heartbeat %q", protocol.StringAttr(out.Item, protocol.AttrUpdatedAt))
	}
	return nil
}
