package pool

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

// queueRecreateBackoff paces retries while SQS still holds a deleted queue's
// name (it does so for 60 s), as happens when a pool is replaced.
var queueRecreateBackoff = 5 * time.Second

// queueTags are the tags of one class's queue: the pool's, and the owner
// tags that say whose queue it is.
func queueTags(pool, class string, tags map[string]string) map[string]string {
	out := maps.Clone(tags)
	if out == nil {
		out = map[string]string{}
	}
	out[protocol.TagPool], out[protocol.TagClass] = pool, class
	return out
}

// checkQueueOwner refuses a queue whose owner tags name another pool or
// class, or, unless untaggedIsOurs, a queue without them: queue names are
// unique per account and region, not per pool.
func checkQueueOwner(url string, tags map[string]string, pool, class string, untaggedIsOurs bool) error {
	p, hasPool := tags[protocol.TagPool]
	c, hasClass := tags[protocol.TagClass]
	switch {
	case p == pool && c == class:
		return nil
	case !hasPool && !hasClass && untaggedIsOurs:
		return nil
	case !hasPool && !hasClass:
		return fmt.Errorf("SQS queue %s already exists and was not created by pool %s (it has no %s or %s tag); "+
			"delete it, or choose another pool name or resource class (to hand it to the pool, tag it %s=%s and %s=%s)",
			url, pool, protocol.TagPool, protocol.TagClass, protocol.TagPool, pool, protocol.TagClass, class)
	default:
		return fmt.Errorf("SQS queue %s already exists and belongs to pool %q, resource class %q (its %s and %s tags), not to pool %s, resource class %s; "+
			"choose another pool name or resource class", url, p, c, protocol.TagPool, protocol.TagClass, pool, class)
	}
}

// createQueue makes the queue of one class, tagged with its owner, and
// returns its URL. A queue of that name that exists already is taken only
// when its tags say it is this pool's queue of that class (left behind by
// an apply that failed half-way): CreateQueue returns an existing queue
// instead of failing, and would hand a pool another pool's runners.
func (m *Manager) createQueue(ctx context.Context, pool, class string, tags map[string]string) (string, error) {
	name := protocol.QueueName(pool, class)
	want := queueTags(pool, class, tags)
	var url string
	err := retry.Do(ctx, retry.Policy{Backoff: retry.Constant(queueRecreateBackoff)}, func() error {
		// Looked up first: some emulators retag an existing queue on CreateQueue.
		var err error
		if url, err = m.queueURL(ctx, pool, class); err != nil {
			return retry.Permanent(err)
		}
		if url == "" {
			out, err := m.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Tags: want})
			switch {
			case isQueueNameTaken(err):
				// Created meanwhile, with other tags or attributes: look again.
				return fmt.Errorf("creating SQS queue %s: SQS reports a queue of that name with other tags or attributes, which it cannot find", name)
			case isQueueDeletedRecently(err):
				return fmt.Errorf("creating SQS queue %s: SQS still holds the name of a recently deleted queue", name)
			case err != nil:
				return retry.Permanent(fmt.Errorf("creating SQS queue %s: %w", name, err))
			}
			// A queue created meanwhile by someone else comes back too.
			url = aws.ToString(out.QueueUrl)
		}
		if err := m.syncQueueTags(ctx, url, pool, class, want, false); err != nil {
			return retry.Permanent(err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return url, nil
}

// queueURL returns the URL of the queue of one class, or "" when it is missing.
func (m *Manager) queueURL(ctx context.Context, pool, class string) (string, error) {
	name := protocol.QueueName(pool, class)
	out, err := m.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if isQueueMissing(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("looking up SQS queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// queueInfo is what a pool reports of one queue.
type queueInfo struct {
	arn      string
	messages int // visible, in flight and delayed
	visible  int
}

func (m *Manager) queueInfo(ctx context.Context, url string) (queueInfo, error) {
	out, err := m.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameQueueArn,
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return queueInfo{}, fmt.Errorf("reading attributes of SQS queue %s: %w", url, err)
	}
	count := func(a sqstypes.QueueAttributeName) int {
		n, _ := strconv.Atoi(out.Attributes[string(a)]) // absent counts as 0
		return n
	}
	visible := count(sqstypes.QueueAttributeNameApproximateNumberOfMessages)
	return queueInfo{
		arn:      out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)],
		visible:  visible,
		messages: visible + count(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible) + count(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed),
	}, nil
}

func (m *Manager) deleteQueue(ctx context.Context, url string) error {
	_, err := m.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	if err != nil && !isQueueMissing(err) {
		return fmt.Errorf("deleting SQS queue %s: %w", url, err)
	}
	return nil
}

// syncQueueTags gives the queue of one class exactly the tags want, after
// checking that the queue is that class's of pool (checkQueueOwner).
func (m *Manager) syncQueueTags(ctx context.Context, url, pool, class string, want map[string]string, untaggedIsOurs bool) error {
	out, err := m.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
	if err != nil {
		return fmt.Errorf("reading tags of SQS queue %s: %w", url, err)
	}
	if err := checkQueueOwner(url, out.Tags, pool, class, untaggedIsOurs); err != nil {
		return err
	}
	set, remove := tagChanges(out.Tags, want)
	if len(remove) > 0 {
		if _, err := m.SQS.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: aws.String(url), TagKeys: remove}); err != nil {
			return fmt.Errorf("removing tags of SQS queue %s: %w", url, err)
		}
	}
	if len(set) > 0 {
		if _, err := m.SQS.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(url), Tags: set}); err != nil {
			return fmt.Errorf("tagging SQS queue %s: %w", url, err)
		}
	}
	return nil
}
