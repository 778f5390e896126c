package chaos

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

// EC2's API may not know an instance for a while after CreateFleet
// returned it. A claim whose new instance fails at once must still
// terminate it, rather than take EC2's "does not exist" for "gone" and
// leave it running with a terminated record.
func TestRealism_newInstanceUnknownToEC2(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "chaos-lag", 3)
	w.proxy.SetRealism(faultproxy.Realism{ClientTokens: true, EC2Lag: 20 * time.Second})
	w.fleetBehavior.Store(int32(agentsim.RegistrationFails))
	if _, err := create(context.Background(), w.claimer(), request(w.pool, "run-lag", 1)); err == nil {
		t.Fatal("the claim succeeded with an instance whose registration fails")
	}
	if st := w.proxy.Stats(); st.InstancesNotFound == 0 {
		t.Errorf("EC2 never answered that an instance does not exist: the scenario tested nothing (%s)", st)
	}
	out, err := direct.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + protocol.TagPool), Values: []string{w.pool}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			n++
			if st := inst.State.Name; st != ec2types.InstanceStateNameShuttingDown && st != ec2types.InstanceStateNameTerminated {
				t.Errorf("%s is %s, want terminated", aws.ToString(inst.InstanceId), st)
			}
		}
	}
	if n == 0 {
		t.Error("the claim launched nothing")
	}
	w.audit("after the failed claim")
}

// On AWS a receipt handle stops working once its message is received again
// (here: delivered twice, as SQS may, to two claims): deleting with the old
// one deletes nothing, making the message visible with it fails. Every
// message a claim received is still accounted for: the newest holder
// deletes it (its runner went to the other claim) or gives it back.
func TestRealism_supersededReceiptHandles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		newest     func(ctx context.Context, p *claim.Pickup, id string) // what the newest holder does
		wantQueued int
	}{
		{"the newest holder drops it", func(ctx context.Context, p *claim.Pickup, id string) { p.Consume(ctx, []string{id}) }, 0},
		{"the newest holder gives it back", func(context.Context, *claim.Pickup, string) {}, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "chaos-stale", uint64(10+i))
			w.proxy.SetRealism(faultproxy.Realism{SQSRedelivery: true, SQSStaleHandles: true})
			id := w.seed(1)[0]
			ctx := context.Background()
			cfg, err := pool.ReadConfig(ctx, direct.DynamoDB, w.pool)
			if err != nil {
				t.Fatal(err)
			}
			url := cfg.QueueURLs["large"]
			wants := claim.Wants{ResourceClass: "large", Class: cfg.ResourceClasses["large"], AllowedTypes: []string{"*"}, UsageClass: protocol.UsageOnDemand}
			first := claim.NewPickup(w.faulty.SQS, url, wants, time.Now, nil)
			second := claim.NewPickup(w.faulty.SQS, url, wants, time.Now, nil)
			for _, p := range []*claim.Pickup{first, second} {
				if got, err := p.Take(ctx, 1); err != nil || len(got) != 1 || got[0].ID != id {
					t.Fatalf("Take = %+v, %v; want runner %s (delivered to both)", got, err, id)
				}
			}
			// The first claim got the runner: its delete uses a superseded handle.
			first.Consume(ctx, []string{id})
			tt.newest(ctx, second, id)
			second.Close(ctx)
			first.Close(ctx)
			if st := w.proxy.Stats(); st.StaleHandles == 0 {
				t.Errorf("no superseded handle was used: the scenario tested nothing (%d redelivered)", st.Redelivered)
			}
			if n := queued(t, url); n != tt.wantQueued {
				t.Errorf("the queue holds %d message(s), want %d", n, tt.wantQueued)
			}
		})
	}
}

// queued counts a queue's messages, visible or not.
func queued(t *testing.T, url string) int {
	t.Helper()
	out, err := direct.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n
}

// A visibility timeout can run out while a claim holds a message: here
// claim A receives its c6i runners and is slow to claim them (its writes
// wait until claim B has received), so their visibility, cut to a second,
// runs out and B, which wants m6i runners, receives them first as
// mismatches and gives them back. A then claims its runners and consumes
// their messages with handles superseded meanwhile. Each claim gets its
// own runners, none twice, and every runner given back is idle with its
// message.
func TestRealism_visibilityExpiresMidClaim(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "chaos-expiry", 4)
	w.proxy.SetRealism(faultproxy.Realism{SQSStaleHandles: true, SQSVisibilityExpiry: time.Second})
	ctx := context.Background()
	// The c6i messages first: A's first receive and B's both get them.
	for _, typ := range []string{"c6i.large", "m6i.large"} {
		if _, err := w.sim.SeedIdle(ctx, 2, agentsim.SeedSpec{ResourceClass: "large", InstanceType: typ, IdleTimeout: 30 * time.Minute, Behavior: agentsim.SlowRegister}); err != nil {
			t.Fatal(err)
		}
	}
	claimOf := func(c *claim.Claimer, runID, types string) (*claim.Result, error) {
		req := request(w.pool, runID, 2)
		req.AllowedTypes, req.FleetFallback = []string{types}, false
		return create(ctx, c, req)
	}
	// One receive cut is A's: until B's receive, A's writes wait.
	slowA := w.claimer()
	slowA.DynamoDB = writesWaitFor(w.faulty.DynamoDB, func() bool { return w.proxy.Stats().VisibilityCut != 1 })
	var resA *claim.Result
	var errA error
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		resA, errA = claimOf(slowA, "run-a", "c*")
	}()
	await.Until(t, "claim A receiving its runners", func() bool { return w.proxy.Stats().VisibilityCut > 0 })
	time.Sleep(1500 * time.Millisecond) // A's messages' visibility runs out
	c := w.claimer()
	resB, errB := claimOf(c, "run-b", "m*")
	<-doneA
	for _, r := range []struct {
		run, prefix string
		res         *claim.Result
		err         error
	}{{"run-a", "c6i", resA, errA}, {"run-b", "m6i", resB, errB}} {
		if r.err != nil {
			t.Fatalf("claim %s: %v", r.run, r.err)
		}
		for _, inst := range r.res.Instances {
			if !strings.HasPrefix(inst.InstanceType, r.prefix) {
				t.Errorf("claim %s holds %s (%s)", r.run, inst.ID, inst.InstanceType)
			}
		}
	}
	if st := w.proxy.Stats(); st.StaleHandles == 0 || st.VisibilityCut == 0 {
		t.Errorf("%d receives cut, %d superseded handles used: no visibility ran out mid-claim, the scenario tested nothing", st.VisibilityCut, st.StaleHandles)
	}
	w.audit("after the claims")
	for _, run := range []string{"run-a", "run-b"} {
		if outcomes, err := release(ctx, c, w.pool, run); err != nil {
			t.Fatalf("release %s: %v (%v)", run, err, outcomes)
		}
	}
	w.audit("after the releases")
}

// writesWaitFor holds a claim's DynamoDB writes until open says so (or a
// minute has passed, so that a scenario gone wrong fails instead of hanging).
func writesWaitFor(db claim.DynamoDBClient, open func() bool) claim.DynamoDBClient {
	return gatedWrites{DynamoDBClient: db, open: open}
}

type gatedWrites struct {
	claim.DynamoDBClient
	open func() bool
}

func (g gatedWrites) wait() {
	for deadline := time.Now().Add(time.Minute); !g.open() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}

func (g gatedWrites) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	g.wait()
	return g.DynamoDBClient.UpdateItem(ctx, in, opts...)
}

func (g gatedWrites) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	g.wait()
	return g.DynamoDBClient.TransactWriteItems(ctx, in, opts...)
}
