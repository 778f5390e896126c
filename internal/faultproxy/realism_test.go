package faultproxy_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/faultproxy"
)

// An EC2 request whose answer was lost, retried with its ClientToken: AWS
// carries it out once and answers the retry with the first answer; the
// emulator alone carries out both.
func TestRealismClientTokens(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	image, err := emulator.Image(ctx, direct.ec2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		realism bool
		want    int
	}{{true, 1}, {false, 2}} {
		p := startProxy(t, endpoint, 1)
		p.SetRealism(faultproxy.Realism{ClientTokens: tc.realism})
		c := newClients(p.URL, 1)
		marker := randomName("token-")
		run := func() (*ec2.RunInstancesOutput, error) {
			return c.ec2.RunInstances(ctx, &ec2.RunInstancesInput{
				ImageId: aws.String(image), InstanceType: ec2types.InstanceTypeT3Micro, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
				ClientToken: aws.String(marker),
				TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
					Tags: []ec2types.Tag{{Key: aws.String("faultproxy-test"), Value: aws.String(marker)}}}},
			})
		}
		p.SetRules(faultproxy.Rule{Service: "ec2", Action: "RunInstances", Kind: faultproxy.DropAfter, Rate: 1})
		if _, err := run(); err == nil {
			t.Fatalf("realism %t: the dropped answer arrived", tc.realism)
		}
		p.SetRules()
		retried, err := run()
		if err != nil {
			t.Fatalf("realism %t: the retry failed: %v", tc.realism, err)
		}
		launched := instancesTagged(t, direct, marker)
		if len(launched) != tc.want {
			t.Errorf("realism %t: %d instances launched for one ClientToken, want %d", tc.realism, len(launched), tc.want)
		}
		if tc.realism && (len(retried.Instances) != 1 || len(launched) != 1 || aws.ToString(retried.Instances[0].InstanceId) != launched[0]) {
			t.Errorf("the retry answered %v, want the first launch %v", retried.Instances, launched)
		}
	}
}

func instancesTagged(t *testing.T, c awsClients, marker string) []string {
	t.Helper()
	out, err := c.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:faultproxy-test"), Values: []string{marker}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			ids = append(ids, aws.ToString(i.InstanceId))
		}
	}
	t.Cleanup(func() {
		if len(ids) > 0 {
			_, _ = c.ec2.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: ids})
		}
	})
	return ids
}

// SQS delivers at least once: with redelivery on, every message received
// through the proxy comes once more, to the next receive, with a new
// receipt handle; without it, the emulator delivers it once.
func TestRealismSQSRedelivery(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	for _, redeliver := range []bool{true, false} {
		q, err := direct.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(randomName("redelivery-"))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := direct.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")}); err != nil {
			t.Fatal(err)
		}
		p := startProxy(t, endpoint, 1)
		p.SetRealism(faultproxy.Realism{SQSRedelivery: redeliver})
		c := newClients(p.URL, 1)
		var got []sqstypes.Message
		for range 3 {
			out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 120})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, out.Messages...)
		}
		want := 1
		if redeliver {
			want = 2
		}
		if len(got) != want {
			t.Fatalf("redelivery %t: %d deliveries in three receives, want %d", redeliver, len(got), want)
		}
		if redeliver && (aws.ToString(got[0].MessageId) != aws.ToString(got[1].MessageId) || aws.ToString(got[0].ReceiptHandle) == aws.ToString(got[1].ReceiptHandle)) {
			t.Errorf("deliveries %+v and %+v: want one message, two receipt handles", got[0], got[1])
		}
		if st := p.Stats(); st.Redelivered != want-1 || len(st.RealismErrors) > 0 {
			t.Errorf("redelivery %t: stats %d redelivered, errors %v", redeliver, st.Redelivered, st.RealismErrors)
		}
	}
}

// SQS's receives are sampled: with sampling on, a receive answers with only
// some of the waiting messages (a long poll with at least one), and those
// held back are visible again at once, so receiving until the queue looks
// empty still gets every message exactly once.
func TestRealismSQSSampling(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	q, err := direct.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(randomName("sampling-"))})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := range n {
		if _, err := direct.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	p := startProxy(t, endpoint, 1)
	p.SetRealism(faultproxy.Realism{SQSSampling: true})
	c := newClients(p.URL, 1)
	seen := map[string]int{}
	var answers []int
	for len(seen) < n && len(answers) < 50 {
		out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 120, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, len(out.Messages))
		for _, m := range out.Messages {
			seen[aws.ToString(m.Body)]++
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d messages received in %d receives %v", len(seen), n, len(answers), answers)
	}
	for body, k := range seen {
		if k != 1 {
			t.Errorf("message %s received %d times", body, k)
		}
	}
	if answers[0] >= n || slices.Contains(answers, 0) {
		t.Errorf("answers of %v messages: want the first sampled (fewer than %d) and no empty long poll", answers, n)
	}
	if st := p.Stats(); st.Sampled == 0 || len(st.RealismErrors) > 0 {
		t.Errorf("stats: %d held back, errors %v", st.Sampled, st.RealismErrors)
	}
}
