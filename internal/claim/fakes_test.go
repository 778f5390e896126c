package claim

// The claim tests' view of the pool in fakes (internal/testworld/poolworld,
// its agents the real ones): the fixture, with a Claimer on top, under the
// short names the tests use.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

type item = poolworld.Item

// errTransient is the generic error injected into fake calls.
var errTransient = awsfake.ErrTransient

type fakeTable struct{ *poolworld.Table }

func newFakeTable(name string) *fakeTable { return &fakeTable{poolworld.NewTable(name)} }

func (f *fakeTable) getAgent(id, sk string) item { return f.GetAgent(id, sk) }

func (f *fakeTable) instance(t *testing.T, id string) protocol.Instance {
	t.Helper()
	return f.Instance(t, id)
}

func (f *fakeTable) setInstance(t *testing.T, id string, change func(*protocol.Instance)) {
	t.Helper()
	f.SetInstance(t, id, change)
}

func (f *fakeTable) updates() []*dynamodb.UpdateItemInput { return f.Updates() }

type fakeSQS struct{ *poolworld.SQS }

func newFakeSQS(urls ...string) *fakeSQS { return &fakeSQS{poolworld.NewSQS(urls...)} }

func (s *fakeSQS) queued(t *testing.T, url string) []protocol.Message {
	t.Helper()
	return s.Queued(t, url)
}

func (s *fakeSQS) queuedIDs(t *testing.T, url string) []string {
	t.Helper()
	return s.QueuedIDs(t, url)
}

// behavior is how an instance's agent acts (poolworld.Behavior).
type behavior = poolworld.Behavior

// The pool's names, and its agents' behaviors.
const (
	testPool      = poolworld.Pool
	testARNPrefix = poolworld.ARNPrefix
	testRun       = poolworld.Run
	largeURL      = poolworld.LargeURL
	xlargeURL     = poolworld.XLargeURL
	idleTime      = poolworld.IdleTime
	maxRunTime    = poolworld.MaxRunTime

	healthy              = poolworld.Healthy
	staleHeartbeat       = poolworld.StaleHeartbeat
	noHeartbeat          = poolworld.NoHeartbeat
	neverRegisters       = poolworld.NeverRegisters
	registrationFails    = poolworld.RegistrationFails
	neverConfirmsRelease = poolworld.NeverConfirmsRelease
	releasesWrongRun     = poolworld.ReleasesWrongRun
	registersLate        = poolworld.RegistersLate
)

// The pool's runners, their agents' items, and assertions.
var (
	arn, idleMessage, signalItem = poolworld.ARN, poolworld.IdleMessage, poolworld.SignalItem
	during, render               = poolworld.During, poolworld.Render
)

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
	w      *poolworld.World
	db     *fakeTable
	sqs    *fakeSQS
	ec2    *awsfake.EC2
	agents *poolworld.Agents
	cfg    protocol.PoolConfig
	c      *Claimer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	w := poolworld.New(t)
	e := &env{t: t, w: w, db: &fakeTable{w.DB}, sqs: &fakeSQS{w.SQS}, ec2: w.EC2, agents: w.Agents, cfg: poolworld.Config()}
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

func (e *env) seedIdle(id string, b behavior) protocol.Message { return e.w.SeedIdle(id, b) }

func (e *env) seedRecord(inst protocol.Instance, b behavior) { e.w.SeedRecord(inst, b) }

// seedStopped puts a stopped large runner in the pool (poolworld's
// SeedStopped) and a slot of the stopped tier that it holds.
func (e *env) seedStopped(id string, b behavior) {
	e.t.Helper()
	until := e.w.SeedStopped(id, b)
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
