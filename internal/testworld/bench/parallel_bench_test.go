package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/latency"
)

// Bursts where the service answers in parallel (issue 38): the burst
// scenarios of BenchmarkBurst on the in-memory AWS (internal/testworld/awsfake)
// behind the latency of the real services (internal/testworld/latency, whose
// package comment cites its figures), on the machine's clock: SQS's
// visibility timeouts and delays run in real time, its in-flight count lags
// by parallelCountLag, and EC2 does not know a new instance for its first
// calls. Calls overlap as on AWS, so a burst's p95 measures the claims, not
// an emulator's queue. The agents are the real agent (agentsim) at the
// defaults (a 250 ms wait for a run, a heartbeat every 5 s), and the claims
// read their runners' signals at the provider's default poll (250 ms). The
// seeds' algorithm (baseline.go) runs the same burst in a world seeded alike.

const (
	// parallelCountLag: SQS's approximate counts "may not achieve
	// consistency until at least 1 minute after the producers stop sending
	// messages" (SQS API Reference, GetQueueAttributes); the in-flight
	// count a claim reads in a burst is taken to lag by a second
	// (assumed).
	parallelCountLag = time.Second
	// parallelUnseenCalls: EC2's eventual consistency, the first calls
	// naming a new instance answer InvalidInstanceID.NotFound (EC2
	// Developer Guide, "Eventual consistency in the Amazon EC2 API"; the
	// count of 2 is assumed).
	parallelUnseenCalls = 2
	parallelAccount     = "123456789012"
	parallelImage       = "ami-bench"
)

// parallelSizes are the burst sizes BenchmarkBurstParallel runs.
var parallelSizes = flag.String("burst-parallel-sizes", "100,1000", "BenchmarkBurstParallel: burst sizes (claims, and hot runners), comma-separated")

// parallelWorld is one pool on the in-memory AWS behind the latency model:
// its hot runners with their agents, and counted clients for the claims.
type parallelWorld struct {
	name    string
	cfg     protocol.PoolConfig
	table   *awsfake.Table
	queues  *awsfake.WallClockSQS
	model   *latency.Model
	sim     *agentsim.Sim
	counter *Counter
	db      latency.DynamoDB // counted: the claims'
	sqs     latency.SQS
	ec2     latency.EC2
}

// imageEC2 answers the image lookup of agentsim's seeding (a DescribeImages
// by filter, which the fake does not evaluate) with the world's one image.
type imageEC2 struct{ latency.EC2 }

func (*imageEC2) DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	return &ec2.DescribeImagesOutput{Images: []ec2types.Image{{ImageId: aws.String(parallelImage), Architecture: ec2types.ArchitectureValuesX8664}}}, nil
}

// newParallelWorld seeds the scenario's hot runners, and extra more of the
// first group's (what the lone claims take before the burst).
func newParallelWorld(b *testing.B, s burstScenario, extra int, seed uint64) *parallelWorld {
	b.Helper()
	ctx := context.Background()
	w := &parallelWorld{name: "burst-" + randomSuffix(), model: latency.AWS(seed), counter: NewCounter()}
	w.cfg = protocol.PoolConfig{
		Name: w.name, InstanceARNPrefix: "arn:aws:ec2:us-east-1:" + parallelAccount + ":instance/",
		ResourceClasses: map[string]protocol.ResourceClass{}, QueueURLs: map[string]string{},
		IdleTimeout: protocol.Duration(burstIdle), MaxRuntime: protocol.Duration(poolRuntime),
		Fleet: &protocol.FleetConfig{
			LaunchTemplateID: "lt-0123", LaunchTemplateVersion: "$Default", SubnetIDs: []string{"subnet-bench"},
			InstanceSelection: protocol.SelectionExplicit,
		},
	}
	ec2Fake := &awsfake.EC2{Pool: w.name, LtImage: parallelImage, UnseenCalls: parallelUnseenCalls,
		Images: map[string]ec2types.ArchitectureValues{parallelImage: ec2types.ArchitectureValuesX8664}}
	var urls []string
	for _, c := range s.classes {
		w.cfg.ResourceClasses[c.name] = c.class
		w.cfg.QueueURLs[c.name] = "https://sqs.us-east-1.amazonaws.com/" + parallelAccount + "/" + protocol.QueueName(w.name, c.name)
		urls = append(urls, w.cfg.QueueURLs[c.name])
	}
	for _, g := range s.hot {
		c := w.cfg.ResourceClasses[g.class]
		ec2Fake.Catalog = append(ec2Fake.Catalog, awsfake.InstanceTypeInfo(g.instanceType, int32(c.CPU), int64(c.MemoryMiB), false, ec2types.ArchitectureTypeX8664))
	}
	w.table = awsfake.NewTable(protocol.TableName(w.name))
	w.table.Put(w.cfg.Item(protocol.FormatTime(time.Now())))
	w.queues = &awsfake.WallClockSQS{SQS: awsfake.NewSQS(urls...)}
	w.queues.CountLag = parallelCountLag
	w.db = latency.DynamoDB{Inner: w.table, Model: w.model, Observe: w.counter.Observe}
	w.sqs = latency.SQS{Inner: w.queues, Model: w.model, Observe: w.counter.Observe}
	w.ec2 = latency.EC2{Inner: ec2Fake, Model: w.model, Observe: w.counter.Observe}
	w.sim = agentsim.New(agentsim.Clients{
		DynamoDB: latency.DynamoDB{Inner: w.table, Model: w.model},
		EC2:      &imageEC2{latency.EC2{Inner: ec2Fake, Model: w.model}},
		SQS:      latency.SQS{Inner: w.queues, Model: w.model},
	}, w.name, agentsim.Options{FleetWatchInterval: time.Second})
	b.Cleanup(w.sim.Stop)
	w.model.Pause() // seeding is setup
	for i, g := range s.hot {
		n := g.n
		if i == 0 {
			n += extra
		}
		c := w.cfg.ResourceClasses[g.class]
		if _, err := w.sim.SeedIdle(ctx, n, agentsim.SeedSpec{
			ResourceClass: g.class, InstanceType: g.instanceType, CPU: c.CPU, MemoryMiB: c.MemoryMiB,
			IdleTimeout: burstIdle, QueueURL: w.cfg.QueueURLs[g.class],
		}); err != nil {
			b.Fatal(err)
		}
	}
	w.model.Resume()
	// After the seeding: the fake keeps no tags, and the watch would take
	// the seeded instances for launched ones.
	w.sim.WatchFleet(ctx, nil)
	return w
}

// claimer is the provider's claim code on the world's counted clients.
func (w *parallelWorld) claimer() *claim.Claimer {
	return &claim.Claimer{DynamoDB: w.db, SQS: w.sqs, EC2: w.ec2, ReapInterval: -1}
}

// seeds is the seeds' algorithm on the world's counted clients, at the
// provider's default poll and waits.
func (w *parallelWorld) seeds() *BaselineClaimer {
	t := claim.DefaultTimings()
	return &BaselineClaimer{DynamoDB: w.db, SQS: w.sqs, PollInterval: t.PollInterval, RegistrationWait: t.RegistrationWait, HeartbeatMaxAge: t.HeartbeatMaxAge}
}

// seedsTogether runs the seeds' claims of reqs together with c, in the
// pool of cfg. A claim that finds its pool exhausted would launch (the
// seeds go on to CreateFleet): it counts as launched, and its time is the
// time it took to find that out.
func seedsTogether(c *BaselineClaimer, cfg protocol.PoolConfig, reqs []claim.Request) []burstOutcome {
	return startTogether(len(reqs), func(i int) burstOutcome {
		req := reqs[i]
		began := time.Now()
		ids, err := c.Claim(context.Background(), BaselineRequest{
			Table: protocol.TableName(cfg.Name), QueueURL: cfg.QueueURLs[req.ResourceClass], RunID: req.RunID,
			InstanceARNPrefix: cfg.InstanceARNPrefix, Count: req.InstanceCount, MaxRuntime: poolRuntime,
			Wants: claim.Wants{ResourceClass: req.ResourceClass, Class: cfg.ResourceClasses[req.ResourceClass], AllowedTypes: req.AllowedTypes, UsageClass: req.UsageClass},
		})
		o := burstOutcome{req: req, elapsed: time.Since(began), res: &claim.Result{Reused: len(ids)}}
		if errors.Is(err, ErrBaselineExhausted) {
			o.res.Created, err = req.InstanceCount-len(ids), nil
		}
		o.err = err
		for _, id := range ids {
			o.res.Instances = append(o.res.Instances, claim.Instance{ID: id})
		}
		return o
	})
}

// BenchmarkBurstParallel: the bursts of BenchmarkBurst (one class; two
// classes, mismatched types) of 100 and of 1000 claims, on the parallel
// world, ours and the seeds' algorithm each in a world of its own seeded
// alike: warm, launched, p50, p95 and p95/lone, calls per claim and their
// ratio to a lone claim's.
func BenchmarkBurstParallel(b *testing.B) {
	for _, field := range strings.Split(*parallelSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 4 {
			b.Fatalf("-burst-parallel-sizes: %q is not a burst size of at least 4", field)
		}
		for _, s := range burstScenarios(n) {
			b.Run(fmt.Sprintf("size=%d/%s", n, s.name), func(b *testing.B) {
				var ours, seeds burstFigures
				for i := range b.N {
					b.StopTimer()
					ours = runParallel(b, s, "ours", uint64(i))
					seeds = runParallel(b, s, "seeds", uint64(i))
					b.StartTimer()
				}
				reportBurst(b, parallelSection, s, ours, &seeds)
			})
		}
	}
	summary.note(fmt.Sprintf("Bursts on the parallel world: the same scenarios on internal/testworld/awsfake behind internal/testworld/latency's model of AWS's per-call latency "+
		"(DynamoDB single items 5 ms median, batches 8 ms, transactions 12 ms; SQS 15 ms; EC2 describes 150 ms, launches 1 s; log-normal, calls overlap), on the machine's clock "+
		"(SQS visibility in real time, in-flight counts %s late, EC2 unaware of a new instance for its first %d calls); agents and claims at the provider's defaults (250 ms polls). "+
		"Lone: the median of %d claims of one runner, one at a time, in the same world just before; calls/claim is compared with a lone claim's. "+
		"The seeds' algorithm (baseline.go) runs the same burst in a world of its own seeded alike; a seeds' claim that finds its queue exhausted counts as launched.",
		parallelCountLag, parallelUnseenCalls, burstLoneClaims))
}

const parallelSection = "5. Bursts on the parallel world (in-memory AWS behind AWS's per-call latency; calls overlap)"

// runParallel runs the lone claims and then the burst of scenario s with
// algo ("ours" or "seeds") in a fresh world.
func runParallel(b *testing.B, s burstScenario, algo string, seed uint64) burstFigures {
	b.Helper()
	w := newParallelWorld(b, s, burstLoneClaims, seed)
	claimAll := func(reqs []claim.Request) []burstOutcome {
		if algo == "seeds" {
			return seedsTogether(w.seeds(), w.cfg, reqs)
		}
		return claimTogether(w.claimer(), reqs, nil)
	}
	first := s.claims[0]
	var lone []time.Duration
	loneBefore := w.counter.Snapshot()
	for i := range burstLoneClaims {
		o := claimAll(atDefaults([]claim.Request{burstRequest(w.name, first.class, first.allowed, fmt.Sprintf("lone-%d", i))}))[0]
		if o.err != nil || o.res.Reused != 1 {
			b.Fatalf("%s: lone claim: reused %v, error %v: the pool did not serve it", algo, o.res, o.err)
		}
		lone = append(lone, o.elapsed)
	}
	loneCalls := w.counter.Snapshot().Sub(loneBefore)
	slices.Sort(lone)
	before := w.counter.Snapshot()
	outcomes := claimAll(atDefaults(s.requests(w.name)))
	f, _ := summarize(outcomes)
	f.lone = percentile(lone, 50)
	f.loneCalls = float64(loneCalls.Total()) / burstLoneClaims
	f.calls = w.counter.Snapshot().Sub(before)
	f.violations = sharedRunners(outcomes)
	b.Logf("%s %s: lone claim's calls: %s", algo, s.name, loneCalls.Per(burstLoneClaims))
	if algo == "ours" {
		logUnserved(b, outcomes) // the seeds' claims log nothing
	}
	return f
}

// atDefaults gives the requests the provider's default timings: the
// parallel world serves agents and claims at their defaults' pace.
func atDefaults(reqs []claim.Request) []claim.Request {
	for i := range reqs {
		reqs[i].Timings = claim.DefaultTimings()
	}
	return reqs
}

// sharedRunners counts the runners handed to more than one claim of a
// burst.
func sharedRunners(outcomes []burstOutcome) int {
	owners := map[string]int{}
	for _, o := range outcomes {
		if o.err != nil {
			continue
		}
		for _, inst := range o.res.Instances {
			owners[inst.ID]++
		}
	}
	shared := 0
	for _, n := range owners {
		if n > 1 {
			shared++
		}
	}
	return shared
}
