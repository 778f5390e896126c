package maintenance

// The maintenance tests' pool: the pool in fakes with the real agents
// (internal/testworld/poolworld), and a Claimer that claims from it.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

// env is the pool and its config, with a Claimer on top.
type env struct {
	*poolworld.World
	cfg protocol.PoolConfig
	c   *claim.Claimer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	w := poolworld.New(t)
	// Claims and releases reap only once a test sets ReapInterval
	// (maintained_test.go).
	e := &env{World: w, cfg: poolworld.Config(), c: &claim.Claimer{DynamoDB: w.DB, SQS: w.SQS, EC2: w.EC2, ReapInterval: -1, Log: w.Log}}
	e.writeConfig()
	return e
}

func (e *env) writeConfig() { e.WriteConfig(e.cfg) }

// timings are short waits for the agents, which answer at once.
func timings() claim.Timings {
	t := claim.DefaultTimings()
	t.RegistrationWait, t.FleetValidationWait, t.ReleaseWait, t.PollInterval = 300*time.Millisecond, 500*time.Millisecond, 300*time.Millisecond, 10*time.Millisecond
	return t
}

// request asks for n large runners for the test run.
func (e *env) request(n int) claim.Request {
	return claim.Request{Pool: poolworld.Pool, RunID: poolworld.Run, InstanceCount: n, ResourceClass: "large", UsageClass: protocol.UsageOnDemand,
		AllowedTypes: []string{"c*", "m*"}, FleetFallback: true, Timings: timings()}
}

// create claims n runners, the request changed as change says.
func (e *env) create(n int, change ...func(*claim.Request)) (*claim.Result, error) {
	req := e.request(n)
	for _, c := range change {
		c(&req)
	}
	return e.c.Create(context.Background(), req)
}

// captureLogs makes the Claimer's log lines readable (poolworld.CaptureLogs).
func (e *env) captureLogs() func() string {
	log, read := poolworld.CaptureLogs()
	e.c.Log = log
	return read
}

func (e *env) reap() ReapResult {
	e.T.Helper()
	res, err := Reap(context.Background(), e.c, poolworld.Pool)
	if err != nil {
		e.T.Fatal(err)
	}
	return res
}

func sorted(ids []string) []string { return slices.Sorted(slices.Values(ids)) }

func strAttr(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
