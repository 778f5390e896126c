package faultproxy_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
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

// A receipt handle goes stale once its message is received again: SQS then
// deletes nothing for it (and says it succeeded) and rejects a visibility
// change with it; the emulator honours every handle a message ever had.
func TestRealismSQSStaleHandles(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	for _, stale := range []bool{true, false} {
		q, err := direct.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(randomName("stale-"))})
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{"a", "b"} {
			if _, err := direct.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body)}); err != nil {
				t.Fatal(err)
			}
		}
		p := startProxy(t, endpoint, 1)
		p.SetRealism(faultproxy.Realism{SQSStaleHandles: stale})
		c := newClients(p.URL, 1)
		// Both messages received twice, each time through the proxy:
		// first[body] is superseded by second[body].
		receive := func() map[string]string {
			out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 120})
			if err != nil {
				t.Fatal(err)
			}
			handles := map[string]string{}
			for _, m := range out.Messages {
				handles[aws.ToString(m.Body)] = aws.ToString(m.ReceiptHandle)
			}
			if len(handles) != 2 {
				t.Fatalf("received %v, want both messages", handles)
			}
			return handles
		}
		first := receive()
		if _, err := direct.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: q.QueueUrl,
			Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("a"), ReceiptHandle: aws.String(first["a"])}, {Id: aws.String("b"), ReceiptHandle: aws.String(first["b"])}}}); err != nil {
			t.Fatal(err)
		}
		second := receive()

		_, err = c.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: q.QueueUrl, ReceiptHandle: aws.String(first["a"]), VisibilityTimeout: 60})
		var invalid *sqstypes.ReceiptHandleIsInvalid
		if stale != errors.As(err, &invalid) || (!stale && err != nil) {
			t.Errorf("stale %t: ChangeMessageVisibility with a superseded handle: %v", stale, err)
		}
		batch, err := c.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: q.QueueUrl,
			Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("old"), ReceiptHandle: aws.String(first["a"]), VisibilityTimeout: 60},
				{Id: aws.String("new"), ReceiptHandle: aws.String(second["b"]), VisibilityTimeout: 60}}})
		if err != nil {
			t.Fatal(err)
		}
		wantFailed := 0
		if stale {
			wantFailed = 1
		}
		if len(batch.Successful) != 2-wantFailed || len(batch.Failed) != wantFailed ||
			!slices.ContainsFunc(batch.Successful, func(e sqstypes.ChangeMessageVisibilityBatchResultEntry) bool { return aws.ToString(e.Id) == "new" }) ||
			(stale && (aws.ToString(batch.Failed[0].Id) != "old" || aws.ToString(batch.Failed[0].Code) != "ReceiptHandleIsInvalid" || !batch.Failed[0].SenderFault)) {
			t.Errorf("stale %t: ChangeMessageVisibilityBatch answered %+v succeeded, %+v failed", stale, batch.Successful, batch.Failed)
		}

		// Deletes with superseded handles: they succeed either way.
		if _, err := c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: aws.String(first["a"])}); err != nil {
			t.Fatalf("stale %t: DeleteMessage: %v", stale, err)
		}
		deleted, err := c.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: q.QueueUrl,
			Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("old"), ReceiptHandle: aws.String(first["b"])}}})
		if err != nil || len(deleted.Successful) != 1 || len(deleted.Failed) != 0 {
			t.Fatalf("stale %t: DeleteMessageBatch: %v, %+v", stale, err, deleted)
		}
		wantLeft := 0 // the emulator deleted both
		if stale {
			wantLeft = 2 // SQS deleted nothing
		}
		if left := messagesIn(t, direct, aws.ToString(q.QueueUrl)); left != wantLeft {
			t.Errorf("stale %t: %d messages left after deletes with superseded handles, want %d", stale, left, wantLeft)
		}
		if stale {
			// The current handles still work, mixed with a stale one.
			deleted, err := c.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: q.QueueUrl,
				Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("old"), ReceiptHandle: aws.String(first["a"])},
					{Id: aws.String("a"), ReceiptHandle: aws.String(second["a"])}, {Id: aws.String("b"), ReceiptHandle: aws.String(second["b"])}}})
			if err != nil || len(deleted.Successful) != 3 || len(deleted.Failed) != 0 {
				t.Fatalf("DeleteMessageBatch with current handles: %v, %+v", err, deleted)
			}
			if left := messagesIn(t, direct, aws.ToString(q.QueueUrl)); left != 0 {
				t.Errorf("%d messages left after deletes with their current handles", left)
			}
		}
		wantStale := 0
		if stale {
			wantStale = 5 // two visibility changes, two deletes, one in the last batch
		}
		if st := p.Stats(); st.StaleHandles != wantStale || len(st.RealismErrors) > 0 {
			t.Errorf("stale %t: stats %d stale handles, errors %v, want %d", stale, st.StaleHandles, st.RealismErrors, wantStale)
		}
	}
}

// messagesIn counts a queue's messages, visible or in flight.
func messagesIn(t *testing.T, c awsClients, queueURL string) int {
	t.Helper()
	out, err := c.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		k, err := strconv.Atoi(out.Attributes[string(name)])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n += k
	}
	return n
}

// EC2 is eventually consistent: an instance just launched (RunInstances or
// CreateFleet) is missing from DescribeInstances, and a request naming it
// fails with InvalidInstanceID.NotFound without effect, for EC2Lag; the
// emulator knows it at once.
func TestRealismEC2Lag(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	image, err := emulator.Image(ctx, direct.ec2)
	if err != nil {
		t.Fatal(err)
	}
	ltID, err := emulator.CreateLaunchTemplate(ctx, direct.ec2, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(randomName("lag-")),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = direct.ec2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(ltID)})
	})
	tags := func(marker string) []ec2types.TagSpecification {
		return []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
			Tags: []ec2types.Tag{{Key: aws.String("faultproxy-test"), Value: aws.String(marker)}}}}
	}
	// launch starts one instance with RunInstances and one with
	// CreateFleet through c, and returns their ids.
	launch := func(c awsClients, marker string) []string {
		run, err := c.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(image), InstanceType: ec2types.InstanceTypeT3Micro,
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), TagSpecifications: tags(marker)})
		if err != nil {
			t.Fatal(err)
		}
		fleet, err := c.ec2.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
			LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
				LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String(ltID), Version: aws.String("$Latest")},
				Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeT3Micro}}}},
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
			TagSpecifications:           tags(marker)})
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{aws.ToString(run.Instances[0].InstanceId)}
		for _, i := range fleet.Instances {
			ids = append(ids, i.InstanceIds...)
		}
		if len(ids) != 2 {
			t.Fatalf("launched %v, want two instances", ids)
		}
		return ids
	}
	// describe lists, through c, the instances tagged marker and those
	// named by ids.
	describe := func(c awsClients, marker string, ids []string) (tagged []string, named error) {
		out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{
			Filters: []ec2types.Filter{{Name: aws.String("tag:faultproxy-test"), Values: []string{marker}}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Reservations {
			if len(r.Instances) == 0 {
				t.Errorf("an empty reservation %s", aws.ToString(r.ReservationId))
			}
			for _, i := range r.Instances {
				tagged = append(tagged, aws.ToString(i.InstanceId))
			}
		}
		_, named = c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
		return tagged, named
	}
	notFound := func(err error) bool {
		var apiErr smithy.APIError
		var respErr *awshttp.ResponseError
		return errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidInstanceID.NotFound" &&
			errors.As(err, &respErr) && respErr.HTTPStatusCode() == 400
	}

	// Right after the launch, well within a lag of 30 s: unknown.
	p := startProxy(t, endpoint, 1)
	p.SetRealism(faultproxy.Realism{EC2Lag: 30 * time.Second})
	c := newClients(p.URL, 1)
	marker := randomName("lag-")
	ids := launch(c, marker)
	tagged, named := describe(c, marker, ids)
	if len(tagged) != 0 || !notFound(named) {
		t.Errorf("lag 30s: right after the launch, DescribeInstances lists %v and by id answers %v, want none and InvalidInstanceID.NotFound", tagged, named)
	}
	if _, err := c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); !notFound(err) {
		t.Errorf("lag 30s: TerminateInstances: %v, want InvalidInstanceID.NotFound", err)
	}
	if _, err := c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: ids[1:], Tags: []ec2types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); !notFound(err) {
		t.Errorf("lag 30s: CreateTags: %v, want InvalidInstanceID.NotFound", err)
	}
	if st := p.Stats(); st.InstancesNotFound != 3 || st.InstancesHidden != 2 {
		t.Errorf("lag 30s: stats %d requests not found, %d instances hidden, want 3 and 2", st.InstancesNotFound, st.InstancesHidden)
	}
	// The emulator knows them, and the requests refused had no effect.
	known, err := direct.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		t.Fatalf("the emulator does not know %v: %v", ids, err)
	}
	for _, r := range known.Reservations {
		for _, i := range r.Instances {
			if i.State.Name != ec2types.InstanceStateNameRunning || slices.ContainsFunc(i.Tags, func(tag ec2types.Tag) bool { return aws.ToString(tag.Key) == "k" }) {
				t.Errorf("%s is %s with tags %v: a refused request took effect", aws.ToString(i.InstanceId), i.State.Name, i.Tags)
			}
		}
	}
	if all := instancesTagged(t, direct, marker); len(all) != 2 {
		t.Errorf("the emulator lists %v, want the two launched", all)
	}

	// Without the lag, the emulator's own behaviour: known at once.
	plain := newClients(startProxy(t, endpoint, 1).URL, 1)
	marker = randomName("lag-")
	ids = launch(plain, marker)
	instancesTagged(t, direct, marker) // cleanup
	if tagged, named := describe(plain, marker, ids); len(tagged) != 2 || named != nil {
		t.Errorf("no lag: DescribeInstances lists %v and by id answers %v, want both", tagged, named)
	}

	// A lag of 2 s ends: the instances become known.
	p = startProxy(t, endpoint, 1)
	p.SetRealism(faultproxy.Realism{EC2Lag: 2 * time.Second})
	c = newClients(p.URL, 1)
	marker = randomName("lag-")
	ids = launch(c, marker)
	instancesTagged(t, direct, marker) // cleanup
	await.True(t, "the instances known once the lag of 2 s elapsed", func() error {
		tagged, named := describe(c, marker, ids)
		if len(tagged) != 2 || named != nil {
			return fmt.Errorf("DescribeInstances lists %v and by id answers %v", tagged, named)
		}
		return nil
	})
}

// A visibility timeout can run out while its consumer still holds the
// message: with SQSVisibilityExpiry, a message received for two minutes is
// delivered again after the expiry, with a new receipt handle, and the old
// handle (with SQSStaleHandles) deletes nothing; without it, the message
// stays hidden for the two minutes asked.
func TestRealismSQSVisibilityExpiry(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	const expiry = time.Second
	for _, expires := range []bool{true, false} {
		q, err := direct.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(randomName("expiry-"))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := direct.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")}); err != nil {
			t.Fatal(err)
		}
		p := startProxy(t, endpoint, 1)
		realism := faultproxy.Realism{SQSStaleHandles: true}
		if expires {
			realism.SQSVisibilityExpiry = expiry
		}
		p.SetRealism(realism)
		c := newClients(p.URL, 1)
		receive := func() []sqstypes.Message {
			out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 120})
			if err != nil {
				t.Fatal(err)
			}
			return out.Messages
		}
		first := receive()
		if len(first) != 1 {
			t.Fatalf("expires %t: the first receive got %d messages, want 1", expires, len(first))
		}
		if again := receive(); len(again) != 0 {
			t.Errorf("expires %t: the message was visible again at once", expires)
		}
		time.Sleep(expiry + 1500*time.Millisecond) // SQS's whole seconds, and a margin for a busy emulator
		again := receive()
		if !expires {
			if len(again) != 0 {
				t.Errorf("no expiry: the message was delivered again within its visibility timeout of 120 s")
			}
			if st := p.Stats(); st.VisibilityCut != 0 {
				t.Errorf("no expiry: %d receives cut", st.VisibilityCut)
			}
			continue
		}
		if len(again) != 1 || aws.ToString(again[0].MessageId) != aws.ToString(first[0].MessageId) || aws.ToString(again[0].ReceiptHandle) == aws.ToString(first[0].ReceiptHandle) {
			t.Fatalf("after the expiry, received %+v; want %s again with a new receipt handle", again, aws.ToString(first[0].MessageId))
		}
		if _, err := c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: first[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		if left := messagesIn(t, direct, aws.ToString(q.QueueUrl)); left != 1 {
			t.Errorf("the superseded handle deleted the message (%d left)", left)
		}
		if st := p.Stats(); st.VisibilityCut != 3 || st.StaleHandles != 1 || len(st.RealismErrors) > 0 {
			t.Errorf("stats: %d receives cut, %d stale handles, errors %v; want 3 and 1", st.VisibilityCut, st.StaleHandles, st.RealismErrors)
		}
	}
}
