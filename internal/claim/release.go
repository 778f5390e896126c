package claim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// Release gives a claim's runners back to the pool (releaseRecord).
// Releasing a released claim does nothing. Outcomes say what happened to
// each instance.
func (c *Claimer) Release(ctx context.Context, poolName, runID string) ([]string, error) {
	s := c.store(poolName)
	rec, ok, err := s.readRecord(ctx, poolName, runID)
	if !ok || err != nil {
		return nil, IgnoreMissingPool(err)
	}
	return c.releaseRecord(ctx, s, rec)
}

// releaseRecord gives the runners of the claim rec records back to the
// pool and deletes the record: the one way a claim returns its runners,
// whether its destroy releases it or the pool's maintenance (its run
// ended without releasing it). Each runner is handed a removal token
// (pools with a GitHub target) and goes running -> idle, and once its
// agent confirms it left the run, its message goes back to the queue with
// its new idle deadline. A runner that does not confirm, whose runtime
// ran out, or that could get no removal token, is terminated instead. A
// claim of a workflow run leaves its marker, for the run's re-runs
// (putReleased).
func (c *Claimer) releaseRecord(ctx context.Context, s *store, rec Record) ([]string, error) {
	poolName, runID := rec.Request.Pool, rec.Request.RunID
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
	if err != nil {
		return nil, err
	}
	tally := &releaseTally{}
	outcomes, err := c.releaseAll(ctx, s, cfg, rec.Request, rec.Nonce, rec.OwnedIDs, tally)
	c.Publish(ctx, cfg, metrics.Release{Pool: poolName, Class: rec.Request.ResourceClass, RunID: runID, Outcomes: tally.outcomes, Checks: tally.list()}.Events(c.now()))
	if err != nil {
		return outcomes, err // the record stays: a retried release picks up the rest
	}
	if err := s.deleteRecord(ctx, runID, rec.Nonce); err != nil {
		return outcomes, err
	}
	if _, known := rec.Request.RunAttempt(); known {
		// Only a re-run's revival needs it: the release does not fail for it.
		if err := s.putReleased(ctx, rec.Request); err != nil {
			c.log("a re-run's jobs that wait for this claim's label will not get runners", "run", runID, "error", err.Error())
		}
	}
	return outcomes, nil
}

// IgnoreMissingPool: a claim in a deleted pool has nothing left to release.
func IgnoreMissingPool(err error) error {
	if errors.Is(err, pool.ErrNotFound) || isTableMissing(err) {
		return nil
	}
	return err
}

// settleMargin is kept free before the caller's deadline for what follows
// the wait for the agents: terminating the runners that did not confirm
// their release, and recording it.
const settleMargin = 20 * time.Second

// releaseWaitWithin shortens wait so that it ends settleMargin before ctx's
// deadline (at once when less is left): a release settles every runner
// before its caller gives up, rather than fail and leave them idle without
// a message.
func releaseWaitWithin(ctx context.Context, wait time.Duration) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(deadline)-settleMargin)
	}
	return max(wait, 0)
}

// settleItem is one instance to give back or terminate.
type settleItem struct {
	inst  Instance
	state string
	// discard says why it is terminated rather than given back ("" gives
	// it back).
	discard string
	// resumeUntil: already idle until then, its message maybe not sent.
	resumeUntil string
}

// releaseAll settles the instances of ids still held by req's run, as their
// records say: claimed or running ones go back to the pool, created ones
// (launched by an attempt that never finished) are terminated. nonce is the
// owner of the claim record that lists them. tally, when not nil, counts
// what happened to each.
func (c *Claimer) releaseAll(ctx context.Context, s *store, cfg protocol.PoolConfig, req Request, nonce string, ids []string, tally *releaseTally) ([]string, error) {
	records, err := s.instances(ctx, ids)
	if err != nil {
		return nil, err
	}
	var idle []string
	for _, id := range ids {
		if r, ok := records[id]; ok && r.State == protocol.StateIdle && r.RunID == "" {
			idle = append(idle, id)
		}
	}
	agents, err := s.agents(ctx, cfg.InstanceARNPrefix, idle)
	if err != nil {
		return nil, err
	}
	var items []settleItem
	var outcomes []string
	var current TemplateRef
	if len(ids) > len(idle) {
		_, current, _ = c.CurrentTemplate(ctx, cfg)
	}
	for _, id := range ids {
		r, ok := records[id]
		inst := Instance{ID: id, InstanceType: r.InstanceType, UsageClass: r.UsageClass, LaunchedAt: r.LaunchedAt,
			TemplateID: r.TemplateID, TemplateVersion: r.TemplateVersion}
		switch {
		case ok && r.State == protocol.StateIdle && r.RunID == "":
			// Given back by an earlier release of this run that died before
			// sending its message, if no run took it since.
			if agents[id].signal.RunID != req.RunID {
				outcomes = append(outcomes, id+": no longer held by the run")
				continue
			}
			items = append(items, settleItem{inst: inst, state: r.State, resumeUntil: r.Threshold})
		case !ok || r.RunID != req.RunID || r.State == protocol.StateTerminated || r.State == protocol.StateIdle:
			outcomes = append(outcomes, id+": no longer held by the run")
		case r.State == protocol.StateCreated:
			items = append(items, settleItem{inst: inst, state: r.State, discard: "launched for the run"})
		default:
			why := Retirement(r.LaunchedAt, launchedFrom(r.TemplateID, r.TemplateVersion), current, time.Duration(cfg.MaxRunnerAge), c.now())
			items = append(items, settleItem{inst: inst, state: r.State, discard: why})
		}
	}
	settled, err := c.settleAll(ctx, s, cfg, req, nonce, items, tally)
	return append(outcomes, settled...), err
}

// releaseHeld settles what a failed attempt holds: warm runners go back to
// the pool, runners it launched are terminated.
func (c *Claimer) releaseHeld(ctx context.Context, s *store, cfg protocol.PoolConfig, req Request, nonce string, held map[string]*held) ([]string, error) {
	items := make([]settleItem, 0, len(held))
	for _, h := range held {
		it := settleItem{inst: h.inst, state: h.state}
		if h.inst.Source == SourceFleet {
			it.discard = "launched for the run"
		}
		items = append(items, it)
	}
	return c.settleAll(ctx, s, cfg, req, nonce, items, nil)
}

// settleAll settles instances and reports each outcome. Runners given back
// get the release's removal token, then go to idle (their conditional
// writes batched); a runner that cannot get a token could not deregister
// from GitHub, and is terminated instead. Their agents are watched
// together until each confirms it left the run; the messages of the
// confirmed ones go back to the queue in batches, the others are
// terminated; and every settled instance leaves the claim record in one
// write, so that a release retried after a crash does not settle it twice.
// tally, when not nil, counts what happened to each runner, and the
// checks of their release they failed.
func (c *Claimer) settleAll(ctx context.Context, s *store, cfg protocol.PoolConfig, req Request, nonce string, items []settleItem, tally *releaseTally) ([]string, error) {
	var (
		mu       sync.Mutex
		outcomes = map[string]string{}
		errs     []error
		idleBy   = map[string]time.Time{} // idle, awaiting its agent: the new idle deadline
		byID     = make(map[string]settleItem, len(items))
		toIdle   []string
		discards = map[string]string{} // id: why it is terminated
	)
	settled := func(id, outcome string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("instance %s: %w", id, err))
		} else {
			outcomes[id] = outcome
		}
	}
	for _, it := range items {
		id := it.inst.ID
		byID[id] = it
		switch {
		case it.discard != "":
			discards[id] = it.discard
		case it.resumeUntil != "":
			until, err := protocol.ParseTime(it.resumeUntil)
			if err != nil {
				settled(id, "", err)
			} else {
				idleBy[id] = until
			}
		default:
			toIdle = append(toIdle, id)
		}
	}
	toIdle = c.handRemovalToken(ctx, s, cfg, req, toIdle, discards)
	runners := make([]returningRunner, len(toIdle))
	for i, id := range toIdle {
		runners[i] = returningRunner{inst: byID[id].inst, state: byID[id].state}
	}
	plans, results := c.backToIdle(ctx, s, cfg, req.ResourceClass, req.RunID, req.RunID, runners)
	var lapsed []string
	for i, id := range toIdle {
		switch err := results[i]; {
		case err == nil:
			idleBy[id] = plans[id].threshold
		case errors.Is(err, ErrRecordChanged):
			lapsed = append(lapsed, id)
		default:
			settled(id, "", err)
		}
	}
	// Not idle as asked: gone to someone else, or past its deadline.
	parallel(len(lapsed), func(i int) {
		id := lapsed[i]
		r, ok, err := s.instance(ctx, id)
		switch {
		case err != nil:
			settled(id, "", err)
		case !ok || r.RunID != req.RunID || r.State == protocol.StateTerminated:
			settled(id, "no longer held by the run", nil)
		default:
			terminated, err := c.discard(ctx, s, id, r.State, req.RunID)
			if terminated && err == nil {
				tally.count(metrics.OutcomeTerminated)
			}
			settled(id, discardOutcome("its deadline had passed", terminated), err)
		}
	})
	watch := newAgentWatch(s, cfg.InstanceARNPrefix)
	wait := releaseWaitWithin(ctx, req.Timings.ReleaseWait)
	for id := range idleBy {
		watch.add(id, wait, released(req.RunID, wait))
	}
	decided, err := watch.wait(ctx, req.Timings.PollInterval)
	var confirmed []string
	for id := range idleBy {
		switch reason, ok := decided[id]; {
		case !ok:
			settled(id, "", fmt.Errorf("idle but not yet back in the queue (it terminates itself after its idle deadline): %w", err))
		case reason == nil:
			confirmed = append(confirmed, id)
		default:
			tally.failed(id, reason)
			discards[id] = fmt.Sprintf("did not confirm its release (%v)", reason)
		}
	}
	ids := slices.Collect(maps.Keys(discards))
	parallel(len(ids), func(i int) {
		id := ids[i]
		state, runID := byID[id].state, req.RunID
		if _, idle := idleBy[id]; idle {
			state, runID = protocol.StateIdle, ""
		}
		terminated, err := c.discard(ctx, s, id, state, runID)
		if terminated && err == nil {
			tally.count(metrics.OutcomeTerminated)
		}
		settled(id, discardOutcome(discards[id], terminated), err)
	})
	if len(confirmed) > 0 {
		insts := make([]Instance, len(confirmed))
		for i, id := range confirmed {
			insts[i] = byID[id].inst
		}
		err := c.requeue(ctx, cfg, req.ResourceClass, insts, idleBy)
		for _, id := range confirmed {
			if err == nil {
				tally.count(keptOutcome(plans[id]))
			}
			settled(id, plans[id].outcome(), err)
		}
	}
	done := slices.Sorted(maps.Keys(outcomes))
	lines := make([]string, len(done))
	for i, id := range done {
		lines[i] = id + ": " + outcomes[id]
	}
	if len(done) > 0 {
		if err := s.dropOwned(ctx, req.RunID, nonce, done...); err != nil {
			errs = append(errs, err)
		}
	}
	return lines, errors.Join(errs...)
}

// Returning runners to the pool is two steps, with what the caller waits
// for between them (a release: its agents' confirmation that they left
// the run): backToIdle, then requeue.

// returningRunner is a runner going back to the pool, from its state.
type returningRunner struct {
	inst  Instance
	state string
}

// backToIdle keeps what it can of runners warm for class (keepWarm: a hot
// slot, a stopped one, or idle until the idle timeout), the slots taken
// for owner (the run that releases them, or the fill that launched them),
// then moves each from its state, held by run ("": none), to idle until
// its plan's deadline, the writes batched. errs[i] is runners[i]'s write's.
func (c *Claimer) backToIdle(ctx context.Context, s *store, cfg protocol.PoolConfig, class, owner, run string, runners []returningRunner) (map[string]plan, []error) {
	candidates := make([]keepable, len(runners))
	from := make(map[string]string, len(runners))
	ids := make([]string, len(runners))
	for i, r := range runners {
		candidates[i] = keepable{id: r.inst.ID, usageClass: r.inst.UsageClass, run: owner, ageEnd: ageEnd(r.inst.LaunchedAt, time.Duration(cfg.MaxRunnerAge))}
		from[r.inst.ID], ids[i] = r.state, r.inst.ID
	}
	plans := c.keepWarm(ctx, s, cfg, class, candidates)
	return plans, s.applyEach(ctx, ids, func(id string) table.Transition {
		return table.Transition{
			FromState: from[id], FromRunID: run, ToState: protocol.StateIdle, ToRunID: "",
			Threshold: plans[id].threshold, StopUntil: plans[id].stopUntil, Deadline: table.DeadlineLive,
		}
	})
}

// requeue sends the idle-runner messages of runners now idle in class to
// its queue, in batches, each with its new idle deadline (until), not the
// one it had.
func (c *Claimer) requeue(ctx context.Context, cfg protocol.PoolConfig, class string, runners []Instance, until map[string]time.Time) error {
	classCfg := cfg.ResourceClasses[class]
	bodies := make([]string, len(runners))
	for i, inst := range runners {
		bodies[i] = protocol.Message{
			ID: inst.ID, ResourceClass: class, InstanceType: inst.InstanceType, CPU: classCfg.CPU, MemoryMiB: classCfg.MemoryMiB,
			UsageClass: inst.UsageClass, Threshold: protocol.FormatTime(until[inst.ID]), LaunchedAt: inst.LaunchedAt,
			TemplateID: inst.TemplateID, TemplateVersion: inst.TemplateVersion,
		}.Body()
	}
	return sendAll(ctx, c.SQS, cfg.QueueURLs[class], bodies, 0)
}

// handRemovalToken mints one removal token for the runners of ids, for
// the target they registered with (req's), and writes it into their agent
// partitions, before they are told to leave (none for a claim through the
// broker). It returns the runners that
// may go back to the pool: all, unless no token could be had or written;
// then each goes to discards instead, as a release never fails for tokens.
func (c *Claimer) handRemovalToken(ctx context.Context, s *store, cfg protocol.PoolConfig, req Request, ids []string, discards map[string]string) []string {
	if len(ids) == 0 {
		return nil
	}
	// A claim through the broker handed grants: each agent has the pool's
	// broker delete its runner's registration, with no token.
	if req.RegisterWithRepository {
		return ids
	}
	target, err := req.runnerTarget(cfg)
	var tok *runnerToken
	if err == nil {
		tok, err = c.mintToken(ctx, cfg, target, removalToken, req.RunID)
	}
	if err == nil {
		err = s.handToken(ctx, cfg.InstanceARNPrefix, ids, tok)
	}
	if err == nil {
		return ids
	}
	c.log("release: runners cannot deregister from GitHub, terminating them", "run", req.RunID, "error", err.Error())
	for _, id := range ids {
		discards[id] = fmt.Sprintf("cannot deregister from GitHub (%v)", err)
	}
	return nil
}

// discard expires an instance the run holds and terminates it. If the run
// no longer holds it, it is someone else's and is left alone: terminated
// then says which happened.
func (c *Claimer) discard(ctx context.Context, s *store, id, state, runID string) (terminated bool, err error) {
	now := c.now()
	err = s.apply(ctx, id, table.Transition{FromState: state, FromRunID: runID, ToState: state, ToRunID: runID, Threshold: now.Add(-expiredBy)})
	if errors.Is(err, ErrRecordChanged) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("expiring: %w", err)
	}
	// A created instance was launched by the run moments ago, maybe
	// before EC2's API knows it.
	if err := pool.TerminateInstances(ctx, c.EC2, []string{id}, state == protocol.StateCreated); err != nil {
		return false, err
	}
	err = s.apply(ctx, id, table.Transition{FromState: state, FromRunID: runID, ToState: protocol.StateTerminated, ToRunID: runID, Threshold: now, Deadline: table.DeadlinePassed})
	if err != nil && !errors.Is(err, ErrRecordChanged) {
		return true, fmt.Errorf("recording termination: %w", err)
	}
	return true, nil
}

// discardOutcome says what discard did, after why it was called.
func discardOutcome(why string, terminated bool) string {
	if terminated {
		return why + "; terminated"
	}
	return why + "; taken over by someone else meanwhile, left alone"
}

// putReleased writes the marker of the released claim req, which lives
// as long as GitHub lets its run be re-run. It replaces the marker of an
// earlier release of the same run id: the claim it revived was released.
func (s *store) putReleased(ctx context.Context, req Request) error {
	doc, _ := json.Marshal(requestDoc(req)) // cannot fail: plain data
	now := s.now()
	item := protocol.BaseItem(protocol.TypeReleased, req.RunID, protocol.FormatTime(now))
	item[protocol.AttrValue] = str(string(doc))
	item[protocol.AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(github.RerunWindow).Unix(), 10)}
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	if err != nil {
		return fmt.Errorf("writing the released-claim marker of run %s: %w", req.RunID, err)
	}
	return nil
}
