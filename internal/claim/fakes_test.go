package claim

// The claim tests' view of the pool in fakes (internal/testworld/poolworld,
// its agents the real ones): the fixture, with a Claimer on top, under the
// short names the tests use.

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

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

// fakeTokens issues numbered tokens valid for an hour, or fails.
type fakeTokens = poolworld.Tokens

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
	e.c = &Claimer{DynamoDB: e.db, SQS: e.sqs, EC2: e.ec2, Log: w.Log}
	e.writeConfig()
	return e
}

func (e *env) writeConfig() { e.w.WriteConfig(e.cfg) }

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
	e.w.AddSlot(tier, class, poolworld.Slot(sl))
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
	log, read := poolworld.CaptureLogs()
	e.c.Log = log
	return read
}

func (e *env) token(id, sk string) (protocol.RunnerToken, bool) { return e.w.Token(id, sk) }
