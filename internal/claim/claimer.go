package claim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Protocol deadlines of the states a claim writes.
const (
	claimedLifetime = 5 * time.Minute  // idle -> claimed
	createdLifetime = 10 * time.Minute // (none) -> created
	expiredBy       = 5 * time.Minute  // expire: threshold this far in the past
	cleanupBudget   = 3 * time.Minute  // rollback after the caller's context ended
	// A pending claim record refreshed within leaseTimeout belongs to a
	// live attempt; older, to a crashed one.
	leaseTimeout  = 30 * time.Second
	leaseInterval = 10 * time.Second
	// selectMargin is kept free at the end of a claimed runner's lifetime
	// for the last conditional writes.
	selectMargin = 30 * time.Second
)

// Claimer runs claims against the pools of one AWS account.
type Claimer struct {
	DynamoDB DynamoDBClient
	SQS      SQSClient
	EC2      EC2Client
	Tokens   TokenSource      // nil: GitHub tokens are maintained elsewhere
	Now      func() time.Time // nil: time.Now
	// ReapInterval: Create and Release reap the pool at most this often
	// (0: DefaultReapInterval; negative: never).
	ReapInterval time.Duration
	Log          Logger // nil: no logging
}

func (c *Claimer) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Claimer) log(msg string, keyvals ...any) {
	if c.Log != nil {
		c.Log(msg, keyvals...)
	}
}

func (c *Claimer) store(poolName string) *store {
	return &store{db: c.DynamoDB, table: protocol.TableName(poolName), now: c.now, log: c.log}
}

// Result is a fulfilled claim.
type Result struct {
	Instances []Instance
	Reused    int
	Created   int
	Pickup    PickupStats
}

// Create fulfils a claim, all or nothing: on failure every runner it took is
// back in the pool or terminated, its claim record is gone, and the error
// says what happened to each instance.
func (c *Claimer) Create(ctx context.Context, req Request) (*Result, error) {
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, req.Pool)
	if err != nil {
		return nil, err
	}
	wants, err := req.wants(cfg)
	if err != nil {
		return nil, err
	}
	queueURL := cfg.QueueURLs[req.ResourceClass]
	if queueURL == "" {
		return nil, fmt.Errorf("pool %s has no queue for resource class %q; apply the pool to re-create it", req.Pool, req.ResourceClass)
	}
	s := c.store(req.Pool)
	// Reaping overlaps the claim's own waits; it is bounded, and its
	// failures only logged.
	defer c.reapAlongside(ctx, req.Pool)()
	// Before any runner learns the run id: it registers at once.
	if err := c.ensureTokens(ctx, s, cfg); err != nil {
		return nil, err
	}
	a := &attempt{c: c, s: s, req: req, cfg: cfg, wants: wants, held: map[string]*held{}}
	a.rec = Record{Request: req, State: recordPending, Nonce: newNonce()}
	if adopted, err := a.begin(ctx); err != nil || adopted != nil {
		return adopted, err
	}
	// Claimed runners must reach running within their protocol lifetime,
	// the fleet's validation included: stop taking candidates in time.
	a.selectUntil = c.now().Add(claimedLifetime - selectMargin)
	if req.FleetFallback && cfg.Fleet != nil {
		a.selectUntil = a.selectUntil.Add(-req.Timings.FleetValidationWait)
	}
	a.pickup = NewPickup(c.SQS, queueURL, wants, c.now, c.log)
	// The lease outlives the caller's context: a rollback is still the attempt.
	stopLease := a.keepLease(context.WithoutCancel(ctx))
	defer stopLease()
	res, err := a.run(ctx)
	if err == nil {
		return res, nil
	}
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupBudget)
	defer cancel()
	return nil, a.rollback(cleanup, err)
}

// reapAlongside starts an opportunistic reap and returns the func that
// waits for it.
func (c *Claimer) reapAlongside(ctx context.Context, poolName string) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, _, err := c.ReapIfDue(context.WithoutCancel(ctx), poolName, c.ReapInterval); err != nil {
			c.log("reaping failed", "pool", poolName, "error", err.Error())
		}
	}()
	return func() { <-done }
}

// held is an instance the attempt owns, and the state it put it in.
type held struct {
	inst  Instance
	state string
}

// attempt is one run of Create.
type attempt struct {
	c      *Claimer
	s      *store
	req    Request
	cfg    protocol.PoolConfig
	wants  Wants
	rec    Record
	pickup *Pickup
	// selectUntil: claim workers take no new candidate after it.
	selectUntil time.Time

	mu       sync.Mutex
	held     map[string]*held
	failures []string // runners tried and let go, and why
	notes    []string // what else went wrong on the way
	launched int      // instances CreateFleet started
}

func (a *attempt) hold(inst Instance, state string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held[inst.ID] = &held{inst: inst, state: state}
}

func (a *attempt) drop(id, why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.held, id)
	a.failures = append(a.failures, fmt.Sprintf("%s: %s", id, why))
}

func (a *attempt) note(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.notes = append(a.notes, fmt.Sprintf(format, args...))
}

// begin writes the claim record before anything else, so a crash can be
// found and cleaned up. A pending record left by a crashed attempt of the
// same run is cleaned up first; a complete one is someone's live claim.
func (a *attempt) begin(ctx context.Context) (*Result, error) {
	for {
		err := a.s.putRecord(ctx, a.rec, true)
		if !errors.Is(err, errConditionFailed) {
			return nil, err
		}
		prev, ok, err := a.s.readRecord(ctx, a.req.Pool, a.req.RunID)
		switch {
		case err != nil:
			return nil, err
		case !ok:
			continue // gone meanwhile
		case prev.Nonce == a.rec.Nonce:
			return nil, nil // our own write, its response lost
		case prev.State == recordComplete && sameClaim(prev.Request, a.req) && a.stillHeld(ctx, prev):
			// An apply that crashed after the claim was complete: adopt it.
			a.c.log("adopting the complete claim of an earlier apply", "run", a.req.RunID, "instances", prev.OwnedIDs)
			res := &Result{Instances: prev.Instances}
			for _, inst := range prev.Instances {
				if inst.Source == SourceFleet {
					res.Created++
				} else {
					res.Reused++
				}
			}
			return res, nil
		case prev.State == recordComplete && sameClaim(prev.Request, a.req):
			// Its runners are gone or given back (a destroy that died):
			// finish that release below and claim anew.
		case prev.State == recordComplete:
			return nil, fmt.Errorf("run %s already holds a different claim in pool %s; import it (`terraform import <address> %s/%s`) or use another run_id",
				a.req.RunID, a.req.Pool, a.req.Pool, a.req.RunID)
		}
		refreshed, perr := protocol.ParseTime(prev.UpdatedAt)
		if prev.State == recordPending && perr == nil && a.c.now().Sub(refreshed) < leaseTimeout {
			// A live attempt (another apply), or one that was killed less
			// than a lease ago: wait for it to finish or for its lease to lapse.
			a.c.log("waiting for another attempt's claim record", "run", a.req.RunID, "refreshed", prev.UpdatedAt)
			if err := sleep(ctx, leaseInterval/4); err != nil {
				return nil, fmt.Errorf("another apply is claiming runners for run %s in pool %s (its claim record was refreshed at %s): %w", a.req.RunID, a.req.Pool, prev.UpdatedAt, err)
			}
			continue
		}
		a.c.log("cleaning up a crashed claim attempt", "run", a.req.RunID, "instances", prev.OwnedIDs)
		if _, err := a.c.releaseAll(ctx, a.s, a.cfg, prev.Request, prev.OwnedIDs); err != nil {
			return nil, fmt.Errorf("cleaning up the crashed earlier attempt of run %s: %w", a.req.RunID, err)
		}
		if _, err := a.c.terminateUnrecorded(ctx, a.s, a.req.Pool, a.req.RunID); err != nil {
			return nil, fmt.Errorf("cleaning up the crashed earlier attempt of run %s: %w", a.req.RunID, err)
		}
		return nil, a.s.putRecord(ctx, a.rec, false)
	}
}

// stillHeld tells whether every runner of a complete claim is still
// running for it, as a claim that can be adopted must be.
func (a *attempt) stillHeld(ctx context.Context, rec Record) bool {
	records, err := a.s.instances(ctx, rec.OwnedIDs)
	if err != nil {
		return false
	}
	for _, id := range rec.OwnedIDs {
		if r, ok := records[id]; !ok || r.State != protocol.StateRunning || r.RunID != rec.Request.RunID {
			return false
		}
	}
	return len(rec.OwnedIDs) > 0
}

// sameClaim tells whether a recorded claim asked for what req asks.
func sameClaim(a, b Request) bool {
	return a.InstanceCount == b.InstanceCount && a.ResourceClass == b.ResourceClass && a.UsageClass == b.UsageClass &&
		slices.Equal(a.AllowedTypes, b.AllowedTypes)
}

// keepLease refreshes the pending claim record until the returned stop is called.
func (a *attempt) keepLease(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sleep(ctx, leaseInterval) == nil {
			if err := a.s.touchRecord(ctx, a.req.RunID, a.rec.Nonce); err != nil && ctx.Err() == nil {
				a.c.log("refreshing the claim record failed", "error", err.Error())
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (a *attempt) run(ctx context.Context) (*Result, error) {
	reused, err := a.selectWarm(ctx)
	if err != nil {
		return nil, err
	}
	// Hand back surplus runners now rather than after the fleet's wait.
	if err := a.pickup.Close(ctx); err != nil {
		return nil, err
	}
	missing := a.req.InstanceCount - len(reused)
	var created []Instance
	if missing > 0 {
		if created, err = a.createMissing(ctx, missing); err != nil {
			return nil, err
		}
	}
	all := append(append([]Instance{}, reused...), created...)
	if err := a.toRunning(ctx, all); err != nil {
		return nil, err
	}
	a.rec.State, a.rec.Instances, a.rec.OwnedIDs = recordComplete, all, instanceIDs(all)
	if err := a.s.putRecord(ctx, a.rec, false); err != nil {
		return nil, err
	}
	return &Result{Instances: all, Reused: len(reused), Created: len(created), Pickup: a.pickup.Stats()}, nil
}

// selectWarm runs one claim worker per wanted runner, concurrently, sharing
// the Pickup Manager.
func (a *attempt) selectWarm(ctx context.Context) ([]Instance, error) {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		got    []Instance
		errs   []error
		worker = func() {
			defer wg.Done()
			inst, ok, err := a.claimWorker(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				got = append(got, inst)
			}
		}
	)
	for range a.req.InstanceCount {
		wg.Add(1)
		go worker()
	}
	wg.Wait()
	return got, errors.Join(errs...)
}

// claimWorker takes candidates from the Pickup Manager until one is claimed,
// healthy and registered for the run, or the pool is exhausted (ok false).
func (a *attempt) claimWorker(ctx context.Context) (Instance, bool, error) {
	for {
		if a.c.now().After(a.selectUntil) {
			a.note("stopped taking runners from the pool: the runners already claimed must reach running within %s", claimedLifetime)
			return Instance{}, false, nil
		}
		m, ok, err := a.pickup.Next(ctx)
		if err != nil || !ok {
			return Instance{}, false, err
		}
		inst := Instance{ID: m.ID, InstanceType: m.InstanceType, UsageClass: m.UsageClass, Source: SourcePool}
		err = a.s.apply(ctx, m.ID, transition{
			fromState: protocol.StateIdle, toState: protocol.StateClaimed, toRunID: a.req.RunID,
			threshold: a.c.now().Add(claimedLifetime), deadline: "live",
		})
		switch {
		case errors.Is(err, errConditionFailed):
			// Lost the race, or a stale message: the record is the truth.
			a.c.log("claim worker: runner not idle, message dropped", "instance", m.ID)
			continue
		case err != nil:
			if ctx.Err() != nil {
				return Instance{}, false, ctx.Err()
			}
			// Transient: the runner is still idle, so its message goes back.
			a.note("%s: not claimed (%v); returned to the pool", m.ID, err)
			if err := a.pickup.Return(ctx, m); err != nil {
				return Instance{}, false, err
			}
			continue
		}
		a.hold(inst, protocol.StateClaimed)
		if err := a.s.addOwned(ctx, a.req.RunID, m.ID); err != nil {
			return Instance{}, false, err
		}
		err = a.c.waitReady(ctx, a.s, m.ID, readyCheck{runID: a.req.RunID, wait: a.req.Timings.RegistrationWait, healthyAtOnce: true}, a.req.Timings)
		if err == nil {
			return inst, true, nil
		}
		if ctx.Err() != nil {
			return Instance{}, false, ctx.Err() // still held: rollback gives it back
		}
		a.c.log("claim worker: runner failed its checks", "instance", m.ID, "reason", err.Error())
		terminated, derr := a.c.discard(ctx, a.s, m.ID, protocol.StateClaimed, a.req.RunID)
		if derr != nil {
			return Instance{}, false, derr // still held: rollback settles it
		}
		a.drop(m.ID, discardOutcome(err.Error(), terminated))
	}
}

// createMissing launches what the pool could not give and waits until every
// new runner is registered and healthy.
func (a *attempt) createMissing(ctx context.Context, missing int) ([]Instance, error) {
	if !a.req.FleetFallback {
		return nil, fmt.Errorf("the pool had %d suitable runner(s) of the %d wanted and fleet_fallback is false", a.req.InstanceCount-missing, a.req.InstanceCount)
	}
	if a.cfg.Fleet == nil {
		return nil, fmt.Errorf("the pool had %d suitable runner(s) of the %d wanted, and pool %s has no fleet settings to launch the rest", a.req.InstanceCount-missing, a.req.InstanceCount, a.req.Pool)
	}
	created, err := a.launch(ctx, missing)
	if err != nil {
		return nil, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, inst := range created {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := a.c.waitReady(ctx, a.s, inst.ID, readyCheck{runID: a.req.RunID, wait: a.req.Timings.FleetValidationWait}, a.req.Timings)
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("new instance %s: %w", inst.ID, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return created, errors.Join(errs...)
}

// toRunning hands every runner to the run, with the claim's runtime as deadline.
func (a *attempt) toRunning(ctx context.Context, insts []Instance) error {
	threshold := a.c.now().Add(a.req.maxRuntime(a.cfg))
	for _, inst := range insts {
		a.mu.Lock()
		h := a.held[inst.ID]
		a.mu.Unlock()
		err := a.s.apply(ctx, inst.ID, transition{
			fromState: h.state, fromRunID: a.req.RunID, toState: protocol.StateRunning, toRunID: a.req.RunID,
			threshold: threshold, deadline: "live",
		})
		if err != nil {
			return fmt.Errorf("instance %s: %w", inst.ID, err)
		}
		a.mu.Lock()
		h.state = protocol.StateRunning
		a.mu.Unlock()
	}
	return nil
}

// rollback gives back or terminates everything the attempt holds, removes
// the claim record and explains the failure instance by instance.
func (a *attempt) rollback(ctx context.Context, cause error) error {
	var cleanupErrs []error
	if err := a.pickup.Close(ctx); err != nil {
		cleanupErrs = append(cleanupErrs, err)
	}
	reused := 0
	for _, h := range a.held {
		if h.inst.Source == SourcePool {
			reused++
		}
	}
	outcomes, err := a.c.releaseHeld(ctx, a.s, a.cfg, a.req, a.held)
	if err != nil {
		cleanupErrs = append(cleanupErrs, err)
	} else if err := a.s.deleteRecord(ctx, a.req.RunID); err != nil {
		cleanupErrs = append(cleanupErrs, err)
	}
	lines := append(append(append([]string{}, a.failures...), a.notes...), outcomes...)
	sort.Strings(lines)
	msg := fmt.Sprintf("claim of %d %s runner(s) for run %s in pool %s failed: %v\nreused %d, created %d, failed %d",
		a.req.InstanceCount, a.req.ResourceClass, a.req.RunID, a.req.Pool, cause, reused, a.launched, len(a.failures))
	if len(lines) > 0 {
		msg += "\n- " + strings.Join(lines, "\n- ")
	}
	if len(cleanupErrs) > 0 {
		msg += fmt.Sprintf("\ncleanup incomplete (the claim record %s lists what is left): %v", a.req.RunID, errors.Join(cleanupErrs...))
	}
	return errors.New(msg)
}

func instanceIDs(insts []Instance) []string {
	ids := make([]string, len(insts))
	for i, inst := range insts {
		ids[i] = inst.ID
	}
	return ids
}

func newNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}
