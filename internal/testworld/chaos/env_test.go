package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/audit"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

const region = "us-east-1"

var (
	endpoint string
	direct   *awsconfig.Clients // straight to the emulator: setup, agents, audits
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	ctx := context.Background()
	ep, stop, err := emulator.Ensure(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos tests need the AWS emulator:", err)
		return 1
	}
	defer stop()
	// With EC2RUNNERS_AWS_CALLS set, the claims' calls (through w.faulty
	// and terraform) are recorded for the policy check.
	ep, stopRecording, err := awsrecord.Start(ctx, ep, "chaos")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopRecording()
	endpoint = ep
	direct, err = clientsFor(ctx, ep, "test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// clientsFor builds the provider's own clients (its retry policy included)
// for an endpoint, with an access key: "test" for the tests' own setup and
// checks, awsrecord.ClaimsKey for the code under test.
func clientsFor(ctx context.Context, url, accessKey string) (*awsconfig.Clients, error) {
	return awsconfig.New(ctx, awsconfig.Options{
		Region: region, AccessKey: accessKey, SecretKey: awsrecord.TestSecret,
		Endpoints: awsconfig.Endpoints{SQS: url, DynamoDB: url, EC2: url, STS: url},
	})
}

// world is one test's pool with a fleet, simulated agents for its
// instances, and a fault-injecting proxy in front of the emulator.
type world struct {
	t      *testing.T
	pool   string
	proxy  *faultproxy.Proxy
	faulty *awsconfig.Clients // through the proxy: what the provider uses
	sim    *agentsim.Sim
	// judgedUnhealthy counts runners a claim let go for failing its checks:
	// every simulated agent is healthy, whatever its clock says.
	judgedUnhealthy atomic.Int32
	// fleetBehavior is how the agents of instances launched from now on
	// behave (agentsim.Healthy unless a test says otherwise).
	fleetBehavior atomic.Int32
}

func newWorld(t *testing.T, prefix string, seed uint64) *world {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	w := &world{t: t, pool: prefix + "-" + hex.EncodeToString(b)}
	var err error
	if w.proxy, err = faultproxy.New(endpoint, seed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.proxy.Close)
	// The whole realism layer: what AWS does and the emulator does not.
	w.proxy.SetRealism(faultproxy.WholeRealism())
	if w.faulty, err = clientsFor(ctx, w.proxy.URL, awsrecord.ClaimsKey); err != nil {
		t.Fatal(err)
	}
	ltID, subnets, err := emulator.PoolLaunchTemplate(ctx, direct.EC2, w.pool, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := &pool.Manager{DynamoDB: direct.DynamoDB, SQS: direct.SQS, EC2: direct.EC2, STS: direct.STS, Region: direct.Region}
	if _, err := m.Create(ctx, pool.Spec{
		Name:            w.pool,
		ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}},
		IdleTimeout:     30 * time.Minute, MaxRuntime: 30 * time.Minute,
		Fleet: &protocol.FleetConfig{
			LaunchTemplateID: ltID, LaunchTemplateVersion: "$Default",
			SubnetIDs: subnets, InstanceSelection: protocol.SelectionExplicit,
		},
	}); err != nil {
		t.Fatal(err)
	}
	w.sim = agentsim.New(agentsim.Clients{DynamoDB: direct.DynamoDB, EC2: direct.EC2, SQS: direct.SQS}, w.pool, agentsim.Options{
		HeartbeatInterval: time.Second, PollInterval: 250 * time.Millisecond, SelfCheckInterval: 5 * time.Second, Logf: t.Logf,
		// Instances' clocks are not the provider's: a minute behind or ahead.
		ClockSkew: time.Minute * time.Duration(1-2*int(seed%2)),
	})
	w.fleetBehavior.Store(int32(agentsim.Healthy))
	w.sim.WatchFleet(ctx, func(string, int) agentsim.Behavior { return agentsim.Behavior(w.fleetBehavior.Load()) })
	t.Cleanup(func() {
		w.sim.Stop()
		if err := m.Delete(context.Background(), w.pool, true); err != nil {
			t.Errorf("deleting the pool: %v", err)
		}
		_, _ = direct.EC2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(ltID)})
	})
	return w
}

// seed puts n healthy idle runners in the pool.
func (w *world) seed(n int) []string {
	w.t.Helper()
	ids, err := w.sim.SeedIdle(context.Background(), n, agentsim.SeedSpec{ResourceClass: "large", IdleTimeout: 30 * time.Minute})
	if err != nil {
		w.t.Fatal(err)
	}
	return ids
}

// tenPercent injects faults into about one request in ten, of every kind,
// into every service and action, and transaction conflicts into a few
// DynamoDB writes, as concurrent transactions on the same items cause.
var tenPercent = []faultproxy.Rule{
	{Kind: faultproxy.Throttle, Rate: 0.04},
	{Kind: faultproxy.ServerError, Rate: 0.03},
	{Kind: faultproxy.DropBefore, Rate: 0.015},
	{Kind: faultproxy.DropAfter, Rate: 0.015},
	{Kind: faultproxy.Conflict, Rate: 0.03},
}

// audit checks the pool's invariants with faults paused, once messages in
// flight are visible again.
func (w *world) audit(when string) {
	w.t.Helper()
	w.proxy.Pause(true)
	defer w.proxy.Pause(false)
	rep, err := audit.Pool(context.Background(), audit.Clients{DynamoDB: direct.DynamoDB, SQS: direct.SQS, EC2: direct.EC2}, w.pool)
	if err != nil {
		w.t.Fatalf("audit %s: %v", when, err)
	}
	w.t.Logf("audit %s: %s", when, rep)
	if !rep.OK() {
		w.t.Errorf("audit %s: invariants broken: %s", when, rep)
	}
}
