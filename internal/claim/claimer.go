package claim

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dyntypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// Protocol deadlines of the states a claim writes.
const (
	claimedLifetime = 5 * time.Minute  // idle -> claimed
	CreatedLifetime = 10 * time.Minute // (none) -> created
	expiredBy       = 5 * time.Minute  // expire: threshold this far in the past
	cleanupBudget   = 3 * time.Minute  // rollback after the caller's context ended
	// A pending claim record refreshed within leaseTimeout belongs to a
	// live attempt; older, to a crashed one. An attempt refreshes its
	// record every leaseRenewal, again every leaseRetry after a failed
	// refresh, and stops once its last refresh is leaseTimeout-leaseInterval
	// old: then another attempt may take the record over within leaseInterval.
	leaseTimeout  = 30 * time.Second
	leaseInterval = 10 * time.Second
	leaseRenewal  = leaseTimeout / 2
	leaseRetry    = 2 * time.Second
	// selectMargin is kept free at the end of a claimed runner's lifetime
	// for the last conditional writes.
	selectMargin = 30 * time.Second
)

// Claimer runs claims against the pools of one AWS account.
type Claimer struct {
	DynamoDB DynamoDBClient
	SQS      SQSClient
	EC2      EC2Client
	GitHub   *GitHubAccess // nil: no GitHub credentials of the provider's own
	// StoredGitHub reads the credentials pools keep in their account,
	// when GitHub is nil (nil: they are not read).
	StoredGitHub *StoredGitHub
	Now          func() time.Time // nil: time.Now
	// Sleep waits d unless ctx ends first (nil: a timer); a simulation on
	// a virtual clock sets it with Now.
	Sleep func(ctx context.Context, d time.Duration) error
	// ReapInterval: the maintenance that runs alongside claims and
	// releases (maintenance.Alongside) reaps the pool at most this often
	// (0: maintenance.DefaultReapInterval; negative: never).
	ReapInterval time.Duration
	// DefaultTags (the provider's default_tags) also tag the instances it
	// launches, after the pool's own.
	DefaultTags map[string]string
	Log         Logger // nil: no logging
	// Metrics publishes what claims, releases and scans did, to the pools
	// with metrics settings (nil: nothing is published).
	Metrics *metrics.Publisher
	// Warn reports what went wrong without failing the operation (metrics
	// not published); nil: it is only logged. It may be called
	// concurrently.
	Warn func(summary, detail string)
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
	return &store{db: c.DynamoDB, table: protocol.TableName(poolName), now: c.now, sleep: c.Sleep, log: c.log}
}

// Result is a fulfilled claim.
type Result struct {
	Instances []Instance
	// Label is the runners' label: the request's, or the one of the
	// complete claim of an earlier apply it adopted.
	Label string
	// Repository is the repository whose workflow run the claim serves, as
	// recorded ("": none): through the broker, the OIDC token's.
	Repository string
	Reused     int // from the pool's queue (hot)
	Started    int // from the stopped tier
	Created    int // launched
	Pickup     PickupStats
	// Warnings say what the claim did that its caller should know: the
	// on-demand instances it launched for spot capacity EC2 did not have.
	Warnings []string
}

// Create fulfils a claim, its runners labelled with a new label (req's
// is ignored), all or nothing: on failure every runner it took is back in
// the pool or terminated, its claim record is gone, and the error says
// what happened to each instance.
func (c *Claimer) Create(ctx context.Context, req Request) (*Result, error) {
	// The run id keys the claim record and begins the runners' label.
	if err := protocol.ValidateNewRunID(req.RunID); err != nil {
		return nil, fmt.Errorf("run id %q: %w", req.RunID, err)
	}
	req.Label = protocol.NewLabel(req.RunID)
	return c.claim(ctx, req)
}

// Revive claims runners again for a released claim of a workflow run, as
// Create does, with the claim's own run id and label: a re-run's jobs that
// kept the claim job's outputs from the attempt that claimed wait for that
// label. req is the claim as its marker recorded it, WorkflowRun the
// attempt that revives it.
func (c *Claimer) Revive(ctx context.Context, req Request) (*Result, error) {
	if err := protocol.ValidateLabel(req.RunID, req.Label); err != nil {
		return nil, err
	}
	return c.claim(ctx, req)
}

// claim fulfils req, with its label, all or nothing (Create).
func (c *Claimer) claim(ctx context.Context, req Request) (*Result, error) {
	started := c.now()
	if err := protocol.ValidateNewRunID(req.RunID); err != nil {
		return nil, fmt.Errorf("run id %q: %w", req.RunID, err)
	}
	if req.RunnerGroup != "" {
		if err := protocol.ValidateRunnerGroup(req.RunnerGroup); err != nil {
			return nil, err
		}
	}
	if req.Repository != "" {
		if _, _, err := protocol.ParseRepository(req.Repository); err != nil {
			return nil, err
		}
	}
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, req.Pool)
	if err != nil {
		return nil, err
	}
	if err := CheckRunnerGroup(cfg, req.RunnerGroup); err != nil {
		return nil, err
	}
	if req.RegisterWithRepository && req.RunnerGroup != "" {
		return nil, fmt.Errorf("runner group %q: the runners of run %s register with its repository, and only organization runners join runner groups", req.RunnerGroup, req.RunID)
	}
	target, err := req.runnerTarget(cfg)
	if err != nil {
		return nil, err
	}
	wants, err := req.wants(cfg)
	if err != nil {
		return nil, err
	}
	template, current, templateErr := c.CurrentTemplate(ctx, cfg)
	wants.Template = current
	queueURL := cfg.QueueURLs[req.ResourceClass]
	if queueURL == "" {
		return nil, fmt.Errorf("pool %s has no queue for resource class %q; apply the pool to re-create it", req.Pool, req.ResourceClass)
	}
	// Minted before any runner is touched, and handed to each runner before
	// it learns the run id: it registers at once. A claim through the
	// broker hands a grant instead, each job's registration minted later,
	// by the runner's agent.
	var regToken *runnerToken
	var grant *runnerGrant
	if req.RegisterWithRepository {
		grant, err = c.newGrant(ctx, cfg, req)
	} else {
		regToken, err = c.mintToken(ctx, cfg, target, registrationToken, req.RunID)
	}
	if err != nil {
		return nil, err
	}
	if regToken != nil {
		g, _ := c.PoolGitHub(ctx, cfg) // mintToken read it
		if err := c.checkGroupAdmits(ctx, g, cfg, req); err != nil {
			return nil, err
		}
		regToken.label, regToken.runnerGroup = req.Label, req.RunnerGroup
	}
	s := c.store(req.Pool)
	a := &attempt{c: c, s: s, req: req, cfg: cfg, wants: wants, regToken: regToken, grant: grant, held: map[string]*held{},
		template: template, templateErr: templateErr, started: started, checks: &checkLog{}}
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
	a.pickup.Sleep = c.Sleep
	// The lease outlives the caller's context: a rollback is still the
	// attempt. Losing it stops the attempt.
	runCtx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	stopLease := a.keepLease(context.WithoutCancel(ctx), lost)
	defer stopLease()
	res, err := a.run(runCtx)
	if err == nil {
		a.publishClaim(ctx, res)
		return res, nil
	}
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupBudget)
	defer cancel()
	if errors.Is(err, errLeaseLost) || errors.Is(context.Cause(runCtx), errLeaseLost) {
		// Everything this attempt holds is listed in the record, which the
		// attempt that took it over settles: touching it here could release
		// that attempt's runners.
		a.pickup.Close(cleanup)
		return nil, fmt.Errorf("claim of run %s in pool %s stopped: %w; the attempt that took over settles the instances it held", a.req.RunID, a.req.Pool, errLeaseLost)
	}
	err = a.rollback(cleanup, err)
	a.publishClaim(cleanup, nil)
	return nil, err
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
	// regToken is handed to every runner before it is given the run (nil:
	// the pool's runners get no token), or grant, for a claim through the
	// broker (nil: a direct claim).
	regToken *runnerToken
	grant    *runnerGrant
	// selectUntil: claim workers take no new candidate after it.
	selectUntil time.Time
	// template is the pool's launch template as read when the attempt
	// began, or why it could not be read (only a launch needs it).
	template    ec2types.LaunchTemplate
	templateErr error

	// started: when Create began; registered: when every runner of the
	// claim was registered for the run (its time to runner).
	started, registered time.Time
	// checks are the checks runners failed, for the metrics.
	checks *checkLog

	mu       sync.Mutex
	held     map[string]*held
	failures []string // runners tried and let go, and why
	notes    []string // what else went wrong on the way
	warnings []string // what a claim that succeeds says (Result.Warnings)
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
		err := a.s.createRecord(ctx, a.rec)
		if !errors.Is(err, ErrRecordChanged) {
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
		case a.req.RegisterWithRepository && (!prev.Request.RegisterWithRepository || !strings.EqualFold(prev.Request.Repository, a.req.Repository)):
			// Not this repository's claim: never adopted, waited for nor
			// cleaned up by it, and not described to it.
			return nil, fmt.Errorf("run %s in pool %s is %w", a.req.RunID, a.req.Pool, ErrOtherRepository)
		case prev.Request.Claimant != a.req.Claimant:
			// Another claimant's claim, under way or complete: waiting for
			// it and adopting it would share its runners, which its
			// release takes back.
			return nil, fmt.Errorf("run %s in pool %s is %w, %q (this claim is %q's); give each claimant a run id of its own",
				a.req.RunID, a.req.Pool, ErrOtherClaimant, prev.Request.Claimant, a.req.Claimant)
		case prev.State == recordComplete && sameClaim(prev.Request, a.req) && a.stillHeld(ctx, prev):
			// An apply that crashed after the claim was complete: adopt it.
			a.c.log("adopting the complete claim of an earlier apply", "run", a.req.RunID, "instances", prev.OwnedIDs)
			res := &Result{Instances: prev.Instances, Label: prev.Request.Label, Repository: prev.Request.Repository}
			res.Reused, res.Started, res.Created = CountSources(prev.Instances)
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
			if err := a.s.pause(ctx, leaseInterval/4); err != nil {
				return nil, fmt.Errorf("another apply is claiming runners for run %s in pool %s (its claim record was refreshed at %s): %w", a.req.RunID, a.req.Pool, prev.UpdatedAt, err)
			}
			continue
		}
		// Take the record over first, with what it lists, on the condition
		// that it is as read: an attempt that refreshed it meanwhile is
		// alive and keeps it, and one that did not loses its lease and stops
		// touching what it held, which this attempt now settles.
		a.rec.OwnedIDs = prev.OwnedIDs
		err = a.s.replaceRecord(ctx, a.rec, prev.Nonce, prev.UpdatedAt)
		a.rec.OwnedIDs = nil
		if errors.Is(err, errLeaseLost) {
			continue
		}
		if err != nil {
			return nil, err
		}
		a.c.log("cleaning up a crashed claim attempt", "run", a.req.RunID, "instances", prev.OwnedIDs)
		if _, err := a.c.releaseAll(ctx, a.s, a.cfg, prev.Request, a.rec.Nonce, prev.OwnedIDs, nil); err != nil {
			return nil, fmt.Errorf("cleaning up the crashed earlier attempt of run %s: %w", a.req.RunID, err)
		}
		if _, err := a.c.terminateUnrecorded(ctx, a.s, a.req.Pool, a.req.RunID); err != nil {
			return nil, fmt.Errorf("cleaning up the crashed earlier attempt of run %s: %w", a.req.RunID, err)
		}
		return nil, nil
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

// sameClaim tells whether a recorded claim asked for what req asks. The
// label is not compared: each apply makes a new one, and an adopted claim
// keeps its own.
func sameClaim(a, b Request) bool {
	return a.InstanceCount == b.InstanceCount && a.ResourceClass == b.ResourceClass && a.UsageClass == b.UsageClass &&
		slices.Equal(a.AllowedTypes, b.AllowedTypes) && a.RunnerGroup == b.RunnerGroup && a.RegisterWithRepository == b.RegisterWithRepository
}

// keepLease refreshes the pending claim record until the returned stop is
// called: only as often as its takeover window needs (leaseRenewal, half
// the lease), since each refresh is a write, and a claim of a burst waits
// tens of seconds on a busy pool; after a failure it tries again sooner
// (leaseRetry). The lease is lost, and lost is called, when the record
// changed hands or when it could not be refreshed for so long that another
// attempt may take it over soon.
func (a *attempt) keepLease(ctx context.Context, lost context.CancelCauseFunc) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	runID, nonce := a.req.RunID, a.rec.Nonce
	go func() {
		defer close(done)
		refreshed := a.c.now()
		for wait := leaseRenewal; a.s.pause(ctx, wait) == nil; {
			err := a.s.touchRecord(ctx, runID, nonce)
			switch {
			case err == nil:
				refreshed, wait = a.c.now(), leaseRenewal
			case ctx.Err() != nil:
				return
			case errors.Is(err, errLeaseLost) || a.c.now().Sub(refreshed) >= leaseTimeout-leaseInterval:
				a.c.log("claim: lost the claim record's lease", "run", runID, "error", err.Error())
				lost(errLeaseLost)
				return
			default:
				a.c.log("refreshing the claim record failed", "run", runID, "error", err.Error())
				wait = leaseRetry
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (a *attempt) run(ctx context.Context) (*Result, error) {
	reused, late, err := a.selectWarm(ctx)
	if err != nil {
		return nil, err
	}
	// Hand back surplus runners now rather than after the fleet's wait.
	a.pickup.Close(ctx)
	givenBack := a.giveBack(ctx, late)
	started, created, err := a.fillMissing(ctx, a.req.InstanceCount-len(reused))
	if err := errors.Join(err, givenBack()); err != nil {
		return nil, err
	}
	all := slices.Concat(reused, started, created)
	a.registered = a.c.now()
	if err := a.finish(ctx, all); err != nil {
		return nil, err
	}
	a.mu.Lock()
	warnings := slices.Clone(a.warnings)
	a.mu.Unlock()
	return &Result{Instances: all, Label: a.req.Label, Repository: a.req.Repository, Reused: len(reused), Started: len(started), Created: len(created), Pickup: a.pickup.Stats(), Warnings: warnings}, nil
}

// fillMissing gets the missing runners the pool's queue did not have: it
// starts stopped runners, and launches the rest with a fleet while those
// boot. A started runner that does not come back healthy is terminated (a
// late one given back) and replaced with a fleet too.
func (a *attempt) fillMissing(ctx context.Context, missing int) (started, created []Instance, err error) {
	if missing == 0 {
		return nil, nil, nil
	}
	if started, err = a.startStopped(ctx, missing); err != nil {
		return nil, nil, err
	}
	var failed map[string]error
	var waitErr error
	booted := make(chan struct{})
	go func() {
		defer close(booted)
		if len(started) > 0 {
			failed, waitErr = a.waitStarted(ctx, started)
		}
	}()
	if rest := missing - len(started); rest > 0 {
		created, err = a.createMissing(ctx, rest)
	}
	<-booted
	if err := errors.Join(err, waitErr); err != nil {
		return nil, nil, err
	}
	healthy := make([]Instance, 0, len(started))
	var late []Instance
	for _, inst := range started {
		why, bad := failed[inst.ID]
		if bad {
			a.checks.add(inst.ID, why)
		}
		switch {
		case !bad:
			healthy = append(healthy, inst)
		case isLate(why):
			a.note("%s: %v; given back to the pool", inst.ID, why)
			late = append(late, inst)
		default:
			a.c.log("claim: started runner failed its checks", "instance", inst.ID, "reason", why.Error())
			terminated, err := a.c.discard(ctx, a.s, inst.ID, protocol.StateClaimed, a.req.RunID)
			if err != nil {
				return nil, nil, err // still held: rollback settles it
			}
			a.drop(inst.ID, discardOutcome("started from the stopped tier, "+why.Error(), terminated))
		}
	}
	if err := a.giveBack(ctx, late)(); err != nil {
		return nil, nil, err
	}
	if replace := len(started) - len(healthy); replace > 0 {
		more, err := a.createMissing(ctx, replace)
		if err != nil {
			return nil, nil, err
		}
		created = append(created, more...)
	}
	return healthy, created, nil
}

// giveBack releases the late runners to the pool in the background, while
// the claim goes on, and returns the function that waits for it. Until
// then they stay held, so that a rollback meanwhile settles them too; a
// release that fails leaves them held for the rollback its error causes.
func (a *attempt) giveBack(ctx context.Context, late []Instance) (wait func() error) {
	if len(late) == 0 {
		return func() error { return nil }
	}
	a.mu.Lock()
	items := make(map[string]*held, len(late))
	for _, inst := range late {
		items[inst.ID] = a.held[inst.ID]
	}
	a.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		outcomes, err := a.c.releaseHeld(ctx, a.s, a.cfg, a.req, a.rec.Nonce, items)
		if err == nil {
			a.mu.Lock()
			for id := range items {
				delete(a.held, id)
			}
			a.mu.Unlock()
		}
		for _, o := range outcomes {
			a.c.log("claim: a late runner given back", "run", a.req.RunID, "outcome", o)
			a.note("%s", o)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// selectWarm takes warm runners from the pool until the claim has them all,
// the pool is exhausted for it, or selectUntil. It claims each batch of
// candidates at once and checks every claimed runner's agent in one read
// per round; a runner that fails its checks is discarded and replaced,
// except a late one (alive, only slow), which the claim gives back.
func (a *attempt) selectWarm(ctx context.Context) (ready, late []Instance, err error) {
	var (
		claimed   = map[string]Instance{}
		watch     = newAgentWatch(a.s, a.cfg.InstanceARNPrefix)
		more      = true
		discarded int
	)
	for {
		need := a.req.InstanceCount - len(ready) - watch.len()
		if need > 0 && more && a.c.now().After(a.selectUntil) {
			a.note("stopped taking runners from the pool: the runners already claimed must reach running within %s", claimedLifetime)
			more = false
		}
		if need > 0 && more {
			msgs, err := a.pickup.Take(ctx, need)
			if err != nil {
				return nil, nil, err
			}
			a.retire(ctx, a.pickup.Retired())
			more = len(msgs) == need
			insts, err := a.claimAll(ctx, msgs)
			if err != nil {
				return nil, nil, err
			}
			for _, inst := range insts {
				claimed[inst.ID] = inst
				watch.add(inst.ID, a.req.Timings.RegistrationWait, registered(a.registration(), a.req.Timings.RegistrationWait, true, a.req.Timings, a.runnerPolicy()))
			}
			if len(insts) < len(msgs) && more {
				continue // replace the ones lost at once
			}
		}
		if watch.len() == 0 {
			if need > 0 && more {
				continue
			}
			return ready, late, nil
		}
		// The claim stops taking while it waits: what it received and does
		// not need goes back to the concurrent claims. An agent answers at
		// its next read of its record, never at once: the first read of the
		// signals waits one poll too.
		a.pickup.HandBack(ctx)
		if err := a.s.pause(ctx, a.req.Timings.PollInterval); err != nil {
			return nil, nil, err
		}
		decided, err := watch.poll(ctx)
		if err != nil {
			return nil, nil, err
		}
		// In id order, not a map's: the claim's instances, and the release
		// that keeps them warm in their order, are reproducible.
		for _, id := range slices.Sorted(maps.Keys(decided)) {
			failure := decided[id]
			if failure == nil {
				ready = append(ready, claimed[id])
				continue
			}
			a.c.log("claim: runner failed its checks", "instance", id, "reason", failure.Error())
			a.checks.add(id, failure)
			discarded++
			if isLate(failure) {
				// Alive, only slow: it goes back to the pool (still held
				// until then), and is replaced like a failed one.
				a.note("%s: %v; given back to the pool", id, failure)
				late = append(late, claimed[id])
				continue
			}
			terminated, err := a.c.discard(ctx, a.s, id, protocol.StateClaimed, a.req.RunID)
			if err != nil {
				return nil, nil, err // still held: rollback settles it
			}
			a.drop(id, discardOutcome(failure.Error(), terminated))
		}
		// A claim replaces a failing runner from the pool, but once more
		// runners failed than it asked for, what fails is more likely the
		// claim's view (a slow GitHub, a network) than the runners: it stops
		// taking from the pool rather than burn it.
		if more && discarded > a.req.InstanceCount {
			a.note("stopped taking runners from the pool: %d failed their checks", discarded)
			more = false
		}
	}
}

// retire ends idle runners that must leave the pool (why says why), unless
// someone took them meanwhile; a failure is only noted: the runner is no
// longer handed out (its message is gone) and ends at its deadline.
func (a *attempt) retire(ctx context.Context, why map[string]string) {
	ids := slices.Collect(maps.Keys(why))
	parallel(len(ids), func(i int) {
		id := ids[i]
		terminated, err := a.c.discard(ctx, a.s, id, protocol.StateIdle, "")
		if err != nil {
			a.note("%s: %s; ending it failed: %v", id, why[id], err)
			return
		}
		a.c.log("claim: retired a runner", "instance", id, "outcome", discardOutcome(why[id], terminated))
	})
}

// claimAll claims runners the Pickup Manager took: listed in the claim
// record first (so a crash cannot lose one), handed the claim's
// registration token (one batched write), then each by its conditional
// write, concurrently. A token handed to a runner that a concurrent claim
// takes first is never used: an agent uses only a token for its record's
// run. The messages of runners claimed, or found owned by someone else, are
// deleted; a runner still idle after a failed write keeps its message,
// visible again when the pickup closes.
func (a *attempt) claimAll(ctx context.Context, msgs []protocol.Message) ([]Instance, error) {
	msgs = a.dropStale(ctx, msgs)
	if len(msgs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	if err := a.s.addOwned(ctx, a.req.RunID, a.rec.Nonce, ids...); err != nil {
		return nil, err
	}
	if err := a.handRegistration(ctx, ids); err != nil {
		return nil, err // the messages become visible again when the pickup closes
	}
	claim := table.Transition{
		FromState: protocol.StateIdle, ToState: protocol.StateClaimed, ToRunID: a.req.RunID,
		Threshold: a.c.now().Add(claimedLifetime), Deadline: table.DeadlineLive,
	}
	errs := a.s.applyEach(ctx, ids, func(string) table.Transition { return claim })
	var (
		got     []Instance
		consume []string
		failed  error
	)
	for i, m := range msgs {
		inst := Instance{ID: m.ID, InstanceType: m.InstanceType, UsageClass: m.UsageClass, Source: SourcePool, LaunchedAt: m.LaunchedAt,
			TemplateID: m.TemplateID, TemplateVersion: m.TemplateVersion}
		outcome, err := a.claimOutcome(ctx, m.ID, errs[i])
		switch outcome {
		case claimed:
			a.hold(inst, protocol.StateClaimed)
			got = append(got, inst)
			consume = append(consume, m.ID)
		case takenByOthers:
			a.c.log("claim: runner not idle, message dropped", "instance", m.ID)
			consume = append(consume, m.ID)
		case leftIdle:
			a.note("%s: not claimed (%v); returned to the pool", m.ID, errs[i])
		case unknown:
			a.hold(inst, protocol.StateClaimed) // maybe ours: rollback settles it
			failed = cmp.Or(failed, err)
		}
	}
	a.pickup.Consume(ctx, consume)
	return got, failed
}

// dropStale consumes the messages of runners the attempt already holds
// (an old message delivered again: the pickup judges a runner it consumed
// afresh) and returns the others. Claiming such a runner again would fail
// its condition at best, and at worst, when only the record can tell what
// the write did, count it twice.
func (a *attempt) dropStale(ctx context.Context, msgs []protocol.Message) []protocol.Message {
	a.mu.Lock()
	var stale []string
	fresh := slices.DeleteFunc(slices.Clone(msgs), func(m protocol.Message) bool {
		_, held := a.held[m.ID]
		if held {
			stale = append(stale, m.ID)
		}
		return held
	})
	a.mu.Unlock()
	a.pickup.Consume(ctx, stale)
	return fresh
}

// What a claim write did.
type claimResult int

const (
	claimed       claimResult = iota
	takenByOthers             // a lost race, or a stale message: the record is the truth
	leftIdle                  // the write failed, the runner is still idle
	unknown                   // neither the write nor a read could tell
)

// claimOutcome tells what the claim write of id did from its error, and
// when that cannot tell (a transient error after retries: the write may
// have happened), from the record.
func (a *attempt) claimOutcome(ctx context.Context, id string, err error) (claimResult, error) {
	switch {
	case err == nil:
		return claimed, nil
	case errors.Is(err, ErrRecordChanged):
		return takenByOthers, nil
	case ctx.Err() != nil:
		return unknown, ctx.Err()
	}
	rec, ok, rerr := a.s.instance(ctx, id)
	switch {
	case rerr != nil:
		return unknown, err
	case ok && rec.State == protocol.StateClaimed && rec.RunID == a.req.RunID:
		return claimed, nil
	case ok && rec.State == protocol.StateIdle:
		return leftIdle, nil
	default:
		return takenByOthers, nil
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
	watch := newAgentWatch(a.s, a.cfg.InstanceARNPrefix)
	wait := a.req.Timings.FleetValidationWait
	for _, inst := range created {
		watch.add(inst.ID, wait, registered(a.registration(), wait, false, a.req.Timings, a.runnerPolicy()))
	}
	decided, err := watch.wait(ctx, a.req.Timings.PollInterval)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, inst := range created {
		if err := decided[inst.ID]; err != nil {
			a.checks.add(inst.ID, err)
			errs = append(errs, fmt.Errorf("new instance %s: %w", inst.ID, err))
		}
	}
	return created, errors.Join(errs...)
}

// finish hands every runner to the run, with the claim's runtime as
// deadline, and marks the claim record complete. Up to 24 runners, that is
// one transaction, so the record is complete exactly when its runners run;
// otherwise, or when that transaction fails, the runners go first (their
// writes batched) and the record after.
func (a *attempt) finish(ctx context.Context, insts []Instance) error {
	threshold := a.c.now().Add(a.req.maxRuntime(a.cfg))
	ids := instanceIDs(insts)
	a.mu.Lock()
	from := make(map[string]string, len(ids))
	for _, id := range ids {
		from[id] = a.held[id].state
	}
	a.mu.Unlock()
	toRunning := func(id string) table.Transition {
		return table.Transition{
			FromState: from[id], FromRunID: a.req.RunID, ToState: protocol.StateRunning, ToRunID: a.req.RunID,
			Threshold: threshold, Deadline: table.DeadlineLive,
		}
	}
	a.rec.State, a.rec.Instances, a.rec.OwnedIDs = recordComplete, insts, ids
	errs := make([]error, len(ids))
	together := len(ids) < transactionLimit
	if together {
		writes := make([]dyntypes.TransactWriteItem, 0, len(ids)+1)
		for _, id := range ids {
			writes = append(writes, dyntypes.TransactWriteItem{Update: a.s.update(id, toRunning(id))})
		}
		writes = append(writes, dyntypes.TransactWriteItem{Put: a.s.recordPut(a.rec)})
		if err := a.s.transact(ctx, writes); err != nil {
			a.c.log("claim: completing in one transaction failed", "error", err.Error())
			together = false
		}
	}
	if !together {
		// One by one, the runners' writes cannot be tied to the record's:
		// make sure it is still this attempt's first.
		if err := a.s.touchRecord(ctx, a.req.RunID, a.rec.Nonce); err != nil {
			return err
		}
		errs = a.s.applyEach(ctx, ids, toRunning)
	}
	var failed []error
	a.mu.Lock()
	for i, id := range ids {
		if errs[i] != nil {
			failed = append(failed, fmt.Errorf("instance %s: %w", id, errs[i]))
		} else {
			a.held[id].state = protocol.StateRunning
		}
	}
	a.mu.Unlock()
	if len(failed) > 0 || together {
		return errors.Join(failed...)
	}
	return a.s.replaceRecord(ctx, a.rec, a.rec.Nonce, "")
}

// rollback gives back or terminates everything the attempt holds, removes
// the claim record and explains the failure instance by instance.
func (a *attempt) rollback(ctx context.Context, cause error) error {
	var cleanupErrs []error
	a.pickup.Close(ctx)
	reused := 0
	for _, h := range a.held {
		if h.inst.Source == SourcePool {
			reused++
		}
	}
	outcomes, err := a.c.releaseHeld(ctx, a.s, a.cfg, a.req, a.rec.Nonce, a.held)
	if err != nil {
		cleanupErrs = append(cleanupErrs, err)
	} else if err := a.s.deleteRecord(ctx, a.req.RunID, a.rec.Nonce); err != nil {
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
