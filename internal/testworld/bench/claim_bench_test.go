package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

// Claim latency and release: whole claims of warm runners through
// claim.Claimer (ours) and BaselineClaimer (the seeds), in pools holding
// exactly the runners claimed, whose simulated agents answer at once.

// Agents poll for a run id every agentWait (and while registered, for its
// end), so they register within about that; the claim's own poll interval
// is claimPoll, the same for the baseline. Heartbeats every 5 s keep the
// emulator's load down (the first one is written when a runner is seeded).
const (
	agentWait     = 250 * time.Millisecond
	claimPoll     = 100 * time.Millisecond
	poolIdle      = 7 * time.Minute
	poolRuntime   = 30 * time.Minute
	releaseSettle = 30 * time.Second
)

var claimAllowed = []string{"c*", "m*", "r*"}

// warmPool is a pool in the emulator with n idle runners and their agents.
type warmPool struct {
	name      string
	queueURL  string
	arnPrefix string // of its runners: where their agents write
	ids       []string
	sim       *agentsim.Sim
	// dropRaw: clean up by deleting the table and queue directly (a
	// table of thousands of records would take pool.Manager.Delete long).
	dropRaw bool
}

// newWarmPool makes the pool; owner (a parent benchmark) cleans it up.
func newWarmPool(b, owner *testing.B, e *env, n int) *warmPool {
	b.Helper()
	ctx := context.Background()
	name := "bench-" + randomSuffix()
	mgr := e.manager()
	st, err := mgr.Create(ctx, pool.Spec{
		Name: name, ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}},
		IdleTimeout: poolIdle, MaxRuntime: poolRuntime,
	})
	if err != nil {
		b.Fatal(err)
	}
	p := &warmPool{name: name, queueURL: st.QueueURLs["large"], arnPrefix: st.Config.InstanceARNPrefix}
	p.sim = agentsim.New(agentsim.Clients{DynamoDB: e.db, EC2: e.ec2, SQS: e.sqs}, name, agentsim.Options{
		HeartbeatInterval: 5 * time.Second, WaitInterval: agentWait, PollInterval: agentWait, SelfCheckInterval: time.Minute,
	})
	owner.Cleanup(func() {
		p.sim.Stop()
		ctx := context.Background()
		if !p.dropRaw {
			_ = mgr.Delete(ctx, name, true)
			return
		}
		_, _ = e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: p.ids})
		_, _ = e.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(p.queueURL)})
		_, _ = e.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	p.ids, err = p.sim.SeedIdle(ctx, n, agentsim.SeedSpec{ResourceClass: "large", QueueURL: p.queueURL})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// claimer returns our claimer on clients counted by c (nil: uncounted),
// without the opportunistic reaping (its cost is not the claim's).
func (e *env) claimer(c *Counter) *claim.Claimer {
	db, q, ec := e.db, e.sqs, e.ec2
	if c != nil {
		db, q, ec = e.counted(c)
	}
	return &claim.Claimer{DynamoDB: db, SQS: q, EC2: ec, ReapInterval: -1}
}

func (p *warmPool) request(n int) claim.Request {
	t := claim.DefaultTimings()
	t.PollInterval = claimPoll
	return claim.Request{
		Pool: p.name, RunID: "bench-" + randomSuffix(), InstanceCount: n,
		ResourceClass: "large", UsageClass: protocol.UsageOnDemand, AllowedTypes: claimAllowed,
		FleetFallback: false, Timings: t,
	}
}

// baselineRelease gives a baseline claim's runners back as the seeds'
// release would, untimed: running -> idle, wait for the agents to confirm,
// messages back to the queue.
func (p *warmPool) baselineRelease(b *testing.B, e *env, runID string, ids []string) {
	b.Helper()
	ctx := context.Background()
	now := time.Now()
	threshold := protocol.FormatTime(now.Add(poolIdle))
	for _, id := range ids {
		_, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           aws.String(p.name),
			Key:                 protocol.Key(protocol.TypeInstance, id),
			UpdateExpression:    aws.String("SET #state = :idle, #runId = :none, #threshold = :threshold, #updatedAt = :now"),
			ConditionExpression: aws.String("#state = :running AND #runId = :run"),
			ExpressionAttributeNames: map[string]string{
				"#state": protocol.AttrState, "#runId": protocol.AttrRunID, "#threshold": protocol.AttrThreshold, "#updatedAt": protocol.AttrUpdatedAt,
			},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":idle": &ddbtypes.AttributeValueMemberS{Value: protocol.StateIdle}, ":none": &ddbtypes.AttributeValueMemberS{Value: ""},
				":running": &ddbtypes.AttributeValueMemberS{Value: protocol.StateRunning}, ":run": &ddbtypes.AttributeValueMemberS{Value: runID},
				":threshold": &ddbtypes.AttributeValueMemberS{Value: threshold}, ":now": &ddbtypes.AttributeValueMemberS{Value: protocol.FormatTime(now)},
			},
		})
		if err != nil {
			b.Fatalf("releasing %s: %v", id, err)
		}
	}
	deadline := time.Now().Add(releaseSettle)
	for _, id := range ids {
		for !slices.Contains(p.sim.Releases(id), runID) {
			if time.Now().After(deadline) {
				b.Fatalf("agent of %s did not confirm the release of %s", id, runID)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	bodies := make([]string, len(ids))
	for i, id := range ids {
		bodies[i] = protocol.Message{
			ID: id, ResourceClass: "large", InstanceType: agentsim.DefaultSeedInstanceType, CPU: 2, MemoryMiB: 4096,
			UsageClass: protocol.UsageOnDemand, Threshold: threshold,
		}.Body()
	}
	if err := sendBodies(ctx, e.sqs, p.queueURL, bodies); err != nil {
		b.Fatal(err)
	}
}

// claimRun is what the rounds of one claim scenario measured.
type claimRun struct {
	rounds  int
	runners int
	calls   Calls
	elapsed time.Duration
}

func (r claimRun) perRunner() float64 { return float64(r.calls.Total()) / float64(r.runners) }
func (r claimRun) perRound() time.Duration {
	return r.elapsed / time.Duration(max(1, r.rounds))
}

func (r claimRun) describe() string {
	return fmt.Sprintf("%.2f calls/runner, %s", r.perRunner(), r.perRound().Round(time.Millisecond))
}

func (r *claimRun) add(n int, calls Calls, d time.Duration) {
	r.rounds++
	r.runners += n
	r.calls = r.calls.Add(calls)
	r.elapsed += d
}

func (r claimRun) report(b *testing.B) {
	b.ReportMetric(r.perRunner(), "calls/runner")
	b.ReportMetric(float64(r.calls.Total())/float64(r.rounds), "calls/op")
	b.ReportMetric(float64(r.perRound().Milliseconds())/float64(r.runners/r.rounds), "ms/runner")
	b.Logf("calls per runner: %s (HTTP attempts %d for %d calls)", r.calls.Per(float64(r.runners)), r.calls.Attempts, r.calls.Total())
}

var claimSizes = []int{1, 10, 50}

// Agent modes of the claim benchmarks.
const (
	// instant: every agent's answer is in the table before the control
	// plane looks for it (UD_REG_OK for the run written just before
	// Create, the release confirmation just before Release), so the time
	// and calls measured are the control plane's own. The simulated agents
	// still run, heartbeat and follow the protocol.
	agentsInstant = "instant"
	// polling: the simulated agents answer as soon as their next poll
	// (every agentWait) sees the change: end-to-end latency.
	agentsPolling = "polling"
)

// BenchmarkClaim: Create of 1, 10 and 50 warm runners (the seeds'
// selection first, then ours, in the same pool), and Release of ours, with
// agents that answer instantly and with polling agents.
func BenchmarkClaim(b *testing.B) {
	for _, n := range claimSizes {
		b.Run(fmt.Sprintf("runners=%d", n), func(b *testing.B) {
			parent := b
			var (
				once  sync.Once
				p     *warmPool
				setup = func(b *testing.B) (*env, *warmPool) {
					e := getEnv(b)
					once.Do(func() { p = newWarmPool(b, parent, e, n) })
					if p == nil {
						b.Fatal("no pool")
					}
					return e, p
				}
			)
			for _, mode := range []string{agentsInstant, agentsPolling} {
				var base, ours claimRun
				b.Run("agents="+mode+"/create/baseline", func(b *testing.B) {
					e, p := setup(b)
					base = claimRun{}
					benchBaselineCreate(b, e, p, n, mode, &base)
				})
				b.Run("agents="+mode+"/create/ours", func(b *testing.B) {
					e, p := setup(b)
					ours = claimRun{}
					benchCreate(b, e, p, n, mode, &ours)
					reportCreate(b, n, mode, base, ours)
				})
				b.Run("agents="+mode+"/release/ours", func(b *testing.B) {
					e, p := setup(b)
					var rel claimRun
					benchRelease(b, e, p, n, mode, &rel)
					summary.add(summaryRow{
						Section:  "3. Release of ours (no baseline: the seeds do not describe their release's calls)",
						Scenario: fmt.Sprintf("%d runner(s), agents %s", n, mode),
						Ours:     rel.describe(),
					})
					summary.addBreakdown(fmt.Sprintf("3. release %d runner(s), agents %s: per runner: %s", n, mode, rel.calls.Per(float64(rel.runners))))
				})
			}
		})
	}
	summary.note(fmt.Sprintf("Claims: claim.Claimer with ReapInterval = -1 (no opportunistic reaping, whose cost is not the claim's). "+
		"Simulated agents (internal/testworld/agentsim) poll their record every %s and heartbeat every 5 s; both control planes poll agent signals every %s. "+
		"agents=instant: each agent's answer (UD_REG_OK for the run; the release confirmation) is written just before the control plane starts, so the figures are the control plane's own; "+
		"agents=polling: the agents answer at their next poll. Each pool holds exactly the runners claimed; times are per claim.", agentWait, claimPoll))
}

func reportCreate(b *testing.B, n int, mode string, base, ours claimRun) {
	row := summaryRow{
		Section:  "2. Claim latency (whole Create of warm runners: claim record, pickup, claims, checks, running)",
		Scenario: fmt.Sprintf("%d runner(s), agents %s", n, mode),
		Ours:     ours.describe(),
	}
	if base.rounds > 0 {
		ratio := ours.perRound().Seconds() / base.perRound().Seconds()
		b.ReportMetric(ratio, "time-ratio-vs-baseline")
		row.Baseline = base.describe()
		row.Ratio = fmt.Sprintf("time ×%.2f, calls ×%.2f", ratio, ours.perRunner()/base.perRunner())
		if n == 10 && mode == agentsInstant {
			row.Target = "≤3 calls/runner, ≤0.5× baseline time"
			var missed []string
			if ours.perRunner() > 3 {
				missed = append(missed, fmt.Sprintf("%.2f calls/runner", ours.perRunner()))
			}
			if ratio > 0.5 {
				missed = append(missed, fmt.Sprintf("time ×%.2f", ratio))
			}
			row.Met = yesNo(len(missed) == 0)
			if len(missed) > 0 {
				row.Met += " (" + strings.Join(missed, ", ") + ")"
			}
		}
		summary.addBreakdown(fmt.Sprintf("2. create %d runner(s), agents %s, BASELINE: per runner: %s", n, mode, base.calls.Per(float64(base.runners))))
	}
	summary.add(row)
	summary.addBreakdown(fmt.Sprintf("2. create %d runner(s), agents %s: per runner: %s", n, mode, ours.calls.Per(float64(ours.runners))))
}

// writeSignals writes a worker signal for each runner, as its agent would.
func (p *warmPool) writeSignals(b *testing.B, e *env, state, runID string, ids []string) {
	b.Helper()
	now := protocol.FormatTime(time.Now())
	for _, id := range ids {
		_, err := e.db.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(p.name),
			Item:      protocol.Signal{InstanceARN: protocol.InstanceARN(p.arnPrefix, id), State: state, RunID: runID, UpdatedAt: now}.Item(),
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// waitAgents waits until every agent of ids has registered for (or, with
// released, confirmed the release of) runID: their own answers, not ours.
func (p *warmPool) waitAgents(b *testing.B, runID string, ids []string, released bool) {
	b.Helper()
	deadline := time.Now().Add(releaseSettle)
	for _, id := range ids {
		for {
			got := p.sim.Registrations(id)
			if released {
				got = p.sim.Releases(id)
			}
			if slices.Contains(got, runID) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("the agent of %s did not answer for run %s (released %t)", id, runID, released)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func benchBaselineCreate(b *testing.B, e *env, p *warmPool, n int, mode string, r *claimRun) {
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		counter := NewCounter()
		cdb, csqs, _ := e.counted(counter)
		bc := &BaselineClaimer{DynamoDB: cdb, SQS: csqs, PollInterval: claimPoll, RegistrationWait: 10 * time.Second, HeartbeatMaxAge: 15 * time.Second}
		req := BaselineRequest{
			Table: p.name, InstanceARNPrefix: p.arnPrefix, QueueURL: p.queueURL, RunID: "bench-" + randomSuffix(), Count: n, MaxRuntime: poolRuntime,
			Wants: claim.Wants{ResourceClass: "large", Class: protocol.ResourceClass{CPU: 2, MemoryMiB: 4096}, AllowedTypes: claimAllowed, UsageClass: protocol.UsageOnDemand},
		}
		if mode == agentsInstant {
			p.writeSignals(b, e, protocol.SignalRegistered, req.RunID, p.ids)
		}
		b.StartTimer()
		start := time.Now()
		ids, err := bc.Claim(ctx, req)
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if len(ids) != n {
			b.Fatalf("baseline claimed %d runners, want %d", len(ids), n)
		}
		r.add(n, counter.Snapshot(), elapsed)
		p.waitAgents(b, req.RunID, ids, false)
		p.baselineRelease(b, e, req.RunID, ids)
		b.StartTimer()
	}
	b.StopTimer()
	r.report(b)
}

func benchCreate(b *testing.B, e *env, p *warmPool, n int, mode string, r *claimRun) {
	ctx := context.Background()
	cleanup := e.claimer(nil)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		counter := NewCounter()
		c := e.claimer(counter)
		req := p.request(n)
		if mode == agentsInstant {
			p.writeSignals(b, e, protocol.SignalRegistered, req.RunID, p.ids)
		}
		b.StartTimer()
		start := time.Now()
		res, err := c.Create(ctx, req)
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if res.Reused != n {
			b.Fatalf("reused %d runners, want %d", res.Reused, n)
		}
		r.add(n, counter.Snapshot(), elapsed)
		p.waitAgents(b, req.RunID, instanceIDsOf(res.Instances), false)
		if _, err := cleanup.Release(ctx, p.name, req.RunID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	r.report(b)
}

func benchRelease(b *testing.B, e *env, p *warmPool, n int, mode string, r *claimRun) {
	ctx := context.Background()
	setup := e.claimer(nil)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		req := p.request(n)
		res, err := setup.Create(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		ids := instanceIDsOf(res.Instances)
		p.waitAgents(b, req.RunID, ids, false)
		if mode == agentsInstant {
			p.writeSignals(b, e, protocol.SignalReleased, req.RunID, ids)
		}
		counter := NewCounter()
		c := e.claimer(counter)
		b.StartTimer()
		start := time.Now()
		outcomes, err := c.Release(ctx, p.name, req.RunID)
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		released := 0
		for _, o := range outcomes {
			if strings.HasSuffix(o, "released to the pool") {
				released++
			}
		}
		if released != n {
			b.Fatalf("released %d runners, want %d: %v", released, n, outcomes)
		}
		r.add(n, counter.Snapshot(), elapsed)
		p.waitAgents(b, req.RunID, ids, true)
		b.StartTimer()
	}
	b.StopTimer()
	r.report(b)
}

func instanceIDsOf(insts []claim.Instance) []string {
	ids := make([]string, len(insts))
	for i, inst := range insts {
		ids[i] = inst.ID
	}
	return ids
}
