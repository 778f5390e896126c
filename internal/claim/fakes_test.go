package claim

// The claim tests' view of the AWS fakes (internal/testworld/awsfake): the fixture
// (its agents, the real ones, are in agents_test.go), and assertions that
// need a *testing.T.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

type item = map[string]types.AttributeValue

// errTransient is the generic error injected into fake calls.
var errTransient = awsfake.ErrTransient

type fakeTable struct{ *awsfake.Table }

func newFakeTable(name string) *fakeTable { return &fakeTable{awsfake.NewTable(name)} }

// getAgent reads item sk of an instance's agent partition directly.
func (f *fakeTable) getAgent(id, sk string) item {
	return f.GetKey(protocol.AgentKey(arn(id), sk))
}

func (f *fakeTable) instance(t *testing.T, id string) protocol.Instance {
	t.Helper()
	it := f.Get(protocol.TypeInstance, id)
	if it == nil {
		t.Fatalf("no instance record %s", id)
	}
	inst, err := protocol.InstanceFromItem(it)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// setInstance rewrites fields of an instance record (test setup).
func (f *fakeTable) setInstance(t *testing.T, id string, change func(*protocol.Instance)) {
	t.Helper()
	inst := f.instance(t, id)
	change(&inst)
	f.Put(inst.Item())
}

// updates are the instance and record updates attempted, alone or in
// transactions, in order.
func (f *fakeTable) updates() []*dynamodb.UpdateItemInput {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out []*dynamodb.UpdateItemInput
	for _, c := range f.Calls {
		switch in := c.In.(type) {
		case *dynamodb.UpdateItemInput:
			out = append(out, in)
		case *dynamodb.TransactWriteItemsInput:
			for _, ti := range in.TransactItems {
				if ti.Update != nil {
					out = append(out, table.Alone(ti.Update))
				}
			}
		}
	}
	return out
}

type fakeSQS struct{ *awsfake.SQS }

func newFakeSQS(urls ...string) *fakeSQS { return &fakeSQS{awsfake.NewSQS(urls...)} }

// queued returns the messages in a queue (visible or not), parsed.
func (s *fakeSQS) queued(t *testing.T, url string) []protocol.Message {
	t.Helper()
	var out []protocol.Message
	for _, body := range s.Bodies(url) {
		pm, err := protocol.ParseMessage(body)
		if err != nil {
			t.Fatalf("queue %s holds an invalid message %q: %v", url, body, err)
		}
		out = append(out, pm)
	}
	return out
}

// queuedIDs returns the instance ids (or raw bodies) in a queue, sorted.
func (s *fakeSQS) queuedIDs(t *testing.T, url string) []string {
	t.Helper()
	var ids []string
	for _, body := range s.Bodies(url) {
		ids = append(ids, awsfake.BodyID(body))
	}
	sort.Strings(ids)
	return ids
}

// ---------------------------------------------------------------- agents' items

// The items the agents write, for tests that set the scene by hand (the
// agents themselves are in agents_test.go).

func signalItem(id, state, runID string) item {
	return protocol.Signal{InstanceARN: arn(id), State: state, RunID: runID, UpdatedAt: protocol.FormatTime(time.Now())}.Item()
}

func heartbeatAt(id string, at time.Time) item {
	return protocol.HeartbeatItem(arn(id), protocol.FormatTime(at))
}

// ---------------------------------------------------------------- fixture

const (
	testPool      = "testpool"
	testARNPrefix = "arn:aws:ec2:eu-west-1:123456789012:instance/"
	testRun       = "run-1"
	largeURL      = "https://sqs.test/000000000000/testpool-large"
	xlargeURL     = "https://sqs.test/000000000000/testpool-xlarge"
	idleTime      = 20 * time.Minute
	maxRunTime    = time.Hour
)

// arn is the ARN of a test instance.
func arn(id string) string { return protocol.InstanceARN(testARNPrefix, id) }

func testTimings() Timings {
	return Timings{
		HeartbeatMaxAge:     15 * time.Second,
		RegistrationWait:    300 * time.Millisecond,
		FleetValidationWait: 500 * time.Millisecond,
		ReleaseWait:         300 * time.Millisecond,
		PollInterval:        10 * time.Millisecond,
	}
}

// env is a pool in fakes with a Claimer on top.
type env struct {
	t      *testing.T
	db     *fakeTable
	sqs    *fakeSQS
	ec2    *awsfake.EC2
	agents *agentHarness
	cfg    protocol.PoolConfig
	c      *Claimer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := newFakeTable(testPool)
	e := &env{
		t: t, db: db, sqs: newFakeSQS(largeURL, xlargeURL),
		ec2: &awsfake.EC2{Pool: testPool, Images: map[string]ec2types.ArchitectureValues{}},
		cfg: protocol.PoolConfig{
			Name:              testPool,
			InstanceARNPrefix: testARNPrefix,
			ResourceClasses: map[string]protocol.ResourceClass{
				"large": {CPU: 2, MemoryMiB: 4096}, "xlarge": {CPU: 4, MemoryMiB: 8192},
			},
			IdleTimeout: protocol.Duration(idleTime),
			MaxRuntime:  protocol.Duration(maxRunTime),
			Fleet: &protocol.FleetConfig{
				LaunchTemplateID: "lt-0123", LaunchTemplateVersion: "$Latest",
				SubnetIDs: []string{"subnet-a", "subnet-b"}, InstanceSelection: protocol.SelectionAttributeBased,
			},
			QueueURLs: map[string]string{"large": largeURL, "xlarge": xlargeURL},
		},
	}
	e.agents = newAgentHarness(t, db, e.ec2)
	// The tests of the maintenance alongside claims (maintained_test.go)
	// reap only once they set ReapInterval.
	e.c = &Claimer{DynamoDB: e.db, SQS: e.sqs, EC2: e.ec2, ReapInterval: -1, Log: func(msg string, kv ...any) { t.Log(append([]any{msg}, kv...)...) }}
	e.writeConfig()
	return e
}

func (e *env) writeConfig() { e.db.Put(e.cfg.Item(protocol.FormatTime(time.Now()))) }

func (e *env) request(n int) Request {
	return Request{
		Pool: testPool, RunID: testRun, InstanceCount: n, ResourceClass: "large", UsageClass: protocol.UsageOnDemand,
		AllowedTypes: []string{"c*", "m*"}, FleetFallback: true, Timings: testTimings(),
	}
}

// idleMessage is the queue message of an idle large runner.
func idleMessage(id, typ string, until time.Time) protocol.Message {
	return protocol.Message{ID: id, ResourceClass: "large", InstanceType: typ, CPU: 2, MemoryMiB: 4096, UsageClass: protocol.UsageOnDemand, Threshold: protocol.FormatTime(until)}
}

// seedIdle puts an idle large runner in the pool: its record, its heartbeat
// (as its behaviour has it) and its message.
func (e *env) seedIdle(id string, b behavior) protocol.Message {
	e.t.Helper()
	until := time.Now().Add(time.Hour) // distinct from the pool's idle timeout
	m := idleMessage(id, "c6i.large", until)
	e.seedRecord(protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: m.Threshold}, b)
	e.sqs.Add(largeURL, m.Body())
	return m
}

// seedStopped puts a stopped large runner in the pool: its instance
// stopped, its record in its stopped time, and a slot of the stopped tier
// that it holds. Its agent acts as b once started.
func (e *env) seedStopped(id string, b behavior) {
	e.t.Helper()
	until := protocol.FormatTime(time.Now().Add(24 * time.Hour))
	e.ec2.Launch(id, time.Now().Add(-2*time.Hour))
	e.ec2.Mu.Lock()
	e.ec2.StopLocked(id)
	e.ec2.Mu.Unlock()
	e.seedRecord(protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: protocol.FormatTime(time.Now().Add(-time.Hour)), StopUntil: until,
		LaunchedAt: protocol.FormatTime(time.Now().Add(-2 * time.Hour)), TemplateVersion: "1"}, b)
	e.addSlot(protocol.TierStopped, "large", warmSlot{ID: id, Until: until, Taken: protocol.FormatTime(time.Now().Add(-time.Hour))})
}

// addSlot gives a runner the next slot of a tier of class.
func (e *env) addSlot(tier protocol.Tier, class string, sl warmSlot) {
	e.t.Helper()
	key := protocol.Key(protocol.TypeLease, slotsID(tier, class))
	slots := map[string]warmSlot{}
	if it := e.db.GetKey(key); it != nil {
		if err := json.Unmarshal([]byte(protocol.StringAttr(it, protocol.AttrValue)), &slots); err != nil {
			e.t.Fatal(err)
		}
	}
	slots[strconv.Itoa(len(slots))] = sl
	doc, _ := json.Marshal(slots)
	it := protocol.BaseItem(protocol.TypeLease, slotsID(tier, class), protocol.FormatTime(time.Now()))
	it[protocol.AttrValue] = &types.AttributeValueMemberS{Value: string(doc)}
	e.db.Put(it)
}

// seedRecord writes an instance record (large, c6i.large, on-demand by
// default) and gives it an agent that acts as b: one running for long (its
// heartbeat written, the record acted on), or the machine of a stopped
// instance.
func (e *env) seedRecord(inst protocol.Instance, b behavior) {
	if inst.ResourceClass == "" {
		inst.ResourceClass = "large"
	}
	if inst.InstanceType == "" {
		inst.InstanceType = "c6i.large"
	}
	if inst.UsageClass == "" {
		inst.UsageClass = protocol.UsageOnDemand
	}
	inst.UpdatedAt = protocol.FormatTime(time.Now())
	e.agents.set(inst.ID, b)
	e.db.Put(inst.Item())
	e.agents.seed(inst.ID, b)
}

// claimRecord reads the claim record of the test run.
func (e *env) claimRecord() (Record, bool) {
	e.t.Helper()
	it := e.db.Get(protocol.TypeClaim, testRun)
	if it == nil {
		return Record{}, false
	}
	r, err := recordFromItem(testPool, it)
	if err != nil {
		e.t.Fatal(err)
	}
	return r, true
}

// window is the range a threshold set between two instants plus d may take.
type window struct{ lo, hi string }

func during(start time.Time, d time.Duration) window {
	return window{protocol.FormatTime(start.Add(d)), protocol.FormatTime(time.Now().Add(d))}
}

func (w window) check(t *testing.T, what, got string) {
	t.Helper()
	if got < w.lo || got > w.hi {
		t.Errorf("%s = %s, want within [%s, %s]", what, got, w.lo, w.hi)
	}
}

// render prints an item with its values, for comparing items.
func render(it item) string {
	keys := make([]string, 0, len(it))
	for k := range it {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		switch v := it[k].(type) {
		case *types.AttributeValueMemberS:
			fmt.Fprintf(&b, "%s=S:%q ", k, v.Value)
		case *types.AttributeValueMemberSS:
			fmt.Fprintf(&b, "%s=SS:%q ", k, v.Value)
		case *types.AttributeValueMemberM:
			fmt.Fprintf(&b, "%s=M:{%s} ", k, render(v.Value))
		default:
			fmt.Fprintf(&b, "%s=%T ", k, v)
		}
	}
	return b.String()
}

// captureLogs makes the Claimer's log lines readable, joined, through the
// function it returns (safe while goroutines of the claim still log).
func (e *env) captureLogs() func() string {
	var mu sync.Mutex
	var lines []string
	e.c.Log = func(msg string, kv ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprint(append([]any{msg}, kv...)...))
	}
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
}
