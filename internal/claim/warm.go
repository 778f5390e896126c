package claim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// warmSlot is one place of a class's target in a tier, held by a runner
// kept in that tier until its deadline.
type warmSlot struct {
	ID    string `json:"id"`
	Until string `json:"until"`
	Taken string `json:"taken"`
	// Run is the run the runner's record named when the slot was taken
	// (the run releasing it, or the fill that launched it): until its
	// keeper makes it idle, the record still names it.
	Run string `json:"run"`
}

// slotSettling is how long a slot is held for a runner whose release took
// it but may not have made it idle yet (the idle write follows at once).
const slotSettling = time.Minute

// MaxStoppedAge bounds how long one decision keeps a runner stopped, as
// protocol.MaxHotAge bounds a hot one: stopped runners cost only their
// volumes, so a week carries a pool over a weekend.
const MaxStoppedAge = 7 * 24 * time.Hour

// slotsID names the lease item of a class's slots in tier (TYPE#LEASE).
func slotsID(tier protocol.Tier, class string) string { return "warm-" + string(tier) + "-" + class }

// holds tells whether runner r, as its record says, still holds a slot of
// tier ending at until: idle, unowned, with that deadline (a claim took it
// or it is gone otherwise).
func holds(tier protocol.Tier, r protocol.Instance, until string) bool {
	if r.State != protocol.StateIdle || r.RunID != "" {
		return false
	}
	if tier == protocol.TierStopped {
		return r.StopUntil == until
	}
	return r.Threshold == until
}

// keepTries bounds the optimistic rounds of keepWarm under contention.
const keepTries = 5

// plan is what happens to a runner given back to the pool: it is idle,
// running, until threshold; then, when stopUntil is set, it stops and waits
// in the pool until stopUntil; else it terminates.
type plan struct {
	threshold, stopUntil time.Time
	tier                 protocol.Tier // the tier whose target keeps it; "" none
}

// outcome says what the plan does with a runner released to the pool.
func (p plan) outcome() string {
	switch p.tier {
	case protocol.TierHot:
		return "released to the pool, kept hot until " + protocol.FormatTime(p.threshold)
	case protocol.TierStopped:
		return "released to the pool, idle until " + protocol.FormatTime(p.threshold) + ", then kept stopped until " + protocol.FormatTime(p.stopUntil)
	}
	return "released to the pool"
}

// keepable is a runner about to go idle, as keepWarm needs to know it.
type keepable struct {
	id, usageClass string
	run            string    // the run its record names while its keeper writes it
	ageEnd         time.Time // when it reaches the pool's maximum runner age; zero: never
}

// capAge is t, or the runner's maximum age if that comes first.
func (r keepable) capAge(t time.Time) time.Time {
	if !r.ageEnd.IsZero() && r.ageEnd.Before(t) {
		return r.ageEnd
	}
	return t
}

// keepWarm plans the runners of class about to go idle. Each tier's target
// is a set of slots (SlotEnd: slot i lives while the target exceeds i); a
// runner takes the lowest free slot below the target in force now. Hot
// slots go first: such a runner stays idle, running, until its slot ends.
// Then on-demand runners (Spot instances cannot be stopped) take the
// stopped slots: idle for the pool's idle timeout, then stopped until the
// slot ends. The others are idle for the idle timeout. No deadline outlives
// a runner's maximum age, and none is shorter than the idle timeout.
//
// A tier's slots are one item written on condition that it is unchanged
// since read, so two releases never keep more runners than the target. A
// slot is free when no runner holds it (holds), or its deadline passed,
// unless it is settling (heldSlots): its release may not have made the
// runner idle yet. A failure keeps nothing in that tier: the runners go on
// to the next, or idle as usual.
func (c *Claimer) keepWarm(ctx context.Context, s *store, cfg protocol.PoolConfig, class string, runners []keepable) map[string]plan {
	now := c.now()
	idleUntil := now.Add(time.Duration(cfg.IdleTimeout))
	plans := make(map[string]plan, len(runners))
	for _, r := range runners {
		plans[r.id] = plan{threshold: idleUntil}
	}
	target, ok := cfg.Warm[class]
	if !ok || len(runners) == 0 {
		return plans
	}
	hot := c.takeTier(ctx, s, protocol.TierHot, class, target, runners, func(slot int, r keepable) time.Time {
		return later(r.capAge(target.SlotEnd(protocol.TierHot, slot, now, protocol.MaxHotAge)), idleUntil)
	})
	var stoppable []keepable
	for _, r := range runners {
		if until, ok := hot[r.id]; ok {
			plans[r.id] = plan{threshold: until, tier: protocol.TierHot}
		} else if r.usageClass == protocol.UsageOnDemand {
			stoppable = append(stoppable, r)
		}
	}
	stopped := c.takeTier(ctx, s, protocol.TierStopped, class, target, stoppable, func(slot int, r keepable) time.Time {
		return later(r.capAge(target.SlotEnd(protocol.TierStopped, slot, now, MaxStoppedAge)), idleUntil)
	})
	for id, until := range stopped {
		plans[id] = plan{threshold: idleUntil, stopUntil: until, tier: protocol.TierStopped}
	}
	return plans
}

// takeTier gives runners the free slots of tier below its target in force
// now, retrying when another writer changed the slots meanwhile, and
// returns each kept runner's slot deadline.
func (c *Claimer) takeTier(ctx context.Context, s *store, tier protocol.Tier, class string, target protocol.WarmTarget,
	runners []keepable, until func(slot int, r keepable) time.Time) map[string]time.Time {
	for range keepTries {
		now := c.now()
		n := target.At(tier, now)
		if n == 0 || len(runners) == 0 {
			return nil
		}
		kept, err := s.takeSlots(ctx, tier, class, runners, n, now, until)
		if errors.Is(err, ErrRecordChanged) {
			continue // another writer changed the slots meanwhile
		}
		if err != nil {
			c.log("release: keeping runners warm failed; they go idle as usual", "class", class, "tier", string(tier), "error", err.Error())
			return nil
		}
		return kept
	}
	c.log("release: the warm slots kept changing; the runners go idle as usual", "class", class, "tier", string(tier))
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// takeSlots gives runners the free slots of tier below target, in order,
// with the deadlines until gives, in one conditional write of the slots
// item, as of now.
func (s *store) takeSlots(ctx context.Context, tier protocol.Tier, class string, runners []keepable, target int, now time.Time,
	until func(slot int, r keepable) time.Time) (map[string]time.Time, error) {
	slots, prev, err := s.readSlots(ctx, tier, class)
	if err != nil {
		return nil, err
	}
	held, err := s.heldSlots(ctx, tier, slots, now)
	if err != nil {
		return nil, err
	}
	kept := map[string]time.Time{}
	for i, next := 0, 0; i < target && next < len(runners); i++ {
		key := strconv.Itoa(i)
		if held[key] {
			continue
		}
		r := runners[next]
		deadline := until(i, r)
		slots[key] = warmSlot{ID: r.id, Until: protocol.FormatTime(deadline), Taken: protocol.FormatTime(now), Run: r.run}
		kept[r.id] = deadline
		next++
	}
	if len(kept) == 0 {
		return nil, nil
	}
	doc, _ := json.Marshal(slots) // plain data
	item := protocol.BaseItem(protocol.TypeLease, slotsID(tier, class), protocol.FormatTime(now))
	item[protocol.AttrValue] = str(string(doc))
	if _, err := s.db.PutItem(ctx, table.PutSlots(s.table, item, prev)); err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return nil, ErrRecordChanged
		}
		return nil, fmt.Errorf("writing the %s slots of %s: %w", tier, class, err)
	}
	return kept, nil
}

// readSlots reads the slots of class in tier (consistently), and the item's
// value as read ("" when there is none), which a write is conditional on.
func (s *store) readSlots(ctx context.Context, tier protocol.Tier, class string) (map[string]warmSlot, string, error) {
	key := protocol.Key(protocol.TypeLease, slotsID(tier, class))
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, "", fmt.Errorf("reading the %s slots of %s: %w", tier, class, err)
	}
	prev := protocol.StringAttr(out.Item, protocol.AttrValue)
	slots := map[string]warmSlot{}
	if prev != "" {
		if err := json.Unmarshal([]byte(prev), &slots); err != nil {
			return nil, "", fmt.Errorf("the %s slots of %s are not valid: %w", tier, class, err)
		}
	}
	return slots, prev, nil
}

// heldSlots tells which of slots are held at now: by a runner whose record
// says it still holds it, or settling: taken less than slotSettling ago by
// a keeper that has not made the runner idle yet (its record, if any, still
// names the run it named then). Times cannot tell: records and slots are
// stamped to the second, and a claim can take the runner in the second its
// keeper made it idle.
func (s *store) heldSlots(ctx context.Context, tier protocol.Tier, slots map[string]warmSlot, now time.Time) (map[string]bool, error) {
	var holders []string
	for _, sl := range slots {
		holders = append(holders, sl.ID)
	}
	records, err := s.instances(ctx, holders)
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for key, sl := range slots {
		if protocol.IsPast(sl.Until, now) {
			continue
		}
		r, ok := records[sl.ID]
		settling := !protocol.IsPast(sl.Taken, now.Add(-slotSettling)) && (!ok || (r.RunID == sl.Run && r.State != protocol.StateIdle && r.State != protocol.StateTerminated))
		if settling || (ok && holds(tier, r, sl.Until)) {
			held[key] = true
		}
	}
	return held, nil
}
