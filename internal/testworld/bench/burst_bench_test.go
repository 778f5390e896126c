package bench

import (
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
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
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/audit"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

// Bursts (issue 27): a push to a monorepo starts many workflows at once,
// each claiming one runner. Claims of one runner, started together, against
// a pool holding exactly as many hot runners, through the realism layer
// (internal/testworld/faultproxy's WholeRealism: sampled receives, every message
// delivered twice, visibility timeouts cut to 3 s, superseded receipt
// handles, DynamoDB transaction conflicts, EC2's lag), with simulated agents
// (internal/testworld/agentsim: the real agent, heartbeating and registering for each
// claim at its next poll, as on an instance). A claim the pool cannot serve
// launches with CreateFleet (fleet_fallback), whose instances get agents
// too. Before the burst, lone claims of one runner in the same pool give
// the baseline the burst's p95 is compared with.

// burstClass is a resource class of a burst scenario.
type burstClass struct {
	name  string
	class protocol.ResourceClass
}

// hotGroup is n hot runners of one class and instance type.
type hotGroup struct {
	class, instanceType string
	n                   int
}

// claimGroup is n claims of one runner of a class, with allowed types.
type claimGroup struct {
	class   string
	allowed []string
	n       int
}

// burstScenario is a pool's classes and hot runners and the claims of one
// burst. The claims of its groups start interleaved (one of each group in
// turn), so that every group races every other.
type burstScenario struct {
	name    string
	classes []burstClass
	hot     []hotGroup
	claims  []claimGroup
}

func (s burstScenario) claimCount() int {
	n := 0
	for _, g := range s.claims {
		n += g.n
	}
	return n
}

// requests lists the burst's claims interleaved, for the pool.
func (s burstScenario) requests(poolName string) []claim.Request {
	left := make([]int, len(s.claims))
	for i, g := range s.claims {
		left[i] = g.n
	}
	var out []claim.Request
	for len(out) < s.claimCount() {
		for i, g := range s.claims {
			if left[i] == 0 {
				continue
			}
			left[i]--
			out = append(out, burstRequest(poolName, g.class, g.allowed, fmt.Sprintf("burst-%s-%d", randomSuffix(), len(out))))
		}
	}
	return out
}

const (
	// burstAgentPoll is how often an idle agent reads its record (the real
	// agent's default is 250 ms): 100 agents at 250 ms would need 400 reads
	// a second, about three times what the emulator serves on these 2
	// cores, and every claim would wait behind them. At 2 s they take about
	// a third of it; a claimed runner registers within about that.
	burstAgentPoll = 2 * time.Second
	// burstClaimPoll is how often a claim reads its runners' signals while
	// it waits for them (the provider's default is 250 ms): a burst's 100
	// claims at 250 ms would need 400 reads a second too.
	burstClaimPoll = time.Second
	// burstIdle is the hot runners' idle timeout: longer than poolIdle,
	// since seeding 100 agents, the lone claims and the burst take minutes
	// on a busy emulator, and a runner whose idle deadline passes is
	// rightly not served.
	burstIdle = 30 * time.Minute
	// burstFleetWatch is how often the simulation looks for instances a
	// claim launched, to boot their agents (200 ms by default): each look
	// lists the pool's 100 instances, which the emulator serializes
	// slowly, and EC2 itself knows a new instance only after 5 s here.
	burstFleetWatch = time.Second
	// burstLoneClaims: the lone claims before the burst, whose median is
	// its baseline.
	burstLoneClaims = 5
)

var (
	burstLarge  = burstClass{"large", protocol.ResourceClass{CPU: 2, MemoryMiB: 4096}}
	burstXLarge = burstClass{"xlarge", protocol.ResourceClass{CPU: 4, MemoryMiB: 8192}}
)

// burstScenarios: A, one class, every runner fits every claim; B, two
// classes, each with two instance families, and claims that each allow
// only one family, so half the runners in each queue fit a given claim and
// every claim meets the others' runners.
func burstScenarios(n int) []burstScenario {
	q := n / 4
	return []burstScenario{
		{
			name:    "one-class",
			classes: []burstClass{burstLarge},
			hot:     []hotGroup{{"large", "c6i.large", n}},
			claims:  []claimGroup{{"large", claimAllowed, n}},
		},
		{
			name:    "two-classes-mismatched",
			classes: []burstClass{burstLarge, burstXLarge},
			hot: []hotGroup{
				{"large", "c6i.large", q}, {"large", "m6i.large", q},
				{"xlarge", "c6i.xlarge", q}, {"xlarge", "r6i.xlarge", n - 3*q},
			},
			claims: []claimGroup{
				{"large", []string{"c*"}, q}, {"large", []string{"m*"}, q},
				{"xlarge", []string{"c*"}, q}, {"xlarge", []string{"r*"}, n - 3*q},
			},
		},
	}
}

func burstRequest(poolName, class string, allowed []string, runID string) claim.Request {
	t := claim.DefaultTimings()
	t.PollInterval = burstClaimPoll
	t.FleetValidationWait = 60 * time.Second
	return claim.Request{
		Pool: poolName, RunID: runID, InstanceCount: 1, ResourceClass: class,
		UsageClass: protocol.UsageOnDemand, AllowedTypes: allowed, FleetFallback: true, Timings: t,
	}
}

// burstWorld is a scenario's pool (with a fleet to launch what it lacks),
// its agents, and the realism layer the claims go through.
type burstWorld struct {
	e       *env
	name    string
	proxy   *faultproxy.Proxy
	counter *Counter
	claimer *claim.Claimer   // through the proxy, counted
	seeds   *BaselineClaimer // the seeds' algorithm, on the claimer's clients
	cfg     protocol.PoolConfig
	sim     *agentsim.Sim
}

func newBurstWorld(b *testing.B, e *env, s burstScenario) *burstWorld {
	b.Helper()
	ctx := context.Background()
	w := &burstWorld{e: e, name: "burst-" + randomSuffix(), counter: NewCounter()}
	image, err := emulator.Image(ctx, e.ec2)
	if err != nil {
		b.Fatal(err)
	}
	ltID, err := emulator.CreateLaunchTemplate(ctx, e.ec2, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(w.name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: aws.String(protocol.TagPool), Value: aws.String(w.name)},
		}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	subnets, err := emulator.DefaultSubnets(ctx, e.ec2, 1)
	if err != nil {
		b.Fatal(err)
	}
	classes := map[string]protocol.ResourceClass{}
	for _, c := range s.classes {
		classes[c.name] = c.class
	}
	mgr := e.manager()
	st, err := mgr.Create(ctx, pool.Spec{
		Name: w.name, ResourceClasses: classes, IdleTimeout: burstIdle, MaxRuntime: poolRuntime,
		Fleet: &protocol.FleetConfig{
			LaunchTemplateID: ltID, LaunchTemplateVersion: "$Default",
			SubnetIDs: subnets, InstanceSelection: protocol.SelectionExplicit,
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	w.sim = agentsim.New(agentsim.Clients{DynamoDB: e.db, EC2: e.ec2, SQS: e.sqs}, w.name, agentsim.Options{
		HeartbeatInterval: 5 * time.Second, WaitInterval: burstAgentPoll, PollInterval: 5 * time.Second, SelfCheckInterval: time.Minute,
		FleetWatchInterval: burstFleetWatch,
	})
	b.Cleanup(func() {
		w.sim.Stop()
		ctx := context.Background()
		_ = mgr.Delete(ctx, w.name, true)
		_, _ = e.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(ltID)})
	})
	w.sim.WatchFleet(ctx, nil)
	for _, g := range s.hot {
		c := classes[g.class]
		if _, err := w.sim.SeedIdle(ctx, g.n, agentsim.SeedSpec{
			ResourceClass: g.class, InstanceType: g.instanceType, CPU: c.CPU, MemoryMiB: c.MemoryMiB,
			IdleTimeout: burstIdle, QueueURL: st.QueueURLs[g.class],
		}); err != nil {
			b.Fatal(err)
		}
	}
	if w.proxy, err = faultproxy.New(e.endpoint, 27); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.proxy.Close)
	w.proxy.SetRealism(faultproxy.WholeRealism())
	cfg := w.counter.Attach(e.cfg)
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(w.proxy.URL) })
	queues := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(w.proxy.URL) })
	w.claimer = &claim.Claimer{
		DynamoDB: db, SQS: queues,
		EC2:          ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(w.proxy.URL) }),
		ReapInterval: -1,
	}
	w.seeds = &BaselineClaimer{DynamoDB: db, SQS: queues, PollInterval: burstClaimPoll, RegistrationWait: 60 * time.Second, HeartbeatMaxAge: claim.DefaultTimings().HeartbeatMaxAge}
	w.cfg = st.Config
	return w
}

// burstOutcome is what one claim of a burst (or a lone claim) did.
type burstOutcome struct {
	req     claim.Request
	res     *claim.Result
	err     error
	elapsed time.Duration
	log     []string // what the claim logged, with the time since it began
}

// claimAll starts every request at once and waits for all of them.
func (w *burstWorld) claimAll(reqs []claim.Request) []burstOutcome {
	return claimTogether(w.claimer, reqs, w.queueState)
}

// startTogether starts run(0) ... run(n-1) at once and waits for all.
func startTogether(n int, run func(i int) burstOutcome) []burstOutcome {
	out := make([]burstOutcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = run(i)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// claimTogether makes claims of every request with claimer, started at
// once, each logging what it does. queueState, if set, tells what a
// class's queue held (read uncounted) when a claim found it empty.
func claimTogether(claimer *claim.Claimer, reqs []claim.Request, queueState func(class string) string) []burstOutcome {
	return startTogether(len(reqs), func(i int) burstOutcome {
		req := reqs[i]
		began := time.Now()
		var (
			mu  sync.Mutex
			log []string
		)
		c := *claimer
		c.Log = func(msg string, kv ...any) {
			if msg == "pickup: queue empty" && queueState != nil {
				// What a claim that launches missed.
				kv = append(kv, "queue", queueState(req.ResourceClass))
			}
			mu.Lock()
			defer mu.Unlock()
			log = append(log, fmt.Sprintf("%6d ms %s %v", time.Since(began).Milliseconds(), msg, kv))
		}
		res, err := c.Create(context.Background(), req)
		elapsed := time.Since(began)
		mu.Lock()
		defer mu.Unlock()
		return burstOutcome{req: req, res: res, err: err, elapsed: elapsed, log: log}
	})
}

// queueState is SQS's approximate count of a class's messages, visible, in
// flight and delayed.
func (w *burstWorld) queueState(class string) string {
	ctx := context.Background()
	url, err := w.e.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(protocol.QueueName(w.name, class))})
	if err != nil {
		return err.Error()
	}
	out, err := w.e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"All"}})
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("visible=%s in_flight=%s delayed=%s", out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesNotVisible"], out.Attributes["ApproximateNumberOfMessagesDelayed"])
}

// releaseAll gives back every successful claim (untimed), a few at a time,
// and waits until the agents of the runners given back confirmed.
func (w *burstWorld) releaseAll(b *testing.B, outcomes []burstOutcome) {
	b.Helper()
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 25)
		mu   sync.Mutex
		errs []error
	)
	for _, o := range outcomes {
		if o.err != nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := w.e.claimer(nil).Release(context.Background(), w.name, o.req.RunID); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("releasing %s: %w", o.req.RunID, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		b.Fatal(joinErrs(errs))
	}
}

func joinErrs(errs []error) string {
	parts := make([]string, len(errs))
	for i, err := range errs {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "\n")
}

// audit checks the pool's invariants (every runner idle with one message,
// or held by exactly one claim; no instance untracked) and returns the
// violations found.
func (w *burstWorld) audit(b *testing.B, when string) []string {
	b.Helper()
	rep, err := audit.Pool(context.Background(), audit.Clients{DynamoDB: w.e.db, SQS: w.e.sqs, EC2: w.e.ec2}, w.name)
	if err != nil {
		b.Fatalf("audit %s: %v", when, err)
	}
	b.Logf("audit %s: %s", when, rep)
	return rep.Violations
}

// probeEmulator reads the pool's table description every 250 ms until
// stop is closed, and returns the median time a read took: how long the
// emulator keeps one cheap call waiting while it serves everything else.
func (w *burstWorld) probeEmulator(stop <-chan struct{}) (median func() time.Duration) {
	var (
		mu    sync.Mutex
		times []time.Duration
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			began := time.Now()
			if _, err := w.e.db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(w.name)}); err == nil {
				mu.Lock()
				times = append(times, time.Since(began))
				mu.Unlock()
			}
		}
	}()
	return func() time.Duration {
		<-done
		slices.Sort(times)
		return percentile(times, 50)
	}
}

// burstFigures summarize a burst.
type burstFigures struct {
	claims, warm, launched, failed int
	violations                     int // the pool's invariants broken, after the burst and after the releases
	p50, p95, lone                 time.Duration
	loneCalls                      float64 // calls of a lone claim (the mean of the lone claims)
	// The emulator's median answer to one cheap call during the lone
	// claims and during the burst.
	probeLone, probeBurst time.Duration
	calls                 Calls
	pickup                claim.PickupStats
	proxy                 faultproxy.Stats
}

func (f burstFigures) ratio() float64 { return f.p95.Seconds() / f.lone.Seconds() }

func (f burstFigures) callsPerClaim() float64 {
	return float64(f.calls.Total()) / float64(max(1, f.claims))
}

// callsRatio is calls per claim of the burst over a lone claim's.
func (f burstFigures) callsRatio() float64 { return f.callsPerClaim() / f.loneCalls }

func (f burstFigures) met() (bool, []string) {
	var missed []string
	if warmNeed := f.claims - f.claims/50; f.warm < warmNeed {
		missed = append(missed, fmt.Sprintf("%d warm", f.warm))
	}
	if f.launched > f.claims/50 {
		missed = append(missed, fmt.Sprintf("%d launched", f.launched))
	}
	if f.failed > 0 {
		missed = append(missed, fmt.Sprintf("%d failed", f.failed))
	}
	if f.violations > 0 {
		missed = append(missed, fmt.Sprintf("%d audit violations", f.violations))
	}
	if f.ratio() > 2 {
		missed = append(missed, fmt.Sprintf("p95 ×%.1f lone", f.ratio()))
	}
	if f.callsRatio() > 1.5 {
		missed = append(missed, fmt.Sprintf("calls ×%.1f lone", f.callsRatio()))
	}
	return len(missed) == 0, missed
}

func summarize(outcomes []burstOutcome) (f burstFigures, times []time.Duration) {
	f.claims = len(outcomes)
	for _, o := range outcomes {
		times = append(times, o.elapsed)
		if o.err != nil {
			f.failed++
			continue
		}
		f.warm += o.res.Reused
		f.launched += o.res.Created + o.res.Started
		p := o.res.Pickup
		f.pickup.Received += p.Received
		f.pickup.Accepted += p.Accepted
		f.pickup.Requeued += p.Requeued
		f.pickup.Returned += p.Returned
		f.pickup.Discarded += p.Discarded
		f.pickup.InFlightWaits += p.InFlightWaits
	}
	slices.Sort(times)
	f.p50, f.p95 = percentile(times, 50), percentile(times, 95)
	return f, times
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(float64(p)/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// burstSize is the number of claims, and of hot runners, of a burst
// (-burst-size: a smaller one to try a change quickly).
var burstSize = flag.Int("burst-size", 100, "BenchmarkBurst: claims, and hot runners, of a burst")

// BenchmarkBurst: 100 claims of one runner started together, against 100
// hot runners, through the realism layer: warm, launched, p50 and p95 claim
// time, calls per claim, and the p95's ratio to a lone claim's time, for
// scenario A (one class) and B (two classes, mismatched types).
func BenchmarkBurst(b *testing.B) {
	for _, s := range burstScenarios(*burstSize) {
		b.Run(s.name, func(b *testing.B) {
			e := getEnv(b)
			var last, seeds burstFigures
			for range b.N {
				b.StopTimer()
				last, seeds = runBurst(b, e, s)
				b.StartTimer()
			}
			reportBurst(b, motoSection, s, last, &seeds)
		})
	}
	summary.note(fmt.Sprintf("Bursts: %d claims of one runner (claim.Claimer, ReapInterval = -1, fleet_fallback on) started together against a pool of as many hot runners, "+
		"all through internal/testworld/faultproxy with WholeRealism (sampled receives, every message delivered twice, visibility cut to 3 s, superseded receipt handles, DynamoDB conflicts, EC2 lag); "+
		"simulated agents poll their record every %s while idle and heartbeat every 5 s; claims read their runners' signals every %s (the emulator cannot serve 100 agents or claims at the defaults' 250 ms). "+
		"Lone: the median of %d claims of one runner, one at a time, in the same pool just before. "+
		"The seeds' algorithm (baseline.go) runs its lone claims (on runners seeded for them) and its burst in the same pool once ours gave every runner back; a seeds' claim that finds its queue exhausted counts as launched. "+
		"two-classes-mismatched: classes large (c6i.large, m6i.large) and xlarge (c6i.xlarge, r6i.xlarge), a quarter of the runners each; a quarter of the claims allow each family of each class (c*, m*; c*, r*).",
		*burstSize, burstAgentPoll, burstClaimPoll, burstLoneClaims))
}

// runBurst runs one burst of scenario s in a fresh pool: the lone claims
// first, then the burst, then the releases and an audit (untimed); then
// the seeds' algorithm's lone claims and burst in the same pool (runBurstSeeds).
func runBurst(b *testing.B, e *env, s burstScenario) (ours, seeds burstFigures) {
	b.Helper()
	w := newBurstWorld(b, e, s)
	// Lone claims, one at a time, each given back before the next.
	var lone []time.Duration
	first := s.claims[0]
	stopProbe := make(chan struct{})
	probe := w.probeEmulator(stopProbe)
	loneBefore := w.counter.Snapshot()
	for i := range burstLoneClaims {
		req := burstRequest(w.name, first.class, first.allowed, fmt.Sprintf("lone-%s-%d", randomSuffix(), i))
		o := w.claimAll([]claim.Request{req})[0]
		if o.err != nil {
			b.Fatalf("lone claim: %v", o.err)
		}
		if o.res.Reused != 1 {
			b.Fatalf("lone claim: reused %d, created %d: the pool did not serve it", o.res.Reused, o.res.Created)
		}
		lone = append(lone, o.elapsed)
		w.releaseAll(b, []burstOutcome{o})
	}
	loneCalls := w.counter.Snapshot().Sub(loneBefore)
	close(stopProbe)
	probeLone := probe()
	slices.Sort(lone)
	// The lone claims' messages are back once their releases returned;
	// make sure nothing of theirs is still in flight before the burst.
	if v := w.audit(b, "before the burst"); len(v) > 0 {
		b.Fatalf("the pool is not at rest before the burst: %d violations", len(v))
	}
	before := w.counter.Snapshot()
	proxyBefore := w.proxy.Stats()
	stopProbe = make(chan struct{})
	probe = w.probeEmulator(stopProbe)
	outcomes := w.claimAll(s.requests(w.name))
	close(stopProbe)
	f, _ := summarize(outcomes)
	f.lone = percentile(lone, 50)
	f.loneCalls = float64(loneCalls.Total()) / burstLoneClaims
	f.probeLone, f.probeBurst = probeLone, probe()
	f.calls = w.counter.Snapshot().Sub(before)
	proxyAfter := w.proxy.Stats()
	f.proxy = faultproxy.Stats{
		Redelivered: proxyAfter.Redelivered - proxyBefore.Redelivered, Sampled: proxyAfter.Sampled - proxyBefore.Sampled,
		StaleHandles: proxyAfter.StaleHandles - proxyBefore.StaleHandles, VisibilityCut: proxyAfter.VisibilityCut - proxyBefore.VisibilityCut,
		WriteConflicts: proxyAfter.WriteConflicts - proxyBefore.WriteConflicts,
	}
	logUnserved(b, outcomes)
	f.violations = len(w.audit(b, "after the burst"))
	w.releaseAll(b, outcomes)
	f.violations += len(w.audit(b, "after the releases"))
	return f, runBurstSeeds(b, w, s)
}

// runBurstSeeds runs the seeds' algorithm's lone claims and then its burst
// of scenario s in w's pool, after ours gave every runner back. The seeds
// hand nothing back, so the lone claims take runners seeded for them.
func runBurstSeeds(b *testing.B, w *burstWorld, s burstScenario) burstFigures {
	b.Helper()
	ctx := context.Background()
	first, hot := s.claims[0], s.hot[0]
	c := w.cfg.ResourceClasses[hot.class]
	if _, err := w.sim.SeedIdle(ctx, burstLoneClaims, agentsim.SeedSpec{
		ResourceClass: hot.class, InstanceType: hot.instanceType, CPU: c.CPU, MemoryMiB: c.MemoryMiB,
		IdleTimeout: burstIdle, QueueURL: w.cfg.QueueURLs[hot.class],
	}); err != nil {
		b.Fatal(err)
	}
	var lone []time.Duration
	loneBefore := w.counter.Snapshot()
	for i := range burstLoneClaims {
		o := seedsTogether(w.seeds, w.cfg, []claim.Request{burstRequest(w.name, first.class, first.allowed, fmt.Sprintf("seeds-lone-%s-%d", randomSuffix(), i))})[0]
		if o.err != nil {
			b.Fatalf("seeds' lone claim: %v", o.err)
		}
		if o.res.Reused != 1 {
			// An empty receive ends the seeds' search: through the realism
			// layer a sampled receive can be empty while runners wait. Its
			// time is not a claim's: the median is of the claims served.
			b.Logf("seeds' lone claim %d found its queue exhausted and would launch, in %s", i, o.elapsed.Round(time.Millisecond))
			continue
		}
		lone = append(lone, o.elapsed)
	}
	loneCalls := w.counter.Snapshot().Sub(loneBefore)
	slices.Sort(lone)
	before := w.counter.Snapshot()
	outcomes := seedsTogether(w.seeds, w.cfg, s.requests(w.name))
	f, _ := summarize(outcomes)
	f.lone = percentile(lone, 50)
	f.loneCalls = float64(loneCalls.Total()) / burstLoneClaims
	f.calls = w.counter.Snapshot().Sub(before)
	f.violations = sharedRunners(outcomes)
	return f
}

// logUnserved logs the first three claims a burst did not serve warm, with
// what they logged.
func logUnserved(b *testing.B, outcomes []burstOutcome) {
	b.Helper()
	shown := 0
	for _, o := range outcomes {
		if (o.err != nil || o.res.Reused == 0) && shown < 3 {
			shown++
			b.Logf("claim %s (%s %v) not served warm (%v, error %v) in %s; its log:\n%s", o.req.RunID, o.req.ResourceClass, o.req.AllowedTypes,
				o.res != nil, o.err, o.elapsed.Round(time.Millisecond), strings.Join(o.log, "\n"))
		}
	}
}

const motoSection = "4. Bursts on the emulator (moto: one core answers every call, in turn; through the realism layer)"

// reportBurst reports a burst's figures, and seeds', the seeds' algorithm's
// in the same scenario, when it ran.
func reportBurst(b *testing.B, section string, s burstScenario, f burstFigures, seeds *burstFigures) {
	b.ReportMetric(float64(f.warm), "warm")
	b.ReportMetric(float64(f.launched), "launched")
	b.ReportMetric(float64(f.failed), "failed")
	b.ReportMetric(float64(f.violations), "violations")
	b.ReportMetric(f.p50.Seconds(), "p50-s")
	b.ReportMetric(f.p95.Seconds(), "p95-s")
	b.ReportMetric(f.lone.Seconds(), "lone-s")
	b.ReportMetric(f.ratio(), "p95/lone")
	b.ReportMetric(f.callsPerClaim(), "calls/claim")
	b.ReportMetric(f.callsRatio(), "calls/lone-calls")
	b.Logf("%s: %d claims: %d warm, %d launched, %d failed; p50 %s, p95 %s, lone %s (p95 ×%.2f); %.1f calls/claim (lone %.1f): %s",
		s.name, f.claims, f.warm, f.launched, f.failed, f.p50.Round(time.Millisecond), f.p95.Round(time.Millisecond), f.lone.Round(time.Millisecond),
		f.ratio(), f.callsPerClaim(), f.loneCalls, f.calls.Per(float64(f.claims)))
	if f.probeBurst > 0 {
		b.ReportMetric(f.probeLone.Seconds()*1000, "emulator-lone-ms")
		b.ReportMetric(f.probeBurst.Seconds()*1000, "emulator-burst-ms")
		b.Logf("the emulator's median answer to one cheap call: %s during the lone claims, %s during the burst",
			f.probeLone.Round(time.Millisecond), f.probeBurst.Round(time.Millisecond))
		b.Logf("realism: %d messages delivered twice, %d held back by sampling, %d receives' visibility cut, %d superseded handles used, %d DynamoDB conflicts",
			f.proxy.Redelivered, f.proxy.Sampled, f.proxy.VisibilityCut, f.proxy.StaleHandles, f.proxy.WriteConflicts)
	}
	b.Logf("pickup (claims that succeeded): %+v", f.pickup)
	baseline := fmt.Sprintf("lone claim %s, %.1f calls", f.lone.Round(time.Millisecond), f.loneCalls)
	if seeds != nil {
		b.ReportMetric(float64(seeds.warm), "seeds-warm")
		b.ReportMetric(float64(seeds.launched), "seeds-launched")
		b.ReportMetric(seeds.p95.Seconds(), "seeds-p95-s")
		b.ReportMetric(seeds.callsPerClaim(), "seeds-calls/claim")
		b.Logf("seeds' algorithm: %d warm, %d launched, %d failed; p50 %s, p95 %s, lone %s (p95 ×%.2f); %.1f calls/claim (lone %.1f): %s",
			seeds.warm, seeds.launched, seeds.failed, seeds.p50.Round(time.Millisecond), seeds.p95.Round(time.Millisecond), seeds.lone.Round(time.Millisecond),
			seeds.ratio(), seeds.callsPerClaim(), seeds.loneCalls, seeds.calls.Per(float64(seeds.claims)))
		baseline = "seeds: " + seeds.describe()
		summary.addBreakdown(fmt.Sprintf("%s burst %s, %d claims (seeds' algorithm): per claim: %s", section[:1], s.name, seeds.claims, seeds.calls.Per(float64(seeds.claims))))
	}
	ok, missed := f.met()
	met := yesNo(ok)
	if !ok {
		met += " (" + strings.Join(missed, ", ") + ")"
	}
	summary.add(summaryRow{
		Section:  section,
		Scenario: fmt.Sprintf("%s: %d claims, %d hot", s.name, f.claims, f.claims),
		Ours:     f.describe(),
		Baseline: baseline,
		Ratio:    fmt.Sprintf("p95 ×%.2f lone, calls ×%.2f lone", f.ratio(), f.callsRatio()),
		Target:   fmt.Sprintf("≥%d warm, ≤%d launched, p95 ≤2× lone, calls ≤1.5× lone", f.claims-f.claims/50, f.claims/50),
		Met:      met,
	})
	summary.addBreakdown(fmt.Sprintf("%s burst %s, %d claims: per claim: %s", section[:1], s.name, f.claims, f.calls.Per(float64(f.claims))))
}

// describe sums a burst up for the summary table.
func (f burstFigures) describe() string {
	return fmt.Sprintf("%d warm, %d launched, %d failed; p50 %s, p95 %s (lone %s); %.1f calls/claim (lone %.1f)", f.warm, f.launched, f.failed,
		f.p50.Round(time.Millisecond), f.p95.Round(time.Millisecond), f.lone.Round(time.Millisecond), f.callsPerClaim(), f.loneCalls)
}
