package pool

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// queueRecreateBackoff paces retries while SQS still holds a deleted queue's
// name (it does so for 60 s), as happens when a pool is replaced.
var queueRecreateBackoff = 5 * time.Second

// createQueue makes the queue of one class and returns its URL.
func (m *Manager) createQueue(ctx context.Context, pool, class string, tags map[string]string) (string, error) {
	name := protocol.QueueName(pool, class)
	for {
		out, err := m.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Tags: tags})
		if err == nil {
			return aws.ToString(out.QueueUrl), nil
		}
		if !isQueueDeletedRecently(err) {
			return "", fmt.Errorf("creating SQS queue %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("creating SQS queue %s: SQS still holds the name of a recently deleted queue: %w", name, ctx.Err())
		case <-time.After(queueRecreateBackoff):
		}
	}
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

func (m *Manager) syncQueueTags(ctx context.Context, url string, want map[string]string) error {
	out, err := m.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
	if err != nil {
		return fmt.Errorf("reading tags of SQS queue %s: %w", url, err)
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
