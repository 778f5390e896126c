// Package audit checks a pool's invariants from the outside, as the
// fault-injection tests need them: every instance record is owned by
// exactly one live claim, or idle with a message in its queue (or in its
// stopped time, its instance known to EC2), or terminated; no running EC2 instance tagged for the pool is untracked. It reads the table, the
// queues and EC2, and changes nothing (messages it peeks at are made
// visible again at once).
package audit

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// Clients read the pool; use ones that talk to AWS directly, not through
// a fault-injecting proxy.
type Clients struct {
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
	EC2      *ec2.Client
}

// Report is what the audit found.
type Report struct {
	Violations []string
	// Counts of records by state, of records in the stopped tier (idle),
	// and of messages.
	States   map[string]int
	Stopped  int
	Messages int
	// Duplicates are idle instances with more than one message (a retried
	// send): harmless, the extra one is dropped when received.
	Duplicates []string
	// Stale are instances, claimed or running, that a message still names:
	// on AWS a delete with a receipt handle that is no longer the newest
	// succeeds and deletes nothing, so one can be left behind; harmless,
	// the next claim that receives it finds the record not idle and drops
	// it.
	Stale []string
	// InFlightWait is how long the audit waited for messages in flight to
	// become visible again (see awaitInFlight).
	InFlightWait time.Duration
}

// OK tells whether every invariant holds.
func (r Report) OK() bool { return len(r.Violations) == 0 }

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "states %v (%d idle stopped), %d messages, %d duplicates, %d stale", r.States, r.Stopped, r.Messages, len(r.Duplicates), len(r.Stale))
	if r.InFlightWait > 0 {
		fmt.Fprintf(&b, " (waited %s for messages in flight)", r.InFlightWait.Round(time.Second))
	}
	for _, v := range r.Violations {
		b.WriteString("\n  violation: " + v)
	}
	return b.String()
}

// Pool audits the named pool. Call it at rest: no claim or release running,
// requeue delays over.
func Pool(ctx context.Context, c Clients, poolName string) (Report, error) {
	rep := Report{States: map[string]int{}}
	records, err := pool.ListInstances(ctx, c.DynamoDB, poolName)
	if err != nil {
		return rep, err
	}
	owners, err := claimOwners(ctx, c.DynamoDB, poolName)
	if err != nil {
		return rep, err
	}
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
	if err != nil {
		return rep, err
	}
	messages := map[string]int{}
	for _, url := range cfg.QueueURLs {
		waited, err := awaitInFlight(ctx, c.SQS, url)
		if err != nil {
			return rep, err
		}
		rep.InFlightWait += waited
		if err := peek(ctx, c.SQS, url, func(m protocol.Message) { messages[m.ID]++; rep.Messages++ }); err != nil {
			return rep, err
		}
	}
	running, err := pool.LiveInstances(ctx, c.EC2, poolName)
	if err != nil {
		return rep, err
	}
	now := time.Now()
	violate := func(format string, args ...any) {
		rep.Violations = append(rep.Violations, fmt.Sprintf(format, args...))
	}
	byID := map[string]protocol.Instance{}
	for _, r := range records {
		byID[r.ID] = r
		rep.States[r.State]++
		switch r.State {
		case protocol.StateTerminated:
			if _, runs := running[r.ID]; runs {
				violate("%s is terminated in the table but runs in EC2", r.ID)
			}
		case protocol.StateIdle:
			if r.RunID != "" {
				violate("%s is idle but owned by run %s", r.ID, r.RunID)
			}
			if r.Stopped(now) {
				// The stopped tier: found through its slot, not the queue.
				rep.Stopped++
				if _, exists := running[r.ID]; !exists {
					violate("%s is in the stopped tier but EC2 has no such instance", r.ID)
				}
				continue
			}
			switch n := messages[r.ID]; {
			case n == 0:
				violate("%s is idle without a message: no claim can find it", r.ID)
			case n > 1:
				rep.Duplicates = append(rep.Duplicates, r.ID)
			}
		default: // created, claimed, running
			if n := len(owners[r.ID]); n != 1 || owners[r.ID][0] != r.RunID {
				violate("%s is %s for run %q but is listed by the claim records of %v", r.ID, r.State, r.RunID, owners[r.ID])
			}
		}
	}
	for id := range messages {
		if r, ok := byID[id]; ok && r.State != protocol.StateIdle && r.State != protocol.StateTerminated {
			rep.Stale = append(rep.Stale, id)
		}
	}
	for id := range running {
		if _, ok := byID[id]; !ok {
			violate("%s runs in EC2 with the pool's tag but has no record", id)
		}
	}
	sort.Strings(rep.Violations)
	return rep, nil
}

// claimOwners maps instance ids to the runs whose claim records list them.
func claimOwners(ctx context.Context, db *dynamodb.Client, poolName string) (map[string][]string, error) {
	owners := map[string][]string{}
	err := table.Partition(ctx, db, protocol.TableName(poolName), protocol.TypeClaim, func(item table.Item) error {
		ids, _ := item[table.AttrInstanceIDs].(*types.AttributeValueMemberSS)
		if ids != nil {
			for _, id := range ids.Value {
				owners[id] = append(owners[id], protocol.IdentifierOf(item))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for id := range owners {
		slices.Sort(owners[id])
	}
	return owners, nil
}

// inFlightLimit bounds awaitInFlight: longer than the visibility timeout of
// any receive in this project (the Pickup Manager's 120 s).
const inFlightLimit = 150 * time.Second

// awaitInFlight waits until no message of the queue is in flight or
// delayed. At rest nothing holds messages, but a receive whose answer was
// lost (a fault, a crash) hides what it received until its visibility
// timeout ends: those runners are not lost, only out of sight for a while.
func awaitInFlight(ctx context.Context, q *sqs.Client, url string) (time.Duration, error) {
	start := time.Now()
	for {
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
			},
		})
		if err != nil {
			return time.Since(start), err
		}
		hidden := 0
		for _, v := range out.Attributes {
			n, _ := strconv.Atoi(v)
			hidden += n
		}
		if hidden == 0 || time.Since(start) > inFlightLimit {
			return time.Since(start).Truncate(time.Second), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// peek receives every message of a queue and makes them visible again.
func peek(ctx context.Context, q *sqs.Client, url string, fn func(protocol.Message)) error {
	var handles []sqstypes.ChangeMessageVisibilityBatchRequestEntry
	seen := map[string]bool{}
	for empty := 0; empty < 1; {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 30, WaitTimeSeconds: 1})
		if err != nil {
			return err
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range out.Messages {
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			if msg, err := protocol.ParseMessage(aws.ToString(m.Body)); err == nil {
				fn(msg)
			}
			handles = append(handles, sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(len(handles))), ReceiptHandle: m.ReceiptHandle})
		}
	}
	for start := 0; start < len(handles); start += 10 {
		// A zero VisibilityTimeout is sent here (ReceiveMessage drops it).
		if _, err := q.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: handles[start:min(start+10, len(handles))]}); err != nil {
			return err
		}
	}
	return nil
}
