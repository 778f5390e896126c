package protocol

import (
	"strings"
	"testing"
	"time"
)

// Weekdays 08:00-19:00 in Berlin, 4 hot; 1 hot otherwise.
var office = WarmTarget{Hot: 1, Schedule: []WarmWindow{
	{Days: []string{"mon", "tue", "wed", "thu", "fri"}, From: "08:00", To: "19:00", TimeZone: "Europe/Berlin", Hot: Count(4)},
}}

func berlin(t *testing.T, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestWarmTargetHotAt(t *testing.T) {
	overlapping := office
	overlapping.Schedule = append(overlapping.Schedule, WarmWindow{Days: []string{"tue"}, From: "09:00", To: "10:00", TimeZone: "UTC", Hot: Count(9)})
	tests := []struct {
		target WarmTarget
		at     string
		want   int
	}{
		{office, "2026-11-24 07:59", 1}, // a Tuesday
		{office, "2026-11-24 08:00", 4},
		{office, "2026-11-24 18:59", 4},
		{office, "2026-11-24 19:00", 1},
		{office, "2026-11-28 12:00", 1},      // Saturday
		{overlapping, "2026-11-24 10:30", 9}, // 09:30 UTC
		{overlapping, "2026-11-24 11:00", 4}, // 10:00 UTC: that window is over
		{WarmTarget{Hot: 2}, "2026-11-28 12:00", 2},
		// A window's time zone, not the host's: 08:00 in New York is 14:00 in Berlin.
		{WarmTarget{Schedule: []WarmWindow{{Days: WeekDays, From: "08:00", To: "09:00", TimeZone: "America/New_York", Hot: Count(3)}}}, "2026-11-24 14:30", 3},
	}
	for _, tt := range tests {
		if got := tt.target.At(TierHot, berlin(t, tt.at)); got != tt.want {
			t.Errorf("HotAt(%s) = %d, want %d (target %+v)", tt.at, got, tt.want, tt.target)
		}
	}
}

// Each tier has its own targets, in and out of the windows; an overlap
// takes each tier's highest.
func TestWarmTargetTiers(t *testing.T) {
	nights := WarmTarget{Hot: 1, Stopped: 6, Schedule: []WarmWindow{
		{Days: []string{"mon", "tue", "wed", "thu", "fri"}, From: "08:00", To: "19:00", TimeZone: "Europe/Berlin", Hot: Count(4), Stopped: Count(2)},
		{Days: []string{"tue"}, From: "12:00", To: "13:00", TimeZone: "Europe/Berlin", Hot: Count(2), Stopped: Count(5)},
	}}
	tests := []struct {
		at           string
		hot, stopped int
	}{
		{"2026-11-24 07:00", 1, 6},
		{"2026-11-24 09:00", 4, 2},
		{"2026-11-24 12:30", 4, 5},
		{"2026-11-28 12:30", 1, 6},
	}
	for _, tt := range tests {
		at := berlin(t, tt.at)
		if hot, stopped := nights.At(TierHot, at), nights.At(TierStopped, at); hot != tt.hot || stopped != tt.stopped {
			t.Errorf("at %s: hot %d, stopped %d; want %d, %d", tt.at, hot, stopped, tt.hot, tt.stopped)
		}
	}
	// A stopped slot of the day's window ends when the target drops to it.
	if got, want := nights.SlotEnd(TierStopped, 2, berlin(t, "2026-11-24 07:00"), 7*24*time.Hour), berlin(t, "2026-11-24 08:00"); !got.Equal(want) {
		t.Errorf("stopped slot 2 ends %s, want %s", got, want)
	}
	if got, want := nights.SlotEnd(TierStopped, 0, berlin(t, "2026-11-24 07:00"), 7*24*time.Hour), berlin(t, "2026-12-01 07:00"); !got.Equal(want) {
		t.Errorf("stopped slot 0 ends %s, want the horizon %s", got, want)
	}
}

func TestWarmTargetSlotEnd(t *testing.T) {
	tests := []struct {
		now  string
		slot int
		want string
	}{
		{"2026-11-24 10:00", 3, "2026-11-24 19:00"}, // the window's slots end with it
		{"2026-11-24 10:00", 0, "2026-11-25 10:00"}, // the base slot never ends: MaxHotAge
		{"2026-11-24 10:00", 4, "2026-11-24 10:00"}, // beyond the target: ends now
		{"2026-11-27 20:00", 0, "2026-11-28 20:00"}, // Friday evening, base slot
		{"2026-11-27 20:00", 1, "2026-11-27 20:00"},
	}
	for _, tt := range tests {
		if got, want := office.SlotEnd(TierHot, tt.slot, berlin(t, tt.now), MaxHotAge), berlin(t, tt.want); !got.Equal(want) {
			t.Errorf("SlotEnd(%d, %s) = %s, want %s", tt.slot, tt.now, got.In(want.Location()), want)
		}
	}
	// A slot of a window that opens later ends when it closes, not before.
	night := WarmTarget{Schedule: []WarmWindow{{Days: WeekDays, From: "00:00", To: "06:00", TimeZone: "UTC", Hot: Count(2)}}}
	at := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	if got := night.SlotEnd(TierHot, 1, at, MaxHotAge); !got.Equal(time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("night slot ends %s", got)
	}
}

func TestWarmTargetValidate(t *testing.T) {
	w := func(f func(*WarmWindow)) WarmTarget {
		win := WarmWindow{Days: []string{"mon"}, From: "08:00", To: "19:00", TimeZone: "UTC", Hot: Count(1)}
		f(&win)
		return WarmTarget{Schedule: []WarmWindow{win}}
	}
	tests := []struct {
		target WarmTarget
		want   string // "" valid
	}{
		{office, ""},
		{WarmTarget{Hot: -1}, "hot is -1"},
		{w(func(w *WarmWindow) { w.Days = []string{"monday"} }), `day "monday" is not one of sun, mon`},
		{w(func(w *WarmWindow) { w.Days = nil }), "days is empty"},
		{w(func(w *WarmWindow) { w.From = "8:00" }), `"8:00" is not a time of day`},
		{w(func(w *WarmWindow) { w.To = "24:00" }), ""},
		{w(func(w *WarmWindow) { w.To = "24:01" }), "is not a time of day"},
		{w(func(w *WarmWindow) { w.From, w.To = "22:00", "06:00" }), "a window across midnight is two windows"},
		{w(func(w *WarmWindow) { w.TimeZone = "Mars/Olympus" }), "is not an IANA time zone"},
		{w(func(w *WarmWindow) { w.Hot = Count(-2) }), "hot is -2"},
		{w(func(w *WarmWindow) { w.Stopped = Count(-3) }), "stopped is -3"},
		{w(func(w *WarmWindow) { w.Hot = nil }), "sets no target"},
		{WarmTarget{Stopped: -1}, "stopped is -1"},
	}
	for _, tt := range tests {
		err := tt.target.Validate()
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.target, err, tt.want)
		}
	}
}

// A window that sets only one tier's target leaves the other's base target
// in force.
func TestWarmWindowKeepsTheBaseOfTiersItDoesNotSet(t *testing.T) {
	target := WarmTarget{Hot: 1, Stopped: 6, Schedule: []WarmWindow{
		{Days: WeekDays, From: "08:00", To: "19:00", TimeZone: "UTC", Hot: Count(4)},
	}}
	at := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	if hot, stopped := target.At(TierHot, at), target.At(TierStopped, at); hot != 4 || stopped != 6 {
		t.Errorf("in the window: hot %d, stopped %d; want 4 and the base 6", hot, stopped)
	}
}
