package maintenance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
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
func WarmStatus(ctx context.Context, c *claim.Claimer, poolName string) (map[string]TierCounts, error) {
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
	if err != nil {
		return nil, err
	}
	s := c.PoolTable(poolName)
	out := map[string]TierCounts{}
	for _, class := range slices.Sorted(maps.Keys(cfg.Warm)) {
		held, err := s.WarmHolders(ctx, class)
		if err != nil {
			return nil, err
		}
		out[class] = countTiers(cfg.Warm[class], held, nowOf(c))
	}
	return out, nil
}

func countTiers(target protocol.WarmTarget, held map[protocol.Tier][]protocol.Instance, now time.Time) TierCounts {
	return TierCounts{
		Hot: len(held[protocol.TierHot]), HotTarget: target.At(protocol.TierHot, now),
		Stopped: len(held[protocol.TierStopped]), StoppedTarget: target.At(protocol.TierStopped, now),
	}
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
	Timings claim.Timings
}

// add records what a launch for class did.
func (r *WarmResult) add(class string, l claim.WarmLaunch) {
	r.Launched = append(r.Launched, l.Launched...)
	r.Notes = append(r.Notes, l.Notes...)
	if len(l.Checks) > 0 {
		if r.checks == nil {
			r.checks = map[string][]metrics.Check{}
		}
		r.checks[class] = append(r.checks[class], l.Checks...)
	}
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
func Warm(ctx context.Context, c *claim.Claimer, poolName string, opts WarmOptions) (WarmResult, error) {
	res := WarmResult{Before: map[string]TierCounts{}, After: map[string]TierCounts{}, Short: map[string][]string{}}
	cfg, err := pool.ReadConfig(ctx, c.DynamoDB, poolName)
	if err != nil {
		return res, err
	}
	s := c.PoolTable(poolName)
	var errs []error
	for _, class := range slices.Sorted(maps.Keys(cfg.Warm)) {
		if err := warmClass(ctx, c, s, cfg, class, opts, &res); err != nil {
			errs = append(errs, fmt.Errorf("class %s: %w", class, err))
		}
	}
	publishFill(ctx, c, s, cfg, res)
	return res, errors.Join(errs...)
}

// publishFill reports the checks the fill's runners failed and, as it
// scans the pool anyway, its runners by class and state.
func publishFill(ctx context.Context, c *claim.Claimer, s *claim.PoolTable, cfg protocol.PoolConfig, res WarmResult) {
	if !claim.MetricsTarget(cfg).Enabled() {
		return
	}
	now := nowOf(c)
	var events []metrics.Event
	for _, class := range slices.Sorted(maps.Keys(res.checks)) {
		events = append(events, metrics.CheckEvents(cfg.Name, class, res.checks[class], now)...)
	}
	if records, _, err := s.Instances(ctx); err != nil {
		log(c, "counting the pool's runners for its metrics failed", "pool", cfg.Name, "error", err.Error())
	} else {
		events = append(events, runnerStates(cfg, records, nil, now).Events(now)...)
	}
	c.Publish(ctx, cfg, events)
}

func warmClass(ctx context.Context, c *claim.Claimer, s *claim.PoolTable, cfg protocol.PoolConfig, class string, opts WarmOptions, res *WarmResult) (err error) {
	target := cfg.Warm[class]
	held, err := s.WarmHolders(ctx, class)
	if err != nil {
		return err
	}
	firstNote := len(res.Notes)
	res.Before[class] = countTiers(target, held, nowOf(c))
	lt, current, templateErr := c.CurrentTemplate(ctx, cfg)
	retired := map[string]string{}
	for tier, insts := range held {
		kept := insts[:0]
		for _, r := range insts {
			if why := claim.Retirement(r.LaunchedAt, claim.TemplateRef{ID: r.TemplateID, Version: r.TemplateVersion}, current, time.Duration(cfg.MaxRunnerAge), nowOf(c)); why != "" {
				retired[r.ID] = why
			} else {
				kept = append(kept, r)
			}
		}
		held[tier] = kept
	}
	for _, id := range slices.Sorted(maps.Keys(retired)) {
		terminated, err := s.Discard(ctx, id, protocol.StateIdle, "")
		if err != nil {
			return fmt.Errorf("retiring %s: %w", id, err)
		}
		if terminated {
			res.Retired = append(res.Retired, id)
		}
	}
	after := countTiers(target, held, nowOf(c))
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
	template, err := claim.CheckTemplateTag(lt, cfg.Name, cfg.Fleet)
	if err != nil {
		return err
	}
	var errs []error
	if stoppedLack > 0 {
		var launch claim.WarmLaunch
		kept, err := s.FillStopped(ctx, cfg, class, stoppedLack, template, &launch)
		res.add(class, launch)
		after.Stopped += kept
		errs = append(errs, err)
	}
	if hotLack > 0 {
		var launch claim.WarmLaunch
		kept, err := s.FillHot(ctx, cfg, class, hotLack, template, opts.Timings, &launch)
		res.add(class, launch)
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
