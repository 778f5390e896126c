package awsfake

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// On the machine's clock, a message received without a visibility timeout
// stays hidden for the queue's default, one made visible again comes back
// to a long poll under way, and the long poll waits in real time.
func TestWallClockSQSRunsOnTheMachinesClock(t *testing.T) {
	const url = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
	w := &WallClockSQS{SQS: NewSQS(url)}
	w.Clock = time.Now()
	w.Add(url, "a")
	ctx := context.Background()
	got, err := w.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("first receive: %v, %v", got, err)
	}
	again, err := w.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)})
	if err != nil || len(again.Messages) != 0 {
		t.Fatalf("a message received without a visibility timeout was visible again at once: %v, %v", again, err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = w.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("0"), ReceiptHandle: got.Messages[0].ReceiptHandle},
		}})
	}()
	start := time.Now()
	polled, err := w.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 2, VisibilityTimeout: 1})
	took := time.Since(start)
	if err != nil || len(polled.Messages) != 1 {
		t.Fatalf("the long poll did not receive the message made visible: %v, %v", polled, err)
	}
	if took < 250*time.Millisecond || took > time.Second {
		t.Errorf("the long poll answered after %s, want about 300 ms (when the message became visible)", took)
	}
	start = time.Now()
	if empty, err := w.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1}); err != nil || len(empty.Messages) != 0 {
		t.Fatalf("a long poll of a queue whose message is in flight: %v, %v", empty, err)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Errorf("an empty long poll of 1 s answered after %s", took)
	}
	time.Sleep(200 * time.Millisecond) // the visibility timeout of 1 s ends, on the machine's clock
	if back, err := w.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)}); err != nil || len(back.Messages) != 1 {
		t.Errorf("after its visibility timeout the message is not back: %v, %v", back, err)
	}
}
