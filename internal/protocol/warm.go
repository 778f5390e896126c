package protocol

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // schedules name time zones; not every host has a zoneinfo database
)

// WarmTarget is how many idle runners of a class the pool keeps hot: Hot
// outside the schedule's windows, the window's Hot inside one (the highest
// where windows overlap).
type WarmTarget struct {
	Hot      int          `json:"hot"`
	Schedule []WarmWindow `json:"schedule,omitempty"`
}

// WarmWindow is a weekly window: on Days, from From to To (HH:MM, To after
// From) in TimeZone.
type WarmWindow struct {
	Days     []string `json:"days"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	TimeZone string   `json:"timeZone"`
	Hot      int      `json:"hot"`
}

// WeekDays are the day names a window takes, Sunday first as time.Weekday.
var WeekDays = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// MaxHotAge bounds how long one decision keeps a runner hot: it is kept
// again only when it is released again, so a runner nobody uses does not
// live on for ever.
const MaxHotAge = 24 * time.Hour

// Validate checks the target's numbers, days, times and time zones.
func (t WarmTarget) Validate() error {
	if t.Hot < 0 {
		return fmt.Errorf("hot is %d, must not be negative", t.Hot)
	}
	for i, w := range t.Schedule {
		if err := w.validate(); err != nil {
			return fmt.Errorf("schedule[%d]: %w", i, err)
		}
	}
	return nil
}

func (w WarmWindow) validate() error {
	if w.Hot < 0 {
		return fmt.Errorf("hot is %d, must not be negative", w.Hot)
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

// HotAt is the target in force at t.
func (t WarmTarget) HotAt(at time.Time) int {
	hot, inWindow := t.Hot, false
	for _, w := range t.Schedule {
		if w.contains(at) {
			if !inWindow || w.Hot > hot {
				hot = w.Hot
			}
			inWindow = true
		}
	}
	return hot
}

func (w WarmWindow) contains(at time.Time) bool {
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

// SlotEnd is when slot (0 first) stops being needed after now: the first
// moment the target is at most slot, at most MaxHotAge ahead. A slot the
// target does not reach now ends now.
func (t WarmTarget) SlotEnd(slot int, now time.Time) time.Time {
	limit := now.Add(MaxHotAge)
	if t.HotAt(now) <= slot {
		return now
	}
	for _, b := range t.boundaries(now, limit) {
		if t.HotAt(b) <= slot {
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
