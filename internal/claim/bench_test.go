package claim_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// benchPool is a pool in the emulator with simulated agents, and clients
// that count every AWS API call the claimer makes.
type benchPool struct {
	name    string
	claimer *claim.Claimer
	calls   atomic.Int64
	// logCalls counts the CloudWatch Logs calls among calls.
	logCalls atomic.Int64
	logs     *cloudwatchlogs.Client
	mgr      *pool.Manager
	sim      *agentsim.Sim
	queue    string
	sqs      *sqs.Client
}

func newBenchPool(b *testing.B) *benchPool {
	b.Helper()
	ctx := context.Background()
	endpoint, stop, err := emulator.Ensure(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	for k, v := range map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"} {
		if os.Getenv(k) == "" {
			b.Setenv(k, v)
		}
	}
	p := &benchPool{}
	cfg, err := awsconfig.Load(ctx, awsconfig.Options{})
	if err != nil {
		b.Fatal(err)
	}
	counted := cfg.Copy()
	counted.APIOptions = append(counted.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("countCalls", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			p.calls.Add(1)
			if awsmiddleware.GetServiceID(ctx) == "CloudWatch Logs" {
				p.logCalls.Add(1)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	})
	at := func(c aws.Config) (*dynamodb.Client, *sqs.Client, *ec2.Client) {
		return dynamodb.NewFromConfig(c, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }),
			sqs.NewFromConfig(c, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) }),
			ec2.NewFromConfig(c, func(o *ec2.Options) { o.BaseEndpoint = aws.String(endpoint) })
	}
	db, q, e := at(cfg)
	cdb, cq, ce := at(counted)
	p.sqs = q
	p.claimer = &claim.Claimer{DynamoDB: cdb, SQS: cq, EC2: ce}
	p.logs = cloudwatchlogs.NewFromConfig(counted, func(o *cloudwatchlogs.Options) { o.BaseEndpoint = aws.String(endpoint) })

	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	p.name = "bench-" + hex.EncodeToString(suffix)
	ltID, subnets, err := emulator.PoolLaunchTemplate(ctx, e, p.name, 1)
	if err != nil {
		b.Fatal(err)
	}
	mgr := &pool.Manager{DynamoDB: db, SQS: q, EC2: e, STS: sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = aws.String(endpoint) }), Region: cfg.Region}
	st, err := mgr.Create(ctx, pool.Spec{
		Name: p.name, ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}},
		IdleTimeout: 7 * time.Minute, MaxRuntime: 30 * time.Minute,
		Fleet: &protocol.FleetConfig{
			LaunchTemplateID: ltID, LaunchTemplateVersion: "$Default",
			SubnetIDs: subnets, InstanceSelection: protocol.SelectionExplicit,
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	p.queue = st.QueueURLs["large"]
	p.mgr = mgr
	p.sim = agentsim.New(agentsim.Clients{DynamoDB: db, EC2: e, SQS: q}, p.name, agentsim.Options{
		HeartbeatInterval: time.Second, PollInterval: 250 * time.Millisecond, WaitInterval: 100 * time.Millisecond,
	})
	b.Cleanup(func() {
		p.sim.Stop()
		_ = mgr.Delete(context.Background(), p.name, true)
	})
	return p
}

func (p *benchPool) request(count int, fleet bool) claim.Request {
	t := claim.DefaultTimings()
	t.PollInterval = 100 * time.Millisecond
	return claim.Request{
		Pool: p.name, RunID: "bench-" + time.Now().Format("150405.000000000"), InstanceCount: count,
		ResourceClass: "large", UsageClass: protocol.UsageOnDemand, AllowedTypes: []string{"c*", "m*", "r*"},
		FleetFallback: fleet, Timings: t,
	}
}

// report adds API calls per operation to the benchmark's output.
func (p *benchPool) report(b *testing.B, start int64) {
	b.ReportMetric(float64(p.calls.Load()-start)/float64(b.N), "api-calls/op")
}

// BenchmarkClaimReuse: claim two warm runners and release them again.
func BenchmarkClaimReuse(b *testing.B) {
	p := newBenchPool(b)
	ctx := context.Background()
	if _, err := p.sim.SeedIdle(ctx, 2, agentsim.SeedSpec{ResourceClass: "large"}); err != nil {
		b.Fatal(err)
	}
	start := p.calls.Load()
	b.ResetTimer()
	for range b.N {
		req := p.request(2, false)
		res, err := p.claimer.Create(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if res.Reused != 2 {
			b.Fatalf("reused %d, want 2", res.Reused)
		}
		if _, err := p.claimer.Release(ctx, p.name, req.RunID); err != nil {
			b.Fatal(err)
		}
	}
	p.report(b, start)
}

// BenchmarkClaimReuseMetrics is BenchmarkClaimReuse for a pool with
// metrics settings: the claim and the release publish one PutLogEvents
// each (and a reap, at most once a minute, one more).
func BenchmarkClaimReuseMetrics(b *testing.B) {
	p := newBenchPool(b)
	ctx := context.Background()
	group := "/ec2runners/" + p.name
	if _, err := p.logs.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(group)}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = p.logs.DeleteLogGroup(context.Background(), &cloudwatchlogs.DeleteLogGroupInput{LogGroupName: aws.String(group)})
	})
	st, err := p.mgr.Read(ctx, p.name)
	if err != nil {
		b.Fatal(err)
	}
	p.mgr.Logs = p.logs
	spec := pool.Spec{Name: p.name, ResourceClasses: st.Config.ResourceClasses, IdleTimeout: time.Duration(st.Config.IdleTimeout), MaxRuntime: time.Duration(st.Config.MaxRuntime),
		Fleet: st.Config.Fleet, Metrics: &protocol.MetricsConfig{Namespace: "EC2RunnersBench", LogGroup: group}}
	if _, err := p.mgr.Update(ctx, spec); err != nil {
		b.Fatal(err)
	}
	p.claimer.Metrics = &metrics.Publisher{Logs: p.logs}
	p.claimer.Warn = func(summary, detail string) { b.Errorf("%s: %s", summary, detail) }
	if _, err := p.sim.SeedIdle(ctx, 2, agentsim.SeedSpec{ResourceClass: "large"}); err != nil {
		b.Fatal(err)
	}
	start, logStart := p.calls.Load(), p.logCalls.Load()
	b.ResetTimer()
	for range b.N {
		req := p.request(2, false)
		if _, err := p.claimer.Create(ctx, req); err != nil {
			b.Fatal(err)
		}
		if _, err := p.claimer.Release(ctx, p.name, req.RunID); err != nil {
			b.Fatal(err)
		}
	}
	p.report(b, start)
	b.ReportMetric(float64(p.logCalls.Load()-logStart)/float64(b.N), "put-log-events/op")
}

// BenchmarkClaimFleet: claim two runners from an empty pool (CreateFleet and
// validation), release them, and empty the queue for the next round.
func BenchmarkClaimFleet(b *testing.B) {
	p := newBenchPool(b)
	ctx := context.Background()
	p.sim.WatchFleet(ctx, nil)
	var calls int64
	b.ResetTimer()
	for range b.N {
		req := p.request(2, true)
		start := p.calls.Load()
		res, err := p.claimer.Create(ctx, req)
		calls += p.calls.Load() - start
		if err != nil {
			b.Fatal(err)
		}
		if res.Created != 2 {
			b.Fatalf("created %d, want 2", res.Created)
		}
		b.StopTimer()
		if _, err := p.claimer.Release(ctx, p.name, req.RunID); err != nil {
			b.Fatal(err)
		}
		p.drain(b)
		b.StartTimer()
	}
	b.ReportMetric(float64(calls)/float64(b.N), "api-calls/op")
}

// BenchmarkPickupExhaustion: a claim that fits none of 30 idle runners
// (wrong instance type) scans and requeues them until it gives up.
func BenchmarkPickupExhaustion(b *testing.B) {
	p := newBenchPool(b)
	ctx := context.Background()
	if _, err := p.sim.SeedIdle(ctx, 30, agentsim.SeedSpec{ResourceClass: "large", InstanceType: "m6i.large"}); err != nil {
		b.Fatal(err)
	}
	start := p.calls.Load()
	b.ResetTimer()
	for range b.N {
		req := p.request(1, false)
		req.AllowedTypes = []string{"r*"}
		if _, err := p.claimer.Create(ctx, req); err == nil {
			b.Fatal("a claim no runner fits succeeded")
		}
	}
	p.report(b, start)
}

func (p *benchPool) drain(b *testing.B) {
	ctx := context.Background()
	for {
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(p.queue), MaxNumberOfMessages: 10})
		if err != nil {
			b.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return
		}
		for _, m := range out.Messages {
			if _, err := p.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.queue), ReceiptHandle: m.ReceiptHandle}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
