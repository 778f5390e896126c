// Package poolworld is a pool in fakes (package awsfake) with the real
// agent on each of its instances, for the tests of the code that claims
// runners from a pool and of the code that maintains it: its table,
// queues and EC2, the agents (agents.go), the pool's configuration, and
// the runners a test seeds.
package poolworld

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

// Item is a table item.
type Item = map[string]types.AttributeValue

// Table is the pool's table, with assertions that need a *testing.T.
type Table struct{ *awsfake.Table }

// NewTable is an empty table of pool name.
func NewTable(name string) *Table { return &Table{awsfake.NewTable(name)} }

// GetAgent reads item sk of an instance's agent partition directly.
func (f *Table) GetAgent(id, sk string) Item {
	return f.GetKey(protocol.AgentKey(ARN(id), sk))
}

// Instance reads the instance record of id, which must exist.
func (f *Table) Instance(t *testing.T, id string) protocol.Instance {
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

// SetInstance rewrites fields of an instance record (test setup).
func (f *Table) SetInstance(t *testing.T, id string, change func(*protocol.Instance)) {
	t.Helper()
	inst := f.Instance(t, id)
	change(&inst)
	f.Put(inst.Item())
}

// Updates are the instance and record updates attempted, alone or in
// transactions, in order.
func (f *Table) Updates() []*dynamodb.UpdateItemInput {
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

// SQS is the pool's queues, with assertions that need a *testing.T.
type SQS struct{ *awsfake.SQS }

// NewSQS is the empty queues of urls.
func NewSQS(urls ...string) *SQS { return &SQS{awsfake.NewSQS(urls...)} }

// Queued returns the messages in a queue (visible or not), parsed.
func (s *SQS) Queued(t *testing.T, url string) []protocol.Message {
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

// QueuedIDs returns the instance ids (or raw bodies) in a queue, sorted.
func (s *SQS) QueuedIDs(t *testing.T, url string) []string {
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
// agents themselves are in agents.go).

// SignalItem is the signal of id's agent.
func SignalItem(id, state, runID string) Item {
	return protocol.Signal{InstanceARN: ARN(id), State: state, RunID: runID, UpdatedAt: protocol.FormatTime(time.Now())}.Item()
}

// HeartbeatAt is id's agent's heartbeat written at at.
func HeartbeatAt(id string, at time.Time) Item {
	return protocol.HeartbeatItem(ARN(id), protocol.FormatTime(at))
}

// ---------------------------------------------------------------- the pool

const (
	Pool       = "testpool"
	ARNPrefix  = "arn:aws:ec2:eu-west-1:123456789012:instance/"
	Run        = "run-1"
	LargeURL   = "https://sqs.test/000000000000/testpool-large"
	XLargeURL  = "https://sqs.test/000000000000/testpool-xlarge"
	IdleTime   = 20 * time.Minute
	MaxRunTime = time.Hour
)

// ARN is the ARN of a test instance.
func ARN(id string) string { return protocol.InstanceARN(ARNPrefix, id) }

// Config is the pool's configuration: two resource classes (large and
// xlarge), each with its queue, and an attribute-based fleet.
func Config() protocol.PoolConfig {
	return protocol.PoolConfig{
		Name:              Pool,
		InstanceARNPrefix: ARNPrefix,
		ResourceClasses: map[string]protocol.ResourceClass{
			"large": {CPU: 2, MemoryMiB: 4096}, "xlarge": {CPU: 4, MemoryMiB: 8192},
		},
		IdleTimeout: protocol.Duration(IdleTime),
		MaxRuntime:  protocol.Duration(MaxRunTime),
		Fleet: &protocol.FleetConfig{
			LaunchTemplateID: "lt-0123", LaunchTemplateVersion: "$Latest",
			SubnetIDs: []string{"subnet-a", "subnet-b"}, InstanceSelection: protocol.SelectionAttributeBased,
		},
		QueueURLs: map[string]string{"large": LargeURL, "xlarge": XLargeURL},
	}
}

// World is the pool in fakes: its table, queues, EC2 and agents.
type World struct {
	T      *testing.T
	DB     *Table
	SQS    *SQS
	EC2    *awsfake.EC2
	Agents *Agents
}

// New is an empty pool (its configuration not yet written).
func New(t *testing.T) *World {
	t.Helper()
	w := &World{T: t, DB: NewTable(Pool), SQS: NewSQS(LargeURL, XLargeURL),
		EC2: &awsfake.EC2{Pool: Pool, Images: map[string]ec2types.ArchitectureValues{}}}
	w.Agents = NewAgents(t, w.DB.Table, w.EC2)
	return w
}

// WriteConfig writes the pool's config item.
func (w *World) WriteConfig(cfg protocol.PoolConfig) {
	w.DB.Put(cfg.Item(protocol.FormatTime(time.Now())))
}

// RegisterWith makes the pool's runners register with target: the pool's
// config (cfg, written) and its agents say so.
func (w *World) RegisterWith(cfg *protocol.PoolConfig, target protocol.GitHubTarget) {
	cfg.GitHub = &target
	w.WriteConfig(*cfg)
	w.Agents.SetTarget(target.String())
}

// AddSlot gives a runner the next slot of a tier of class, as the claims
// keep their slots (TYPE#LEASE, ID#warm-<tier>-<class>).
func (w *World) AddSlot(tier protocol.Tier, class string, sl Slot) {
	w.T.Helper()
	id := "warm-" + string(tier) + "-" + class
	key := protocol.Key(protocol.TypeLease, id)
	slots := map[string]Slot{}
	if it := w.DB.GetKey(key); it != nil {
		if err := json.Unmarshal([]byte(protocol.StringAttr(it, protocol.AttrValue)), &slots); err != nil {
			w.T.Fatal(err)
		}
	}
	slots[strconv.Itoa(len(slots))] = sl
	doc, _ := json.Marshal(slots)
	it := protocol.BaseItem(protocol.TypeLease, id, protocol.FormatTime(time.Now()))
	it[protocol.AttrValue] = &types.AttributeValueMemberS{Value: string(doc)}
	w.DB.Put(it)
}

// Slot is a slot of a warm tier as the claims write it: the runner that
// holds it, until when, since when, and the run that took it.
type Slot struct {
	ID    string `json:"id"`
	Until string `json:"until"`
	Taken string `json:"taken"`
	Run   string `json:"run"`
}

// IdleMessage is the queue message of an idle large runner.
func IdleMessage(id, typ string, until time.Time) protocol.Message {
	return protocol.Message{ID: id, ResourceClass: "large", InstanceType: typ, CPU: 2, MemoryMiB: 4096, UsageClass: protocol.UsageOnDemand, Threshold: protocol.FormatTime(until)}
}

// SeedIdle puts an idle large runner in the pool: its record, its heartbeat
// (as its behaviour has it) and its message.
func (w *World) SeedIdle(id string, b Behavior) protocol.Message {
	w.T.Helper()
	until := time.Now().Add(time.Hour) // distinct from the pool's idle timeout
	m := IdleMessage(id, "c6i.large", until)
	w.SeedRecord(protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: m.Threshold}, b)
	w.SQS.Add(LargeURL, m.Body())
	return m
}

// SeedStopped puts a stopped large runner in the pool, but for the slot of
// the stopped tier it holds: its instance stopped, and its record in its
// stopped time, until the time it returns. Its agent acts as b once
// started.
func (w *World) SeedStopped(id string, b Behavior) (until string) {
	w.T.Helper()
	until = protocol.FormatTime(time.Now().Add(24 * time.Hour))
	w.EC2.Launch(id, time.Now().Add(-2*time.Hour))
	w.EC2.Mu.Lock()
	w.EC2.StopLocked(id)
	w.EC2.Mu.Unlock()
	w.SeedRecord(protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: protocol.FormatTime(time.Now().Add(-time.Hour)), StopUntil: until,
		LaunchedAt: protocol.FormatTime(time.Now().Add(-2 * time.Hour)), TemplateVersion: "1"}, b)
	return until
}

// SeedRecord writes an instance record (large, c6i.large, on-demand by
// default) and gives it an agent that acts as b: one running for long (its
// heartbeat written, the record acted on), or the machine of a stopped
// instance.
func (w *World) SeedRecord(inst protocol.Instance, b Behavior) {
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
	w.Agents.Set(inst.ID, b)
	w.DB.Put(inst.Item())
	w.Agents.Seed(inst.ID, b)
}

// PutRecord writes an instance record (large, c6i.large, on-demand) as it
// stands, updated at updated, with no agent.
func (w *World) PutRecord(id, state, runID string, threshold, updated time.Time) {
	inst := protocol.Instance{ID: id, State: state, RunID: runID, Threshold: protocol.FormatTime(threshold),
		ResourceClass: "large", InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, UpdatedAt: protocol.FormatTime(updated)}
	w.DB.Put(inst.Item())
}

// ---------------------------------------------------------------- assertions

// Token reads the token sk of instance id.
func (w *World) Token(id, sk string) (protocol.RunnerToken, bool) {
	w.T.Helper()
	it := w.DB.GetAgent(id, sk)
	if it == nil {
		return protocol.RunnerToken{}, false
	}
	tok, err := protocol.RunnerTokenFromItem(it)
	if err != nil {
		w.T.Fatal(err)
	}
	return tok, true
}

// Log logs a line of the code under test to the test's log.
func (w *World) Log(msg string, kv ...any) { w.T.Log(append([]any{msg}, kv...)...) }

// CaptureLogs is a log for the code under test whose lines read, joined,
// through the function it returns (safe while goroutines still log).
func CaptureLogs() (log func(msg string, kv ...any), read func() string) {
	var mu sync.Mutex
	var lines []string
	log = func(msg string, kv ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprint(append([]any{msg}, kv...)...))
	}
	return log, func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
}

// Window is the range a threshold set between two instants plus d may take.
type Window struct{ lo, hi string }

// During is the window of a threshold set d after an instant between start
// and now.
func During(start time.Time, d time.Duration) Window {
	return Window{protocol.FormatTime(start.Add(d)), protocol.FormatTime(time.Now().Add(d))}
}

// Check fails t when got is outside the window.
func (w Window) Check(t *testing.T, what, got string) {
	t.Helper()
	if got < w.lo || got > w.hi {
		t.Errorf("%s = %s, want within [%s, %s]", what, got, w.lo, w.hi)
	}
}

// Render prints an item with its values, for comparing items.
func Render(it Item) string {
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
			fmt.Fprintf(&b, "%s=M:{%s} ", k, Render(v.Value))
		default:
			fmt.Fprintf(&b, "%s=%T ", k, v)
		}
	}
	return b.String()
}
