package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

func (w *world) claimer() *claim.Claimer {
	return &claim.Claimer{DynamoDB: w.faulty.DynamoDB, SQS: w.faulty.SQS, EC2: w.faulty.EC2, Log: func(msg string, kv ...any) {
		if msg == "claim: runner failed its checks" {
			w.judgedUnhealthy.Add(1)
		}
		w.t.Log(append([]any{msg}, kv...)...)
	}}
}

// create and release make and give back a claim as the claim resource
// does: with the pool's maintenance alongside (maintenance.Alongside).
func create(ctx context.Context, c *claim.Claimer, req claim.Request) (*claim.Result, error) {
	defer maintenance.Alongside(ctx, c, req.Pool)()
	return c.Create(ctx, req)
}

func release(ctx context.Context, c *claim.Claimer, poolName, runID string) ([]string, error) {
	defer maintenance.Alongside(ctx, c, poolName)()
	return c.Release(ctx, poolName, runID)
}

func request(pool, runID string, n int) claim.Request {
	t := claim.DefaultTimings()
	t.FleetValidationWait = 60 * time.Second
	return claim.Request{Pool: pool, RunID: runID, InstanceCount: n, ResourceClass: "large", UsageClass: protocol.UsageOnDemand,
		AllowedTypes: []string{"*"}, FleetFallback: true, Timings: t}
}

// Claims (warm and from the fleet) and releases, one after the other,
// with about 10% of all AWS requests failing: every claim and release
// succeeds through retries, and the pool's invariants hold after each.
func TestFaults_claimsAndReleasesUnderTenPercent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "chaos-seq", 1)
	w.seed(3)
	w.proxy.SetRules(tenPercent...)
	c := w.claimer()
	ctx := context.Background()
	for round, n := range []int{2, 4, 3, 2} { // the 4 needs the fleet
		runID := fmt.Sprintf("run-%d", round)
		started := time.Now()
		res, err := create(ctx, c, request(w.pool, runID, n))
		if err != nil {
			t.Fatalf("claim %s: %v", runID, err)
		}
		t.Logf("claim %s: reused %d, created %d in %s", runID, res.Reused, res.Created, time.Since(started))
		if round == 0 {
			w.audit("after claim " + runID)
		}
		started = time.Now()
		if outcomes, err := release(ctx, c, w.pool, runID); err != nil {
			t.Fatalf("release %s: %v (%v)", runID, err, outcomes)
		}
		t.Logf("release %s in %s", runID, time.Since(started))
		w.audit("after release " + runID)
	}
	st := w.checkRealism()
	if st.TotalFaults(0) < 5 {
		t.Errorf("only %d faults injected: the scenario tested little", st.TotalFaults(0))
	}
}

// checkRealism logs the proxy's counts and fails the test if SQS's
// redeliveries, sampled receives and early visibility ends did not happen (the scenario then
// tested less than it says), or if a claim judged one of the healthy
// agents, whose clocks are a minute off the provider's, unhealthy.
func (w *world) checkRealism() faultproxy.Stats {
	st := w.proxy.Stats()
	w.t.Logf("faults: %s; SQS messages delivered twice: %d, held back by sampling: %d; receives whose visibility runs out early: %d; superseded receipt handles used: %d; DynamoDB writes refused for a transaction under way: %d; EC2 requests answered NotFound for a new instance: %d, new instances left out of DescribeInstances: %d",
		st, st.Redelivered, st.Sampled, st.VisibilityCut, st.StaleHandles, st.WriteConflicts, st.InstancesNotFound, st.InstancesHidden)
	if st.Redelivered == 0 || st.Sampled == 0 || st.VisibilityCut == 0 || len(st.RealismErrors) > 0 {
		w.t.Errorf("%d SQS messages delivered twice, %d held back by sampling, %d receives' visibility cut (errors: %v): the SQS realism did not work", st.Redelivered, st.Sampled, st.VisibilityCut, st.RealismErrors)
	}
	if n := w.judgedUnhealthy.Load(); n > 0 {
		w.t.Errorf("claims let go of %d healthy runner(s) as failing their checks (their agents' clocks are off the provider's)", n)
	}
	return st
}

// Concurrent claims competing for few warm runners, under faults: no
// runner is owned twice, every claim that succeeds holds what it asked
// for, one that fails leaves nothing behind, and after the releases the
// pool is whole.
func TestFaults_concurrentClaimsUnderTenPercent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "chaos-conc", 2)
	w.seed(3) // 6 wanted: some from the fleet
	w.proxy.SetRules(tenPercent...)
	c := w.claimer()
	ctx := context.Background()
	const claims = 3
	var wg sync.WaitGroup
	results := make([]*claim.Result, claims)
	errs := make([]error, claims)
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = create(ctx, c, request(w.pool, fmt.Sprintf("run-c%d", i), 2))
		}()
	}
	wg.Wait()
	// Racing claims under faults may fail (all or nothing: a failed claim
	// gives back what it took); what must hold is that no runner is owned
	// twice and that the pool is whole.
	owner := map[string]int{}
	succeeded := 0
	for i, res := range results {
		if errs[i] != nil {
			t.Logf("claim %d failed and rolled back: %v", i, errs[i])
			continue
		}
		succeeded++
		for _, inst := range res.Instances {
			if prev, taken := owner[inst.ID]; taken {
				t.Errorf("%s is held by claims %d and %d", inst.ID, prev, i)
			}
			owner[inst.ID] = i
		}
	}
	if succeeded == 0 {
		t.Fatal("no claim succeeded")
	}
	w.audit("after the concurrent claims")
	for i := range claims {
		if errs[i] != nil {
			continue
		}
		if outcomes, err := release(ctx, c, w.pool, fmt.Sprintf("run-c%d", i)); err != nil {
			t.Fatalf("release %d: %v (%v)", i, err, outcomes)
		}
	}
	w.audit("after the releases")
	w.checkRealism()
}
