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

// TierCounts are a class's warm runners, the holders of its slots, against
// the targets in force.
type TierCounts struct {
	Hot, HotTarget, Stopped, StoppedTarget int
}

// Lacks tells whether a tier is below its target.
func (t TierCounts) Lacks() bool { return t.Hot < t.HotTarget || t.Stopped < t.StoppedTarget }

// WarmStatus counts the warm runners of every class with targets.
func (c *Claimer) WarmStatus(ctx context.Context, poolName string) (map[string]TierCounts, error) {
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
	if err != nil {
		return nil, err
	}
	s := c.store(poolName)
	out := map[string]TierCounts{}
	for _, class := range slices.Sorted(maps.Keys(cfg.Warm)) {
		held, err := c.warmHolders(ctx, s, cfg, class)
		if err != nil {
			return nil, err
		}
		out[class] = countTiers(cfg.Warm[class], held, c.now())
	}
	return out, nil
}

func countTiers(target protocol.WarmTarget, held map[protocol.Tier][]protocol.Instance, now time.Time) TierCounts {
	return TierCounts{
		Hot: len(held[protocol.TierHot]), HotTarget: target.At(protocol.TierHot, now),
		Stopped: len(held[protocol.TierStopped]), StoppedTarget: target.At(protocol.TierStopped, now),
	}
}

// warmHolders lists the runners that hold a slot of the class, by tier, as
// their records say (not those merely settling).
func (c *Claimer) warmHolders(ctx context.Context, s *store, cfg protocol.PoolConfig, class string) (map[protocol.Tier][]protocol.Instance, error) {
	now := c.now()
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

// WarmResult says what a fill did.
type WarmResult struct {
	// Before and After are each class's counts before the fill and as it
	// left them (its hot runners counted once ready; its stopped ones at
	// once: they stop themselves once prepared).
	Before, After map[string]TierCounts
	Launched      []string // instances launched
	Retired       []string // warm runners of an outdated template or too old, terminated
	Notes         []string // what did not go as planned, and why
	// Short are the classes the fill left below a target it was to fill
	// (within WarmOptions), each with why: what kept it from launching
	// (the launch template check, CreateFleet's error or its errors), or
	// from keeping what it launched (runners not ready, no slot). Its
	// notes and its error, if any, are among the reasons.
	Short map[string][]string
	// checks are the checks runners it launched failed, by class.
	checks map[string][]metrics.Check
}

// WarmOptions bound a fill.
type WarmOptions struct {
	// Tiers to fill (nil: all).
	Tiers []protocol.Tier
	// Most runners launched per class and tier (0: no limit).
	Most int
	// Timings: how long a hot runner may take to be ready (its
	// FleetValidationWait) and how often its agent is read.
	Timings Timings
}

func (o WarmOptions) fills(tier protocol.Tier) bool {
	return o.Tiers == nil || slices.Contains(o.Tiers, tier)
}

// Warm fills the pool's warm targets now, class by class: it retires warm
// runners of an outdated launch template or past the maximum runner age,
// then launches what each tier lacks (on-demand, from the pool's fleet
// settings). Stopped runners are launched with their stopped time: they
// prepare, register nothing, and stop themselves. Hot runners are launched
// and waited for (UD_OK and a heartbeat, up to the fleet validation wait);
// the ready ones take the hot slots free by then and join the queue, the
// others are terminated. The slots decide, as for releases: two fills at
// once never keep more than the targets (a surplus stopped runner is
// terminated at once, a surplus hot one idles for the idle timeout).
func (c *Claimer) Warm(ctx context.Context, poolName string, opts WarmOptions) (WarmResult, error) {
	res := WarmResult{Before: map[string]TierCounts{}, After: map[string]TierCounts{}, Short: map[string][]string{}}
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
	if err != nil {
		return res, err
	}
	s := c.store(poolName)
	var errs []error
	for _, class := range slices.Sorted(maps.Keys(cfg.Warm)) {
		if err := c.warmClass(ctx, s, cfg, class, opts, &res); err != nil {
			errs = append(errs, fmt.Errorf("class %s: %w", class, err))
		}
	}
	c.publishFill(ctx, s, cfg, res)
	return res, errors.Join(errs...)
}

// publishFill reports the checks the fill's runners failed and, as it
// scans the pool anyway, its runners by class and state.
func (c *Claimer) publishFill(ctx context.Context, s *store, cfg protocol.PoolConfig, res WarmResult) {
	if !metricsTarget(cfg).Enabled() {
		return
	}
	now := c.now()
	var events []metrics.Event
	for _, class := range slices.Sorted(maps.Keys(res.checks)) {
		events = append(events, metrics.CheckEvents(cfg.Name, class, res.checks[class], now)...)
	}
	if records, _, err := s.allInstances(ctx); err != nil {
		c.log("counting the pool's runners for its metrics failed", "pool", cfg.Name, "error", err.Error())
	} else {
		events = append(events, RunnerStates(cfg, records, nil, now).Events(now)...)
	}
	c.Publish(ctx, cfg, events)
}

func (c *Claimer) warmClass(ctx context.Context, s *store, cfg protocol.PoolConfig, class string, opts WarmOptions, res *WarmResult) (err error) {
	target := cfg.Warm[class]
	held, err := c.warmHolders(ctx, s, cfg, class)
	if err != nil {
		return err
	}
	firstNote := len(res.Notes)
	res.Before[class] = countTiers(target, held, c.now())
	lt, current, templateErr := c.currentTemplate(ctx, cfg)
	retired := map[string]string{}
	for tier, insts := range held {
		kept := insts[:0]
		for _, r := range insts {
			if why := retirement(r.LaunchedAt, launchedFrom(r.TemplateID, r.TemplateVersion), current, time.Duration(cfg.MaxRunnerAge), c.now()); why != "" {
				retired[r.ID] = why
			} else {
				kept = append(kept, r)
			}
		}
		held[tier] = kept
	}
	for _, id := range slices.Sorted(maps.Keys(retired)) {
		terminated, err := c.discard(ctx, s, id, protocol.StateIdle, "")
		if err != nil {
			return fmt.Errorf("retiring %s: %w", id, err)
		}
		if terminated {
			res.Retired = append(res.Retired, id)
		}
	}
	after := countTiers(target, held, c.now())
	lack := func(have, want int) int {
		n := max(0, want-have)
		if opts.Most > 0 {
			n = min(n, opts.Most)
		}
		return n
	}
	// What the fill is to launch in each tier it fills.
	var stoppedLack, hotLack int
	if opts.fills(protocol.TierStopped) {
		stoppedLack = lack(after.Stopped, after.StoppedTarget)
	}
	if opts.fills(protocol.TierHot) {
		hotLack = lack(after.Hot, after.HotTarget)
	}
	goal := TierCounts{Hot: after.Hot + hotLack, Stopped: after.Stopped + stoppedLack}
	defer func() {
		res.After[class] = after
		if after.Hot < goal.Hot || after.Stopped < goal.Stopped {
			res.Short[class] = shortfall(class, after, goal, res.Notes[firstNote:], err)
		}
	}()
	if stoppedLack == 0 && hotLack == 0 {
		return nil
	}
	if cfg.Fleet == nil {
		res.Notes = append(res.Notes, fmt.Sprintf("class %s: pool %s has no fleet settings to launch its warm runners", class, cfg.Name))
		return nil
	}
	if templateErr != nil {
		return templateErr
	}
	template, err := checkTemplateTag(lt, cfg.Name, cfg.Fleet)
	if err != nil {
		return err
	}
	var errs []error
	if stoppedLack > 0 {
		kept, err := c.fillStopped(ctx, s, cfg, class, stoppedLack, template, res)
		after.Stopped += kept
		errs = append(errs, err)
	}
	if hotLack > 0 {
		kept, err := c.fillHot(ctx, s, cfg, class, hotLack, template, opts.Timings, res)
		after.Hot += kept
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// shortfall says why a fill left class with fewer runners than its goal:
// the notes it wrote on the way and its error, or, if it said nothing,
// the counts.
func shortfall(class string, after, goal TierCounts, notes []string, err error) []string {
	why := slices.Clone(notes)
	if err != nil {
		why = append(why, fmt.Sprintf("class %s: %v", class, err))
	}
	if len(why) == 0 {
		why = append(why, fmt.Sprintf("class %s: the fill left %d of %d hot and %d of %d stopped runners (the provider's log says more)",
			class, after.Hot, goal.Hot, after.Stopped, goal.Stopped))
	}
	return why
}

// fillStopped launches n stopped runners of class and gives them stopped
// slots; one that gets none (another fill was faster) is terminated.
func (c *Claimer) fillStopped(ctx context.Context, s *store, cfg protocol.PoolConfig, class string, n int, template TemplateRef, res *WarmResult) (int, error) {
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

// fillHot launches n hot runners of class, waits until they are ready, and
// releases the ready ones into the pool as a release would (hot slots
// first); the others are terminated.
func (c *Claimer) fillHot(ctx context.Context, s *store, cfg protocol.PoolConfig, class string, n int, template TemplateRef, t Timings, res *WarmResult) (int, error) {
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
		if res.checks == nil {
			res.checks = map[string][]metrics.Check{}
		}
		res.checks[class] = append(res.checks[class], metrics.Check{Instance: inst.ID, Reason: checkReason(why)})
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
func (c *Claimer) launchFill(ctx context.Context, s *store, cfg protocol.PoolConfig, class string, n int, fill string, template TemplateRef, res *WarmResult) ([]Instance, error) {
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
