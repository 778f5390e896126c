package claim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The launches of the pool's warm fills (internal/maintenance decides
// what each tier lacks): runners launched for a tier, recorded idle and
// unowned, kept in the tier's slots as releases keep theirs.

// WarmLaunch is what a fill's launch for one tier of a class did.
type WarmLaunch struct {
	Launched []string        // instances launched
	Notes    []string        // what did not go as planned, and why
	Checks   []metrics.Check // the checks of the hot runners launched that failed
}

// WarmHolders lists the runners that hold a slot of the class, by tier,
// as their records say (not those merely settling).
func (t *PoolTable) WarmHolders(ctx context.Context, class string) (map[protocol.Tier][]protocol.Instance, error) {
	s, now := t.s, t.c.now()
	out := map[protocol.Tier][]protocol.Instance{}
	for _, tier := range protocol.Tiers {
		slots, _, err := s.readSlots(ctx, tier, class)
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, sl := range slots {
			ids = append(ids, sl.ID)
		}
		records, err := s.instances(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, key := range slices.Sorted(maps.Keys(slots)) {
			sl := slots[key]
			if r, ok := records[sl.ID]; ok && !protocol.IsPast(sl.Until, now) && holds(tier, r, sl.Until) {
				out[tier] = append(out[tier], r)
			}
		}
	}
	return out, nil
}

// FillStopped launches n stopped runners of class for a fill of the
// pool's warm tiers, from template, and gives them stopped slots; one that
// gets none (another fill was faster) is terminated. It returns how many
// it kept, and says in res what it launched and what did not go as
// planned.
func (t *PoolTable) FillStopped(ctx context.Context, cfg protocol.PoolConfig, class string, n int, template TemplateRef, res *WarmLaunch) (int, error) {
	c, s := t.c, t.s
	fill := "warm-" + newNonce()
	launched, err := c.launchFill(ctx, s, cfg, class, n, fill, template, res)
	if err != nil || len(launched) == 0 {
		return 0, err
	}
	now := c.now()
	runners := make([]keepable, len(launched))
	for i, inst := range launched {
		runners[i] = keepable{id: inst.ID, usageClass: inst.UsageClass, run: fill, ageEnd: ageEnd(inst.LaunchedAt, time.Duration(cfg.MaxRunnerAge))}
	}
	target := cfg.Warm[class]
	kept := c.takeTier(ctx, s, protocol.TierStopped, class, target, runners, func(slot int, r keepable) time.Time {
		return r.capAge(target.SlotEnd(protocol.TierStopped, slot, now, MaxStoppedAge))
	})
	var surplus []string
	var errs []error
	for _, inst := range launched {
		until, ok := kept[inst.ID]
		if !ok {
			surplus = append(surplus, inst.ID)
			continue
		}
		// Idle since its launch: its agent stops it once prepared.
		rec := fillRecord(inst, class, now, now)
		rec.StopUntil = protocol.FormatTime(until)
		if err := s.putCreated(ctx, rec); err != nil {
			surplus = append(surplus, inst.ID)
			errs = append(errs, err)
		}
	}
	if len(surplus) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("class %s: %v launched for the stopped tier found no free slot or record, terminated", class, surplus))
		errs = append(errs, pool.TerminateInstances(context.WithoutCancel(ctx), c.EC2, surplus, true))
	}
	return len(launched) - len(surplus), errors.Join(errs...)
}

// FillHot launches n hot runners of class for a fill of the pool's warm
// tiers, from template, waits until they are ready, and releases the ready
// ones into the pool as a release would (hot slots first); the others are
// terminated. It returns how many took a hot slot, and says in res what it
// launched, what did not go as planned and the checks that failed.
func (pt *PoolTable) FillHot(ctx context.Context, cfg protocol.PoolConfig, class string, n int, template TemplateRef, t Timings, res *WarmLaunch) (int, error) {
	c, s := pt.c, pt.s
	fill := "warm-" + newNonce()
	launched, err := c.launchFill(ctx, s, cfg, class, n, fill, template, res)
	if err != nil || len(launched) == 0 {
		return 0, err
	}
	now := c.now()
	var errs []error
	var recorded []Instance
	for _, inst := range launched {
		// Not in the queue until ready; ends itself if nobody finishes it.
		if err := s.putCreated(ctx, fillRecord(inst, class, now, now.Add(CreatedLifetime))); err != nil {
			errs = append(errs, err, pool.TerminateInstances(context.WithoutCancel(ctx), c.EC2, []string{inst.ID}, true))
			continue
		}
		recorded = append(recorded, inst)
	}
	watch := newAgentWatch(s, cfg.InstanceARNPrefix)
	for _, inst := range recorded {
		watch.add(inst.ID, t.FleetValidationWait, prepared(fill, t.FleetValidationWait, t))
	}
	decided, err := watch.wait(ctx, t.PollInterval)
	if err != nil {
		errs = append(errs, err)
	}
	var ready []returningRunner
	for _, inst := range recorded {
		why, ok := decided[inst.ID]
		if ok && why == nil {
			ready = append(ready, returningRunner{inst: inst, state: protocol.StateIdle})
			continue
		}
		if why == nil {
			why = err
		}
		res.Checks = append(res.Checks, metrics.Check{Instance: inst.ID, Reason: checkReason(why)})
		res.Notes = append(res.Notes, fmt.Sprintf("class %s: %s launched for the hot tier was not ready (%v), terminated", class, inst.ID, why))
		if _, derr := c.discard(context.WithoutCancel(ctx), s, inst.ID, protocol.StateIdle, ""); derr != nil {
			errs = append(errs, derr)
		}
	}
	// Released into the pool as a release would, with no run to leave.
	plans, results := c.backToIdle(ctx, s, cfg, class, fill, "", ready)
	var idle []Instance
	until := map[string]time.Time{}
	var unkept []string
	kept := 0
	for i, r := range ready {
		id := r.inst.ID
		if results[i] != nil {
			errs = append(errs, fmt.Errorf("instance %s: %w", id, results[i]))
			continue
		}
		if plans[id].tier == protocol.TierHot {
			kept++
		} else {
			unkept = append(unkept, id)
		}
		idle = append(idle, r.inst)
		until[id] = plans[id].threshold
	}
	if len(unkept) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("class %s: %v launched for the hot tier got no hot slot (another fill or release filled the tier meanwhile, or writing its slots failed), released to the pool as idle runners", class, unkept))
	}
	if err := c.requeue(ctx, cfg, class, idle, until); err != nil {
		errs = append(errs, err)
	}
	return kept, errors.Join(errs...)
}

// fillRecord is the record of a runner a fill launched: idle and unowned
// from the start, until threshold.
func fillRecord(inst Instance, class string, now, threshold time.Time) protocol.Instance {
	return protocol.Instance{
		ID: inst.ID, State: protocol.StateIdle, Threshold: protocol.FormatTime(threshold), ResourceClass: class,
		InstanceType: inst.InstanceType, UsageClass: inst.UsageClass, UpdatedAt: protocol.FormatTime(now),
		LaunchedAt: inst.LaunchedAt, TemplateID: inst.TemplateID, TemplateVersion: inst.TemplateVersion,
	}
}

// launchFill launches up to n on-demand runners of class for fill (their
// InitialRunId tag), with one instant fleet; they have no record yet. If
// CreateFleet fails it may still have launched some: those are terminated.
func (c *Claimer) launchFill(ctx context.Context, s *store, cfg protocol.PoolConfig, class string, n int, fill string, template TemplateRef, res *WarmLaunch) ([]Instance, error) {
	req := Request{Pool: cfg.Name, RunID: fill, InstanceCount: n, ResourceClass: class, UsageClass: protocol.UsageOnDemand, AllowedTypes: []string{"*"}}
	in, err := c.fleetRequest(ctx, req, cfg, cfg.ResourceClasses[class], n, clientToken(req, fill, protocol.UsageOnDemand, 0, n))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), launchBudget)
	defer cancel()
	out, err := c.EC2.CreateFleet(ctx, in)
	if err != nil {
		if _, terr := c.terminateUnrecorded(ctx, s, cfg.Name, fill); terr != nil {
			err = fmt.Errorf("%w; and: %v", err, terr)
		}
		return nil, fmt.Errorf("CreateFleet: %w", err)
	}
	launchedAt := protocol.FormatTime(c.now())
	var launched []Instance
	for _, group := range out.Instances {
		for _, id := range group.InstanceIds {
			launched = append(launched, Instance{ID: id, InstanceType: string(group.InstanceType), UsageClass: protocol.UsageOnDemand,
				Source: SourceFleet, LaunchedAt: launchedAt, TemplateID: template.ID, TemplateVersion: template.Version})
			res.Launched = append(res.Launched, id)
		}
	}
	c.tellRunnerRelease(ctx, s, cfg, instanceIDs(launched))
	if len(launched) < n {
		res.Notes = append(res.Notes, fmt.Sprintf("class %s: CreateFleet launched %d of %d (%s)", class, len(launched), n, fleetErrors(out.Errors)))
	}
	return launched, nil
}
