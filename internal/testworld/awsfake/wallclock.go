package awsfake

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

// defaultVisibility is a queue's visibility timeout unless it sets one:
// 30 seconds (SQS Developer Guide, "Amazon SQS visibility timeout").
const defaultVisibility = 30

// WallClockSQS serves the queues of an SQS on the machine's clock, for
// callers that run in real time and at once (a burst benchmark): before
// every call the queues' clock is set to the time of day, so visibility
// timeouts and delays end as they do on SQS, and a long poll waits in real
// time until a message is visible or its wait ends, instead of moving the
// shared clock on. It also answers the single-message calls and the queue
// lookup that the seeds' algorithm and the simulated agents make.
type WallClockSQS struct {
	*SQS
	// LongPollStep is how often a long poll looks again (0: 20 ms).
	LongPollStep time.Duration
}

// tick moves the queues' clock to the time of day (never back).
func (w *WallClockSQS) tick() {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	if now := time.Now(); now.After(w.Clock) {
		w.Clock = now
	}
}

// ReceiveMessage receives at once, hiding what it receives for the
// queue's default visibility timeout unless the call sets one; a long poll that finds nothing looks
// again every LongPollStep until a message is there or its wait ends.
func (w *WallClockSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	end := time.Now().Add(time.Duration(in.WaitTimeSeconds) * time.Second)
	short := *in
	short.WaitTimeSeconds = 0
	if short.VisibilityTimeout == 0 { // not sent: the queue's, SQS's default
		short.VisibilityTimeout = defaultVisibility
	}
	step := w.LongPollStep
	if step <= 0 {
		step = 20 * time.Millisecond
	}
	for {
		w.tick()
		out, err := w.SQS.ReceiveMessage(ctx, &short, opts...)
		if err != nil || len(out.Messages) > 0 || !time.Now().Add(step).Before(end) {
			return out, err
		}
		if err := retry.Sleep(ctx, step); err != nil {
			return nil, err
		}
	}
}

func (w *WallClockSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	w.tick()
	return w.SQS.DeleteMessageBatch(ctx, in, opts...)
}

func (w *WallClockSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	w.tick()
	return w.SQS.SendMessageBatch(ctx, in, opts...)
}

func (w *WallClockSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	w.tick()
	return w.SQS.ChangeMessageVisibilityBatch(ctx, in, opts...)
}

func (w *WallClockSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	w.tick()
	return w.SQS.GetQueueAttributes(ctx, in, opts...)
}

// DeleteMessage is DeleteMessageBatch of one entry, with SQS's error for a
// handle it does not know.
func (w *WallClockSQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	out, err := w.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: in.QueueUrl, Entries: []sqstypes.DeleteMessageBatchRequestEntry{
		{Id: aws.String("0"), ReceiptHandle: in.ReceiptHandle},
	}}, opts...)
	if err != nil {
		return nil, err
	}
	if len(out.Failed) > 0 {
		return nil, fmt.Errorf("fake sqs: %s: %s", aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
	}
	return &sqs.DeleteMessageOutput{}, nil
}

// SendMessage is SendMessageBatch of one entry.
func (w *WallClockSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	out, err := w.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: in.QueueUrl, Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("0"), MessageBody: in.MessageBody, DelaySeconds: in.DelaySeconds},
	}}, opts...)
	if err != nil {
		return nil, err
	}
	if len(out.Failed) > 0 {
		return nil, fmt.Errorf("fake sqs: %s: %s", aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
	}
	return &sqs.SendMessageOutput{MessageId: out.Successful[0].MessageId}, nil
}

// GetQueueUrl finds the queue whose URL ends with the name.
func (w *WallClockSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	for url := range w.Queues {
		if strings.HasSuffix(url, "/"+aws.ToString(in.QueueName)) {
			return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(url)}, nil
		}
	}
	return nil, fmt.Errorf("fake sqs: AWS.SimpleQueueService.NonExistentQueue: %s", aws.ToString(in.QueueName))
}
