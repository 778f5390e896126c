package agentsim_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

var (
	ddbClient *dynamodb.Client
	ec2Client *ec2.Client
	sqsClient *sqs.Client
)

// TestMain points the tests at the emulator (internal/testworld/emulator's front):
// AWS_ENDPOINT_URL when set, else a moto server on 127.0.0.1:4566 (started
// when nothing listens there).
func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	ctx := context.Background()
	endpoint, stop, err := emulator.Ensure(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentsim tests need the AWS emulator:", err)
		return 1
	}
	defer stop()
	// Ensure's endpoint, even when AWS_ENDPOINT_URL named the emulator
	// behind it: every request goes through its front.
	os.Setenv("AWS_ENDPOINT_URL", endpoint)
	for k, v := range map[string]string{
		"AWS_REGION":            "us-east-1",
		"AWS_ACCESS_KEY_ID":     "test",
		"AWS_SECRET_ACCESS_KEY": "test",
	} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loading AWS config:", err)
		return 1
	}
	ddbClient, ec2Client, sqsClient = dynamodb.NewFromConfig(cfg), ec2.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	return m.Run()
}

// Test intervals: short enough for a fast package, low enough load.
var testOpts = agentsim.Options{
	HeartbeatInterval: time.Second,
	WaitInterval:      100 * time.Millisecond,
	PollInterval:      250 * time.Millisecond,
	SelfCheckInterval: 500 * time.Millisecond,
	RegisterDelay:     2 * time.Second,
}

const class = "large"

// testPool is a throwaway pool: a table and the queue of class "large".
type testPool struct {
	name     string
	queueURL string
}

// testARNPrefix is the prefix of the test pools' instance ARNs.
const testARNPrefix = "arn:aws:ec2:us-east-1:123456789012:instance/"

// newPool makes a pool whose runners register with target (nil: none).
func newPool(t *testing.T, target *protocol.GitHubTarget) testPool {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	p := testPool{name: "agentsim-" + hex.EncodeToString(b)}
	_, err := ddbClient.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(protocol.TableName(p.name)),
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String(protocol.AttrPK), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String(protocol.AttrSK), KeyType: ddbtypes.KeyTypeRange},
		},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String(protocol.AttrPK), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String(protocol.AttrSK), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		BillingMode: ddbtypes.BillingModePayPerRequest,
	})
	// The name is this test's own: a table already there is ours, made by
	// a retry of this call whose first answer the emulator lost.
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		t.Fatal(err)
	}
	q, err := sqsClient.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(protocol.QueueName(p.name, class))})
	if err != nil {
		t.Fatal(err)
	}
	p.queueURL = aws.ToString(q.QueueUrl)
	cfg := protocol.PoolConfig{
		Name: p.name, InstanceARNPrefix: testARNPrefix, GitHub: target,
		ResourceClasses: map[string]protocol.ResourceClass{class: {CPU: 2, MemoryMiB: 4096}}, QueueURLs: map[string]string{class: p.queueURL},
	}
	if _, err := ddbClient.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(p.name), Item: cfg.Item(protocol.FormatTime(time.Now()))}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var gone *ddbtypes.ResourceNotFoundException
		if _, err := ddbClient.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(protocol.TableName(p.name))}); err != nil && !errors.As(err, &gone) {
			t.Errorf("deleting table: %v", err)
		}
		if _, err := sqsClient.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(p.queueURL)}); err != nil {
			t.Errorf("deleting queue: %v", err)
		}
		var ids []string
		for _, inst := range p.instances(t) {
			if inst.State.Name != ec2types.InstanceStateNameTerminated {
				ids = append(ids, aws.ToString(inst.InstanceId))
			}
		}
		if len(ids) > 0 {
			if _, err := ec2Client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
				t.Errorf("terminating instances: %v", err)
			}
		}
	})
	return p
}

// instances lists every instance tagged with the pool.
func (p testPool) instances(t *testing.T) []ec2types.Instance {
	t.Helper()
	out, err := ec2Client.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:" + protocol.TagPool), Values: []string{p.name}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var all []ec2types.Instance
	for _, r := range out.Reservations {
		all = append(all, r.Instances...)
	}
	return all
}

// recorder wraps the DynamoDB client: it keeps every worker signal written,
// and counts the calls about each instance (its record, its agent partition).
type recorder struct {
	agentsim.DynamoDBAPI
	mu      sync.Mutex
	signals map[string][]string // instance id -> "STATE runId"
	calls   map[string]int      // instance id -> GetItem and PutItem calls
}

func (r *recorder) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.count(in.Key)
	return r.DynamoDBAPI.GetItem(ctx, in, opts...)
}

func (r *recorder) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.count(in.Item)
	out, err := r.DynamoDBAPI.PutItem(ctx, in, opts...)
	if s, ok := protocol.SignalFromItem(in.Item); err == nil && ok {
		_, id, _ := protocol.SplitInstanceARN(s.InstanceARN)
		r.mu.Lock()
		r.signals[id] = append(r.signals[id], s.State+" "+s.RunID)
		r.mu.Unlock()
	}
	return out, err
}

// count counts a call about the instance whose record or agent partition
// key belongs to.
func (r *recorder) count(key map[string]ddbtypes.AttributeValue) {
	pk := protocol.StringAttr(key, protocol.AttrPK)
	id := protocol.IdentifierOf(key)
	if pk != protocol.TypeInstance {
		_, id, _ = protocol.SplitInstanceARN(strings.TrimPrefix(pk, protocol.AgentPartitionPrefix))
	}
	r.mu.Lock()
	r.calls[id]++
	r.mu.Unlock()
}

// callsAbout is how many GetItem and PutItem calls were about the instance.
func (r *recorder) callsAbout(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[id]
}

func (r *recorder) of(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.signals[id])
}

// eventLog collects agent events.
type eventLog struct {
	mu     sync.Mutex
	events []loggedEvent
}

// loggedEvent is an event and how many table calls its agent had made about
// its instance when it emitted it.
type loggedEvent struct {
	agentsim.Event
	calls int
}

func (l *eventLog) add(e loggedEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) has(id string, kind agentsim.EventKind) bool {
	return slices.Contains(l.of(id), kind)
}

// of lists the kinds of the instance's events, in order.
func (l *eventLog) of(id string) []agentsim.EventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var kinds []agentsim.EventKind
	for _, e := range l.events {
		if e.InstanceID == id {
			kinds = append(kinds, e.Kind)
		}
	}
	return kinds
}

// first returns the instance's first event of kind.
func (l *eventLog) first(id string, kind agentsim.EventKind) (loggedEvent, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.InstanceID == id && e.Kind == kind {
			return e, true
		}
	}
	return loggedEvent{}, false
}

// awaitEvent waits until the instance's agent has emitted kind, and returns
// the first such event.
func (h *harness) awaitEvent(t *testing.T, id string, kind agentsim.EventKind, what string) loggedEvent {
	t.Helper()
	var e loggedEvent
	await.True(t, what, func() error {
		var ok bool
		if e, ok = h.events.first(id, kind); !ok {
			return fmt.Errorf("no %s event; events of %s: %v", kind, id, h.events.of(id))
		}
		return nil
	})
	return e
}

type harness struct {
	pool   testPool
	sim    *agentsim.Sim
	rec    *recorder
	ec2    *ec2Spy
	events *eventLog
}

// newHarness makes a pool and a Sim for it; cleanup stops the Sim (checking
// that Stop ends its agents and returns, and that they hit no error) before
// deleting the pool.
func newHarness(t *testing.T, opts agentsim.Options) *harness {
	t.Helper()
	return newHarnessFor(t, opts, nil)
}

// newHarnessFor is newHarness for a pool whose runners register with
// target, and need its tokens.
func newHarnessFor(t *testing.T, opts agentsim.Options, target *protocol.GitHubTarget) *harness {
	t.Helper()
	h := &harness{pool: newPool(t, target), events: &eventLog{}}
	h.rec = &recorder{DynamoDBAPI: ddbClient, signals: map[string][]string{}, calls: map[string]int{}}
	h.ec2 = &ec2Spy{EC2API: ec2Client, stops: map[string]int{}, seen: map[string]map[ec2types.InstanceStateName]int{}}
	opts.OnEvent = func(e agentsim.Event) {
		// Synchronous: no call of the agent after the event is counted in.
		h.events.add(loggedEvent{e, h.rec.callsAbout(e.InstanceID)})
	}
	opts.Logf = t.Logf
	h.sim = agentsim.New(agentsim.Clients{DynamoDB: h.rec, EC2: h.ec2, SQS: sqsClient}, h.pool.name, opts)
	t.Cleanup(func() {
		// The agents loop until cancelled: Stop returns only if it ends them.
		stopped := make(chan struct{})
		go func() {
			h.sim.Stop()
			close(stopped)
		}()
		await.Done(t, "Stop to end the agents and return", stopped)
		if err := h.sim.Err(); err != nil {
			t.Errorf("agent error: %v", err)
		}
	})
	return h
}

func (h *harness) seed(t *testing.T, b agentsim.Behavior) string {
	t.Helper()
	ids, err := h.sim.SeedIdle(t.Context(), 1, agentsim.SeedSpec{ResourceClass: class, Behavior: b})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 {
		t.Fatalf("SeedIdle returned %v, want one id", ids)
	}
	return ids[0]
}

func (h *harness) table() *string { return aws.String(protocol.TableName(h.pool.name)) }

func (h *harness) getItem(t *testing.T, typ, id string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	return h.getKey(t, protocol.Key(typ, id))
}

// agentItem reads the item sk of the instance's agent partition.
func (h *harness) agentItem(t *testing.T, id, sk string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	return h.getKey(t, protocol.AgentKey(protocol.InstanceARN(testARNPrefix, id), sk))
}

func (h *harness) getKey(t *testing.T, key map[string]ddbtypes.AttributeValue) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := ddbClient.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: h.table(), Key: key, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// signal returns "STATE runId" of the instance's latest signal, or "".
func (h *harness) signal(t *testing.T, id string) string {
	t.Helper()
	item := h.agentItem(t, id, protocol.SortKeySignal)
	if item == nil {
		return ""
	}
	s, ok := protocol.SignalFromItem(item)
	if !ok {
		t.Fatalf("signal item of %s has no signal: %v", id, item)
	}
	if _, err := protocol.ParseTime(s.UpdatedAt); err != nil {
		t.Fatalf("signal updatedAt: %v", err)
	}
	return s.State + " " + s.RunID
}

// heartbeat returns the heartbeat's updatedAt, or the zero time if none.
func (h *harness) heartbeat(t *testing.T, id string) time.Time {
	t.Helper()
	item := h.agentItem(t, id, protocol.SortKeyHeartbeat)
	if item == nil {
		return time.Time{}
	}
	arn, ts, ok := protocol.HeartbeatFromItem(item)
	if !ok || arn != protocol.InstanceARN(testARNPrefix, id) {
		t.Fatalf("heartbeat item of %s is not one: %v", id, item)
	}
	return ts
}

// awaitFreshHeartbeat waits until the instance's heartbeat is later than
// after and fresh, and returns its time. Fresh: whole seconds, one interval
// (1s) plus rounding is about 2s; allow for a busy emulator, far below the
// 15s health limit. Its age is taken from before the read, so a slow read
// does not age it.
func (h *harness) awaitFreshHeartbeat(t *testing.T, id string, after time.Time) time.Time {
	t.Helper()
	var ts time.Time
	await.True(t, "a fresh heartbeat of "+id+" after "+after.Format(time.RFC3339), func() error {
		read := time.Now()
		ts = h.heartbeat(t, id)
		if ts.After(time.Now().Add(time.Second)) {
			t.Fatalf("heartbeat of %s is in the future: %s", id, ts)
		}
		switch age := read.Sub(ts); {
		case ts.IsZero():
			return errors.New("no heartbeat")
		case !ts.After(after):
			return fmt.Errorf("latest heartbeat at %s", ts.Format(time.RFC3339))
		case age > 4*time.Second:
			return fmt.Errorf("latest heartbeat is %s old", age)
		}
		return nil
	})
	return ts
}

// launch launches n instances as a claim's CreateFleet (or a fill of the
// pool's targets) does, tagged with the pool and initialRunID, and returns
// their ids.
func (h *harness) launch(t *testing.T, n int, initialRunID string) []string {
	t.Helper()
	image, err := emulator.Image(t.Context(), ec2Client)
	if err != nil {
		t.Fatal(err)
	}
	run, err := ec2Client.RunInstances(t.Context(), &ec2.RunInstancesInput{
		ImageId: aws.String(image), InstanceType: ec2types.InstanceTypeC6iLarge,
		MinCount: aws.Int32(int32(n)), MaxCount: aws.Int32(int32(n)),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String(protocol.TagPool), Value: aws.String(h.pool.name)},
			{Key: aws.String(protocol.TagInitialRunID), Value: aws.String(initialRunID)},
			{Key: aws.String(protocol.TagAllowSelfTermination), Value: aws.String("true")},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, inst := range run.Instances {
		ids = append(ids, aws.ToString(inst.InstanceId))
	}
	return ids
}

// fillID is a fresh InitialRunId of a runner launched to fill the pool's
// targets.
func fillID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "warm-" + hex.EncodeToString(b)
}

// putRecord writes rec (its id, state, runId, threshold and stopUntil) as
// the record of an on-demand runner of the test class.
func (h *harness) putRecord(t *testing.T, rec protocol.Instance) {
	t.Helper()
	rec.ResourceClass, rec.InstanceType, rec.UsageClass = class, "c6i.large", protocol.UsageOnDemand
	rec.UpdatedAt = protocol.FormatTime(time.Now())
	if _, err := ddbClient.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: h.table(), Item: rec.Item()}); err != nil {
		t.Fatal(err)
	}
}

// setRun sets the record's state and runId with a plain UpdateItem.
func (h *harness) setRun(t *testing.T, id, state, runID string) {
	t.Helper()
	_, err := ddbClient.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:        h.table(),
		Key:              protocol.Key(protocol.TypeInstance, id),
		UpdateExpression: aws.String("SET #s = :s, #r = :r"),
		ExpressionAttributeNames: map[string]string{
			"#s": protocol.AttrState, "#r": protocol.AttrRunID,
		},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":s": &ddbtypes.AttributeValueMemberS{Value: state},
			":r": &ddbtypes.AttributeValueMemberS{Value: runID},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) setThreshold(t *testing.T, id string, threshold time.Time) {
	t.Helper()
	_, err := ddbClient.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 h.table(),
		Key:                       protocol.Key(protocol.TypeInstance, id),
		UpdateExpression:          aws.String("SET threshold = :t"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":t": &ddbtypes.AttributeValueMemberS{Value: protocol.FormatTime(threshold)}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitSignal waits until the instance's latest signal is want.
func (h *harness) waitSignal(t *testing.T, id, want string) {
	t.Helper()
	await.True(t, fmt.Sprintf("signal %q of %s", want, id), func() error {
		got := h.signal(t, id)
		if got == want {
			return nil
		}
		if err := h.sim.Err(); err != nil {
			t.Fatalf("agent error while waiting for %q: %v", want, err)
		}
		return fmt.Errorf("latest signal %q (signals written: %v)", got, h.rec.of(id))
	})
}

// settle checks that get comes to return want: an agent records what it
// wrote (and emits its event) only after the write, which the test may
// already have seen in the table.
func settle(t *testing.T, what string, get func() []string, want []string) {
	t.Helper()
	err := await.Poll(await.Patience, func() error {
		if got := get(); !slices.Equal(got, want) {
			return fmt.Errorf("%q", got)
		}
		return nil
	})
	if err != nil {
		t.Errorf("%s: %v, want %q (waited %s)", what, err, want, await.Patience)
	}
}

// holdSignal checks that the instance's latest signal stays want for d.
func (h *harness) holdSignal(t *testing.T, id, want string, d time.Duration) {
	t.Helper()
	for start := time.Now(); time.Since(start) < d; time.Sleep(100 * time.Millisecond) {
		if got := h.signal(t, id); got != want {
			t.Fatalf("signal of %s became %q, want it to stay %q", id, got, want)
		}
	}
}

func instanceState(t *testing.T, id string) ec2types.InstanceStateName {
	t.Helper()
	out, err := ec2Client.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("DescribeInstances(%s): %d reservations", id, len(out.Reservations))
	}
	return out.Reservations[0].Instances[0].State.Name
}

func TestHealthyLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts)
	before := time.Now().Truncate(time.Second)
	ids, err := h.sim.SeedIdle(t.Context(), 1, agentsim.SeedSpec{ResourceClass: class, IdleTimeout: 10 * time.Minute, UsageClass: protocol.UsageSpot})
	if err != nil {
		t.Fatal(err)
	}
	id := ids[0]

	// The seeded instance, record and message.
	insts := h.pool.instances(t)
	if len(insts) != 1 || aws.ToString(insts[0].InstanceId) != id {
		t.Fatalf("pool instances %v, want just %s", insts, id)
	}
	inst := insts[0]
	if want, err := emulator.Image(t.Context(), ec2Client); err != nil || aws.ToString(inst.ImageId) != want {
		t.Errorf("image %q, want %q (%v)", aws.ToString(inst.ImageId), want, err)
	}
	if inst.InstanceType != ec2types.InstanceType(agentsim.DefaultSeedInstanceType) {
		t.Errorf("instance type %q", inst.InstanceType)
	}
	tags := map[string]string{}
	for _, tg := range inst.Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if tags[protocol.TagPool] != h.pool.name || tags[protocol.TagAllowSelfTermination] != "true" {
		t.Errorf("tags %v", tags)
	}
	rec, err := protocol.InstanceFromItem(h.getItem(t, protocol.TypeInstance, id))
	if err != nil {
		t.Fatal(err)
	}
	th, err := protocol.ParseTime(rec.Threshold)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != protocol.StateIdle || rec.RunID != "" || rec.ResourceClass != class ||
		rec.InstanceType != agentsim.DefaultSeedInstanceType || rec.UsageClass != protocol.UsageSpot ||
		th.Before(before.Add(10*time.Minute)) || th.After(time.Now().Add(10*time.Minute)) {
		t.Errorf("record %+v", rec)
	}
	msgs, err := sqsClient.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(h.pool.queueURL), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs.Messages) != 1 {
		t.Fatalf("%d queue messages, want 1", len(msgs.Messages))
	}
	msg, err := protocol.ParseMessage(aws.ToString(msgs.Messages[0].Body))
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.Message{ID: id, ResourceClass: class, InstanceType: agentsim.DefaultSeedInstanceType, CPU: 2, MemoryMiB: 4096, UsageClass: protocol.UsageSpot, Threshold: rec.Threshold}
	if msg != want {
		t.Errorf("message %+v, want %+v", msg, want)
	}

	// Heartbeat: there at once (SeedIdle wrote it), and kept fresh; an
	// idle agent signals nothing meanwhile.
	first := h.heartbeat(t, id)
	if first.IsZero() || first.Before(before) {
		t.Fatalf("heartbeat at %s after SeedIdle, want the one it wrote (at %s or later)", first, before)
	}
	h.holdSignal(t, id, "", 2500*time.Millisecond)
	h.awaitFreshHeartbeat(t, id, first)

	// Claimed: registers; released: confirms; claimed again: registers again.
	h.setRun(t, id, protocol.StateClaimed, "run-1")
	h.waitSignal(t, id, "UD_REG_OK run-1")
	h.setRun(t, id, protocol.StateIdle, "")
	h.waitSignal(t, id, "UD_REMOVE_REG_REMOVE_RUN_OK run-1")
	h.setRun(t, id, protocol.StateClaimed, "run-2")
	h.waitSignal(t, id, "UD_REG_OK run-2")
	// A runId replaced without an idle in between is a release and a claim.
	h.setRun(t, id, protocol.StateClaimed, "run-3")
	h.waitSignal(t, id, "UD_REG_OK run-3")

	wantSignals := []string{
		"UD_REG_OK run-1", "UD_REMOVE_REG_OK run-1", "UD_REMOVE_REG_REMOVE_RUN_OK run-1",
		"UD_REG_OK run-2", "UD_REMOVE_REG_OK run-2", "UD_REMOVE_REG_REMOVE_RUN_OK run-2",
		"UD_REG_OK run-3",
	}
	settle(t, "signals written", func() []string { return h.rec.of(id) }, wantSignals)
	settle(t, "Registrations", func() []string { return h.sim.Registrations(id) }, []string{"run-1", "run-2", "run-3"})
	settle(t, "Releases", func() []string { return h.sim.Releases(id) }, []string{"run-1", "run-2"})
	if h.sim.Start(t.Context(), id, agentsim.NeverRegisters) {
		t.Error("Start started a second agent for the same instance")
	}
	if instanceState(t, id) != ec2types.InstanceStateNameRunning {
		t.Error("healthy instance is not running")
	}
}

func TestNeverRegisters(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts)
	id := h.seed(t, agentsim.NeverRegisters)
	h.setRun(t, id, protocol.StateClaimed, "run-1")
	h.holdSignal(t, id, "", 2*time.Second)
	h.awaitFreshHeartbeat(t, id, time.Time{})
	if got := h.sim.Registrations(id); len(got) != 0 {
		t.Errorf("Registrations %q", got)
	}
}

// TestIgnoresInvalidRunID: a record naming a run id the protocol refuses
// (GitHub would match "Run-1" to run-1's label) is waited out, as if it
// named none; a valid one then registers.
func TestIgnoresInvalidRunID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts)
	id := h.seed(t, agentsim.Healthy)
	h.setRun(t, id, protocol.StateClaimed, "Run-1")
	h.holdSignal(t, id, "", 2*time.Second)
	h.setRun(t, id, protocol.StateClaimed, "run-1")
	h.waitSignal(t, id, "UD_REG_OK run-1")
	settle(t, "Registrations", func() []string { return h.sim.Registrations(id) }, []string{"run-1"})
}

func TestRegistrationFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts)
	id := h.seed(t, agentsim.RegistrationFails)
	h.setRun(t, id, protocol.StateClaimed, "run-1")
	h.waitSignal(t, id, "UD_REG_FAILED run-1")
	// Released, it confirms the release (nothing to deregister, the run's
	// traces wiped); claimed again, it fails again.
	h.setRun(t, id, protocol.StateIdle, "")
	h.waitSignal(t, id, "UD_REMOVE_REG_REMOVE_RUN_OK run-1")
	h.setRun(t, id, protocol.StateClaimed, "run-2")
	h.waitSignal(t, id, "UD_REG_FAILED run-2")
	settle(t, "signals written", func() []string { return h.rec.of(id) }, []string{
		"UD_REG_FAILED run-1", "UD_REMOVE_REG_OK run-1", "UD_REMOVE_REG_REMOVE_RUN_OK run-1", "UD_REG_FAILED run-2",
	})
	if got := h.sim.Registrations(id); len(got) != 0 {
		t.Errorf("Registrations %q", got)
	}
}

func TestNoHeartbeat(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts)
	id := h.seed(t, agentsim.NoHeartbeat)
	h.setRun(t, id, protocol.StateClaimed, "run-1")
	h.waitSignal(t, id, "UD_REG_OK run-1")
	time.Sleep(1500 * time.Millisecond) // more than a heartbeat interval
	if ts := h.heartbeat(t, id); !ts.IsZero() {
		t.Fatalf("NoHeartbeat agent wrote a heartbeat at %s", ts)
	}
}

func TestNeverConfirmsRelease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts)
	id := h.seed(t, agentsim.NeverConfirmsRelease)
	h.setRun(t, id, protocol.StateClaimed, "run-1")
	h.waitSignal(t, id, "UD_REG_OK run-1")
	h.setRun(t, id, protocol.StateIdle, "")
	h.holdSignal(t, id, "UD_REG_OK run-1", 2*time.Second)
	h.awaitEvent(t, id, agentsim.EventReleaseSilent, "the agent to notice the release")
	// Its deregistration hangs: it serves no other run (a release ends
	// such a runner).
	h.setRun(t, id, protocol.StateClaimed, "run-2")
	h.holdSignal(t, id, "UD_REG_OK run-1", 2*time.Second)
	settle(t, "signals written", func() []string { return h.rec.of(id) }, []string{"UD_REG_OK run-1"})
	if got := h.sim.Releases(id); len(got) != 0 {
		t.Errorf("Releases %q", got)
	}
}

func TestSlowRegister(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts) // RegisterDelay 2s
	id := h.seed(t, agentsim.SlowRegister)
	start := time.Now()
	h.setRun(t, id, protocol.StateClaimed, "run-1")
	h.holdSignal(t, id, "", 1200*time.Millisecond)
	h.waitSignal(t, id, "UD_REG_OK run-1")
	if took := time.Since(start); took < testOpts.RegisterDelay {
		t.Errorf("registered after %s, before the delay %s", took, testOpts.RegisterDelay)
	}
}

func TestSelfTermination(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts) // SelfCheckInterval 500ms
	id := h.seed(t, agentsim.Healthy)

	// Within the minute of grace: lives on.
	h.setThreshold(t, id, time.Now().Add(-20*time.Second))
	time.Sleep(1600 * time.Millisecond)
	if got := instanceState(t, id); got != ec2types.InstanceStateNameRunning {
		t.Fatalf("instance is %s within a minute past its threshold", got)
	}

	h.setThreshold(t, id, time.Now().Add(-2*time.Minute))
	await.True(t, "the instance to terminate itself past its threshold + 1 min", func() error {
		if got := instanceState(t, id); got != ec2types.InstanceStateNameTerminated {
			return fmt.Errorf("instance is %s; agent events %v", got, h.events.of(id))
		}
		return nil
	})
	h.awaitEvent(t, id, agentsim.EventStopped, "the agent to stop after terminating itself")
	if !h.events.has(id, agentsim.EventSelfTerminated) {
		t.Error("no self-terminated event")
	}
}

// Options.SelfTerminationGrace replaces the protocol's minute.
func TestSelfTerminationGrace(t *testing.T) {
	t.Parallel()
	opts := testOpts
	opts.SelfTerminationGrace = 2 * time.Second
	h := newHarness(t, opts)
	id := h.seed(t, agentsim.Healthy)
	// Within the protocol's minute, past this grace.
	h.setThreshold(t, id, time.Now().Add(-20*time.Second))
	term := h.awaitEvent(t, id, agentsim.EventSelfTerminated, "the agent to terminate its instance")
	if !strings.HasSuffix(term.Detail, "passed more than 2s ago") {
		t.Errorf("self-terminated: %q, want its threshold passed more than the grace of 2s ago", term.Detail)
	}
	if got := instanceState(t, id); got != ec2types.InstanceStateNameTerminated {
		t.Errorf("instance is %s after its agent terminated it", got)
	}
}

func TestStopsWhenRecordTerminated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts)
	id := h.seed(t, agentsim.Healthy)
	h.setRun(t, id, protocol.StateTerminated, "")
	h.awaitEvent(t, id, agentsim.EventStopped, "the agent to stop after its record was terminated")
	// It terminates its instance rather than wait for the reaper.
	if got := instanceState(t, id); got != ec2types.InstanceStateNameTerminated {
		t.Errorf("instance is %s", got)
	}
	if !h.events.has(id, agentsim.EventSelfTerminated) {
		t.Error("no self-terminated event")
	}
}

func TestWatchFleet(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts)
	var mu sync.Mutex
	chosen := map[string]agentsim.Behavior{}
	var indexes []int
	h.sim.WatchFleet(t.Context(), func(id string, index int) agentsim.Behavior {
		mu.Lock()
		defer mu.Unlock()
		b := agentsim.Healthy
		if index == 1 {
			b = agentsim.RegistrationFails
		}
		chosen[id] = b
		indexes = append(indexes, index)
		return b
	})
	seeded := h.seed(t, agentsim.NeverRegisters)

	// What a claim does: CreateFleet, then a `created` record per instance.
	fleet := h.launch(t, 2, "run-f")
	for _, id := range fleet {
		h.putRecord(t, protocol.Instance{ID: id, State: protocol.StateCreated, RunID: "run-f", Threshold: protocol.FormatTime(time.Now().Add(10 * time.Minute))})
	}
	for _, id := range fleet {
		// The watcher may not have seen it yet.
		var b agentsim.Behavior
		await.True(t, "WatchFleet to start an agent for fleet instance "+id, func() error {
			mu.Lock()
			defer mu.Unlock()
			var ok bool
			if b, ok = chosen[id]; !ok {
				return fmt.Errorf("agents started for %v", chosen)
			}
			return nil
		})
		want := "UD_REG_OK run-f"
		if b == agentsim.RegistrationFails {
			want = "UD_REG_FAILED run-f"
		}
		h.waitSignal(t, id, want)
		settle(t, "signals of "+id+" ("+b.String()+")", func() []string { return h.rec.of(id) }, []string{"UD_OK run-f", want})
		h.awaitFreshHeartbeat(t, id, time.Time{})
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := chosen[seeded]; ok || len(chosen) != 2 || !slices.Equal(indexes, []int{0, 1}) {
		t.Errorf("WatchFleet chose %v with indexes %v; want the 2 fleet instances %v only, indexes 0 and 1", chosen, indexes, fleet)
	}
}

// A runner launched to fill the pool's hot target (InitialRunId a fill id,
// its record idle and unowned) signals UD_OK for the fill id at boot, which
// its launcher waits for, and registers nothing.
func TestFillSignalsUserData(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts)
	h.sim.WatchFleet(t.Context(), nil)
	fill := fillID()
	id := h.launch(t, 1, fill)[0]
	h.putRecord(t, protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: protocol.FormatTime(time.Now().Add(10 * time.Minute))})
	h.waitSignal(t, id, "UD_OK "+fill)
	h.awaitFreshHeartbeat(t, id, time.Time{})
	h.holdSignal(t, id, "UD_OK "+fill, time.Second)
	if got := h.sim.Registrations(id); len(got) != 0 {
		t.Errorf("Registrations %q", got)
	}
}

func TestStopsWhenTableDeleted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testOpts)
	id := h.seed(t, agentsim.Healthy)
	if _, err := ddbClient.DeleteTable(t.Context(), &dynamodb.DeleteTableInput{TableName: h.table()}); err != nil {
		t.Fatal(err)
	}
	h.awaitEvent(t, id, agentsim.EventStopped, "the agent to stop after its pool's table was deleted")
	// Cleanup checks that Err stayed nil.
}

// putToken hands the instance the token sk for runID and target, as a
// claim or release would.
func (h *harness) putToken(t *testing.T, id, sk, runID, target string) {
	t.Helper()
	item := protocol.RunnerToken{
		InstanceARN: protocol.InstanceARN(testARNPrefix, id), SortKey: sk, Token: "T-" + runID, ExpiresAt: time.Now().Add(time.Hour),
		RunID: runID, Target: target, UpdatedAt: protocol.FormatTime(time.Now()),
	}.Item()
	if _, err := ddbClient.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: h.table(), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// In a pool with a GitHub target an agent registers and deregisters only
// with the token handed for its run and the pool's target: one for another
// run or target is not used, and none within TokenWait fails.
func TestTokens(t *testing.T) {
	t.Parallel()
	opts := testOpts
	opts.TokenWait = 3 * time.Second
	h := newHarnessFor(t, opts, &protocol.GitHubTarget{Owner: "octo", Repository: "app"})
	id := h.seed(t, agentsim.Healthy)

	// Handed for another run and another target: it waits.
	h.putToken(t, id, protocol.SortKeyRegistrationToken, "run-0", "octo/app")
	h.setRun(t, id, protocol.StateClaimed, "run-1")
	h.holdSignal(t, id, "", time.Second)
	h.putToken(t, id, protocol.SortKeyRegistrationToken, "run-1", "mallory/app")
	h.holdSignal(t, id, "", time.Second)
	h.putToken(t, id, protocol.SortKeyRegistrationToken, "run-1", "octo/app")
	h.waitSignal(t, id, "UD_REG_OK run-1")

	// Released with the removal token of the run.
	h.putToken(t, id, protocol.SortKeyRemovalToken, "run-1", "octo/app")
	h.setRun(t, id, protocol.StateIdle, "")
	h.waitSignal(t, id, "UD_REMOVE_REG_REMOVE_RUN_OK run-1")

	// No registration token for run-2, and the removal token is still run-1's.
	h.setRun(t, id, protocol.StateClaimed, "run-2")
	h.waitSignal(t, id, "UD_REG_FAILED run-2")
	// Given run-3 instead, it leaves run-2 (nothing registered to remove).
	h.setRun(t, id, protocol.StateClaimed, "run-3")
	h.putToken(t, id, protocol.SortKeyRegistrationToken, "run-3", "octo/app")
	h.waitSignal(t, id, "UD_REG_OK run-3")
	h.setRun(t, id, protocol.StateIdle, "")
	h.waitSignal(t, id, "UD_REMOVE_REG_FAILED run-3")
	settle(t, "signals written", func() []string { return h.rec.of(id) }, []string{
		"UD_REG_OK run-1", "UD_REMOVE_REG_OK run-1", "UD_REMOVE_REG_REMOVE_RUN_OK run-1",
		"UD_REG_FAILED run-2", "UD_REMOVE_REG_OK run-2", "UD_REMOVE_REG_REMOVE_RUN_OK run-2", "UD_REG_OK run-3", "UD_REMOVE_REG_FAILED run-3",
	})
}
