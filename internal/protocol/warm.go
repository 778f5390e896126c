package protocol

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // schedules name time zones; not every host has a zoneinfo database
)

// Tier is a kind of warm capacity: hot runners are idle and running, in
// their class's queue; stopped runners are idle on-demand runners whose
// instance is stopped, started again by the claim that takes them.
type Tier string

// The tiers, in the order a claim takes from them.
const (
	TierHot     Tier = "hot"
	TierStopped Tier = "stopped"
)

// Tiers lists every tier.
var Tiers = []Tier{TierHot, TierStopped}

// WarmTarget is how many idle runners of a class the pool keeps in each
// tier: Hot and Stopped outside the schedule's windows; inside one, the
// window's target of a tier where it sets one (the highest where windows
// overlap), the base target where it does not.
type WarmTarget struct {
	Hot      int          `json:"hot"`
	Stopped  int          `json:"stopped,omitempty"`
	Schedule []WarmWindow `json:"schedule,omitempty"`
}

// WarmWindow is a weekly window: on Days, from From to To (HH:MM, To after
// From) in TimeZone, with targets of its own for the tiers it sets (nil:
// the base target holds).
type WarmWindow struct {
	Days     []string `json:"days"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	TimeZone string   `json:"timeZone"`
	Hot      *int     `json:"hot,omitempty"`
	Stopped  *int     `json:"stopped,omitempty"`
}

func (t WarmTarget) of(tier Tier) int {
	if tier == TierStopped {
		return t.Stopped
	}
	return t.Hot
}

// of is the window's target of tier, nil when it sets none.
func (w WarmWindow) of(tier Tier) *int {
	if tier == TierStopped {
		return w.Stopped
	}
	return w.Hot
}

// Count is a window's target of a tier, n.
func Count(n int) *int { return &n }

// WeekDays are the day names a window takes, Sunday first as time.Weekday.
var WeekDays = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// MaxHotAge bounds how long one decision keeps a runner hot: it is kept
// again only when it is released again, so a runner nobody uses does not
// run on for ever. Stopped runners, which cost only their volumes, are
// kept up to the pool's maximum runner age.
const MaxHotAge = 24 * time.Hour

// Validate checks the target's numbers, days, times and time zones.
func (t WarmTarget) Validate() error {
	if err := checkCounts(t.Hot, t.Stopped); err != nil {
		return err
	}
	for i, w := range t.Schedule {
		if err := w.validate(); err != nil {
			return fmt.Errorf("schedule[%d]: %w", i, err)
		}
	}
	return nil
}

// checkCounts checks the base targets of the tiers, in Tiers' order.
func checkCounts(counts ...int) error {
	for i, n := range counts {
		if n < 0 {
			return fmt.Errorf("%s is %d, must not be negative", Tiers[i], n)
		}
	}
	return nil
}

// CheckTargets tells whether the window sets a target, and none negative.
func (w WarmWindow) CheckTargets() error {
	if w.Hot == nil && w.Stopped == nil {
		return fmt.Errorf("sets no target: give it hot, stopped or both")
	}
	for _, tier := range Tiers {
		if n := w.of(tier); n != nil && *n < 0 {
			return fmt.Errorf("%s is %d, must not be negative", tier, *n)
		}
	}
	return nil
}

func (w WarmWindow) validate() error {
	if err := w.CheckTargets(); err != nil {
		return err
	}
	if len(w.Days) == 0 {
		return fmt.Errorf("days is empty; use some of %s", strings.Join(WeekDays, ", "))
	}
	for _, d := range w.Days {
		if !slices.Contains(WeekDays, d) {
			return fmt.Errorf("day %q is not one of %s", d, strings.Join(WeekDays, ", "))
		}
	}
	if _, err := ParseClock(w.From); err != nil {
		return fmt.Errorf("from: %w", err)
	}
	if _, err := ParseClock(w.To); err != nil {
		return fmt.Errorf("to: %w", err)
	}
	if err := w.CheckOrder(); err != nil {
		return err
	}
	if _, err := time.LoadLocation(w.TimeZone); err != nil || w.TimeZone == "" {
		return fmt.Errorf("time_zone %q is not an IANA time zone such as Europe/Berlin or UTC", w.TimeZone)
	}
	return nil
}

// CheckOrder tells whether the window closes after it opens; times that
// do not parse are left to the other checks.
func (w WarmWindow) CheckOrder() error {
	from, ferr := ParseClock(w.From)
	to, terr := ParseClock(w.To)
	if ferr == nil && terr == nil && to <= from {
		return fmt.Errorf("to %s is not after from %s (a window across midnight is two windows)", w.To, w.From)
	}
	return nil
}

// ParseClock reads "HH:MM" (00:00 to 24:00) as the time since midnight.
func ParseClock(s string) (time.Duration, error) {
	var h, m int
	if n, err := fmt.Sscanf(s, "%2d:%2d", &h, &m); err != nil || n != 2 || len(s) != 5 || h < 0 || m < 0 || m > 59 || h > 24 || (h == 24 && m > 0) {
		return 0, fmt.Errorf("%q is not a time of day HH:MM (00:00 to 24:00)", s)
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute, nil
}

// At is the target of tier in force at t.
func (t WarmTarget) At(tier Tier, at time.Time) int {
	n, inWindow := t.of(tier), false
	for _, w := range t.Schedule {
		if v := w.of(tier); v != nil && w.Contains(at) {
			if !inWindow || *v > n {
				n = *v
			}
			inWindow = true
		}
	}
	return n
}

// Contains tells whether the window is open at at.
func (w WarmWindow) Contains(at time.Time) bool {
	loc, err := time.LoadLocation(w.TimeZone)
	if err != nil {
		return false
	}
	local := at.In(loc)
	if !slices.Contains(w.Days, WeekDays[local.Weekday()]) {
		return false
	}
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	from, _ := ParseClock(w.From)
	to, _ := ParseClock(w.To)
	since := local.Sub(midnight)
	return since >= from && since < to
}

// SlotEnd is when slot (0 first) of tier stops being needed after now: the
// first moment the tier's target is at most slot, at most horizon ahead. A
// slot the target does not reach now ends now.
func (t WarmTarget) SlotEnd(tier Tier, slot int, now time.Time, horizon time.Duration) time.Time {
	limit := now.Add(horizon)
	if t.At(tier, now) <= slot {
		return now
	}
	for _, b := range t.boundaries(now, limit) {
		if t.At(tier, b) <= slot {
			return b
		}
	}
	return limit
}

// boundaries are the moments after now and up to limit where a window
// opens or closes, in order.
func (t WarmTarget) boundaries(now, limit time.Time) []time.Time {
	var out []time.Time
	for _, w := range t.Schedule {
		loc, err := time.LoadLocation(w.TimeZone)
		if err != nil {
			continue
		}
		from, _ := ParseClock(w.From)
		to, _ := ParseClock(w.To)
		local := now.In(loc)
		for d := -1; d <= int(limit.Sub(now)/(24*time.Hour))+1; d++ {
			day := time.Date(local.Year(), local.Month(), local.Day()+d, 0, 0, 0, 0, loc)
			if !slices.Contains(w.Days, WeekDays[day.Weekday()]) {
				continue
			}
			for _, b := range []time.Time{clockOn(day, from), clockOn(day, to)} {
				if b.After(now) && !b.After(limit) {
					out = append(out, b)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// clockOn is the moment a time of day falls on day (midnight, local), as
// a wall clock reads it across a daylight saving change.
func clockOn(day time.Time, clock time.Duration) time.Time {
	return time.Date(day.Year(), day.Month(), day.Day(), int(clock/time.Hour), int(clock%time.Hour/time.Minute), 0, 0, day.Location())
}
