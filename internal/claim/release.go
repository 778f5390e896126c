package claim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Release gives a claim's runners back to the pool: each goes running ->
// idle, and once its agent confirms it left the run, its message goes back
// to the queue with its new idle deadline. A runner that does not confirm,
// or whose runtime ran out, is terminated instead. Releasing a released
// claim does nothing. Outcomes say what happened to each instance.
func (c *Claimer) Release(ctx context.Context, poolName, runID string) ([]string, error) {
	s := c.store(poolName)
	defer c.reapAlongside(ctx, poolName)()
	rec, ok, err := s.readRecord(ctx, poolName, runID)
	if !ok || err != nil {
		return nil, ignoreMissingPool(err)
	}
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
	if err != nil {
		return nil, err
	}
	// The agents deregister with the removal token. Without a valid one
	// they cannot, and are terminated instead: never block a release.
	if err := c.ensureTokens(ctx, s, cfg); err != nil {
		c.log("releasing without fresh GitHub tokens: runners that cannot deregister are terminated", "error", err.Error())
	}
	outcomes, err := c.releaseAll(ctx, s, cfg, rec.Request, rec.OwnedIDs)
	if err != nil {
		return outcomes, err // the record stays: a retried destroy picks up the rest
	}
	return outcomes, s.deleteRecord(ctx, runID)
}

// ignoreMissingPool: a claim in a deleted pool has nothing left to release.
func ignoreMissingPool(err error) error {
	if errors.Is(err, pool.ErrNotFound) || isTableMissing(err) {
		return nil
	}
	return err
}

// settleItem is one instance to give back or terminate.
type settleItem struct {
	id, state, instanceType, usageClass string
	terminate                           bool
	// resumeUntil: already idle until then, its message maybe not sent.
	resumeUntil string
}

// releaseAll settles the instances of ids still held by req's run, as their
// records say: claimed or running ones go back to the pool, created ones
// (launched by an attempt that never finished) are terminated.
func (c *Claimer) releaseAll(ctx context.Context, s *store, cfg protocol.PoolConfig, req Request, ids []string) ([]string, error) {
	records, err := s.instances(ctx, ids)
	if err != nil {
		return nil, err
	}
	var items []settleItem
	var outcomes []string
	for _, id := range ids {
		r, ok := records[id]
		switch {
		case ok && r.State == protocol.StateIdle && r.RunID == "":
			// Given back by an earlier release of this run that died before
			// sending its message, if no run took it since.
			st, err := s.agent(ctx, id)
			if err != nil {
				return nil, err
			}
			if st.signal.RunID != req.RunID {
				outcomes = append(outcomes, id+": no longer held by the run")
				continue
			}
			items = append(items, settleItem{id: id, state: r.State, instanceType: r.InstanceType, usageClass: r.UsageClass, resumeUntil: r.Threshold})
		case !ok || r.RunID != req.RunID || r.State == protocol.StateTerminated || r.State == protocol.StateIdle:
			outcomes = append(outcomes, id+": no longer held by the run")
		default:
			items = append(items, settleItem{id: id, state: r.State, instanceType: r.InstanceType, usageClass: r.UsageClass, terminate: r.State == protocol.StateCreated})
		}
	}
	settled, err := c.settleAll(ctx, s, cfg, req, items)
	return append(outcomes, settled...), err
}

// releaseHeld settles what a failed attempt holds: warm runners go back to
// the pool, runners it launched are terminated.
func (c *Claimer) releaseHeld(ctx context.Context, s *store, cfg protocol.PoolConfig, req Request, held map[string]*held) ([]string, error) {
	items := make([]settleItem, 0, len(held))
	for id, h := range held {
		items = append(items, settleItem{id: id, state: h.state, instanceType: h.inst.InstanceType, usageClass: h.inst.UsageClass, terminate: h.inst.Source == SourceFleet})
	}
	return c.settleAll(ctx, s, cfg, req, items)
}

// settleAll settles instances concurrently and reports each outcome.
func (c *Claimer) settleAll(ctx context.Context, s *store, cfg protocol.PoolConfig, req Request, items []settleItem) ([]string, error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes []string
		errs     []error
	)
	for _, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcome, err := c.settle(ctx, s, cfg, req, it)
			if err == nil {
				err = s.dropOwned(ctx, req.RunID, it.id)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("instance %s: %w", it.id, err))
				return
			}
			outcomes = append(outcomes, it.id+": "+outcome)
		}()
	}
	wg.Wait()
	sort.Strings(outcomes)
	return outcomes, errors.Join(errs...)
}

func (c *Claimer) settle(ctx context.Context, s *store, cfg protocol.PoolConfig, req Request, it settleItem) (string, error) {
	if it.terminate {
		terminated, err := c.discard(ctx, s, it.id, it.state, req.RunID)
		if err != nil {
			return "", err
		}
		return discardOutcome("launched for the run", terminated), nil
	}
	idleUntil := c.now().Add(time.Duration(cfg.IdleTimeout))
	var err error
	if it.resumeUntil != "" {
		if idleUntil, err = protocol.ParseTime(it.resumeUntil); err != nil {
			return "", err
		}
	} else {
		err = s.apply(ctx, it.id, transition{
			fromState: it.state, fromRunID: req.RunID, toState: protocol.StateIdle, toRunID: "",
			threshold: idleUntil, deadline: "live",
		})
	}
	if errors.Is(err, errConditionFailed) {
		r, ok, err := s.instance(ctx, it.id)
		if err != nil {
			return "", err
		}
		if !ok || r.RunID != req.RunID || r.State == protocol.StateTerminated {
			return "no longer held by the run", nil
		}
		terminated, err := c.discard(ctx, s, it.id, r.State, req.RunID)
		if err != nil {
			return "", err
		}
		return discardOutcome("its deadline had passed", terminated), nil
	}
	if err != nil {
		return "", err
	}
	if err := c.waitReleased(ctx, s, it.id, req.RunID, req.Timings); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("idle but not yet back in the queue (it terminates itself after its idle deadline): %w", ctx.Err())
		}
		terminated, derr := c.discard(ctx, s, it.id, protocol.StateIdle, "")
		if derr != nil {
			return "", derr
		}
		return discardOutcome(fmt.Sprintf("did not confirm its release (%v)", err), terminated), nil
	}
	class := cfg.ResourceClasses[req.ResourceClass]
	msg := protocol.Message{
		ID: it.id, ResourceClass: req.ResourceClass, InstanceType: it.instanceType, CPU: class.CPU, MemoryMiB: class.MemoryMiB,
		UsageClass: it.usageClass, Threshold: protocol.FormatTime(idleUntil), // the new idle deadline, not the old running one
	}
	if err := sendAll(ctx, c.SQS, cfg.QueueURLs[req.ResourceClass], []string{msg.Body()}, 0); err != nil {
		return "", err
	}
	return "released to the pool", nil
}

// discard expires an instance the run holds and terminates it. If the run
// no longer holds it, it is someone else's and is left alone: terminated
// then says which happened.
func (c *Claimer) discard(ctx context.Context, s *store, id, state, runID string) (terminated bool, err error) {
	now := c.now()
	err = s.apply(ctx, id, transition{fromState: state, fromRunID: runID, toState: state, toRunID: runID, threshold: now.Add(-expiredBy)})
	if errors.Is(err, errConditionFailed) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("expiring: %w", err)
	}
	if err := pool.TerminateInstances(ctx, c.EC2, []string{id}); err != nil {
		return false, err
	}
	err = s.apply(ctx, id, transition{fromState: state, fromRunID: runID, toState: protocol.StateTerminated, toRunID: runID, threshold: now, deadline: "passed"})
	if err != nil && !errors.Is(err, errConditionFailed) {
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
