package protocol

import (
	"encoding/json"
	"regexp"
	"sort"
	"testing"
	"time"
)

var wireTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$`)

func TestFormatTime(t *testing.T) {
	cest := time.FixedZone("CEST", 2*60*60)
	est := time.FixedZone("EST", -5*60*60)
	india := time.FixedZone("IST", 5*60*60+30*60)
	tests := []struct {
		name string
		in   time.Time
		want string
	}{
		{name: "utc", in: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC), want: "2026-06-01T12:00:00Z"},
		{name: "from +02:00", in: time.Date(2026, 6, 1, 14, 0, 0, 0, cest), want: "2026-06-01T12:00:00Z"},
		{name: "from -05:00 across the year", in: time.Date(2026, 12, 31, 20, 30, 15, 0, est), want: "2027-01-01T01:30:15Z"},
		{name: "from +05:30 back a day", in: time.Date(2026, 3, 1, 5, 0, 7, 0, india), want: "2026-02-28T23:30:07Z"},
		{name: "sub-seconds truncated, not rounded", in: time.Date(2026, 6, 1, 12, 0, 59, 999_999_999, time.UTC), want: "2026-06-01T12:00:59Z"},
		{name: "half second truncated", in: time.Date(2026, 6, 1, 23, 59, 59, 500_000_000, time.UTC), want: "2026-06-01T23:59:59Z"},
		{name: "one nanosecond", in: time.Date(2026, 1, 2, 3, 4, 5, 1, time.UTC), want: "2026-01-02T03:04:05Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FormatTime(tt.in)
			if !wireTime.MatchString(got) {
				t.Fatalf("FormatTime(%v) = %q, not of the form YYYY-MM-DDTHH:MM:SSZ", tt.in, got)
			}
			if got != tt.want {
				t.Errorf("FormatTime(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormatTimeNow(t *testing.T) {
	now := time.Now() // carries a monotonic reading and the local zone
	got := FormatTime(now)
	if !wireTime.MatchString(got) {
		t.Fatalf("FormatTime(now) = %q, not of the form YYYY-MM-DDTHH:MM:SSZ", got)
	}
	if want := now.UTC().Truncate(time.Second).Format("2006-01-02T15:04:05Z"); got != want {
		t.Errorf("FormatTime(now) = %q, want %q", got, want)
	}
}

func TestParseTimeRoundTrip(t *testing.T) {
	zone := time.FixedZone("X", -3*60*60-30*60)
	for _, in := range []time.Time{
		time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 6, 1, 12, 0, 0, 123_456_789, zone),
		time.Date(1999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2028, 2, 29, 0, 0, 0, 0, zone),
	} {
		s := FormatTime(in)
		got, err := ParseTime(s)
		if err != nil {
			t.Fatalf("ParseTime(%q) = %v", s, err)
		}
		if want := in.Truncate(time.Second); !got.Equal(want) {
			t.Errorf("ParseTime(FormatTime(%v)) = %v, want %v", in, got, want)
		}
		if got.Location() != time.UTC {
			t.Errorf("ParseTime(%q) location = %v, want UTC", s, got.Location())
		}
		if again := FormatTime(got); again != s {
			t.Errorf("FormatTime(ParseTime(%q)) = %q", s, again)
		}
	}
}

func TestParseTimeRejects(t *testing.T) {
	for _, s := range []string{
		"",
		"2026-06-01",
		"2026-06-01T12:00:00",       // no zone
		"2026-06-01 12:00:00Z",      // space instead of T
		"2026-06-01T12:00:00+00:00", // offset instead of Z
		"2026-06-01T14:00:00+02:00", // another zone
		"2026-06-01T12:00:00z",      // lower-case z
		"2026-06-01t12:00:00Z",      // lower-case t
		"2026-06-01T12:00:00.5Z",    // fractional seconds are not the wire format
		"2026-06-01T12:00:00.000Z",  // not even zero ones
		"2026-06-01T12:00:00,5Z",    // comma fraction
		"2026-6-1T12:00:00Z",        // unpadded
		"2026-02-30T00:00:00Z",      // no such day
		"2026-06-01T24:00:00Z",      // no such hour
		"1780315200",                // unix seconds
		"2026-06-01T12:00:00Z ",     // trailing space
		" 2026-06-01T12:00:00Z",     // leading space
		"Mon, 01 Jun 2026 12:00:00 GMT",
	} {
		if got, err := ParseTime(s); err == nil {
			t.Errorf("ParseTime(%q) = %v, nil; want an error", s, got)
		}
	}
}

// Conditions compare timestamps as strings: string order must be time order.
func TestFormattedTimesSortInTimeOrder(t *testing.T) {
	base := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var times []time.Time
	for _, d := range []time.Duration{
		0, 1, time.Second - 1, time.Second, 9 * time.Second, 10 * time.Second, 59 * time.Second, time.Minute,
		9 * time.Minute, 10 * time.Minute, time.Hour, 9 * time.Hour, 10 * time.Hour, 12 * time.Hour,
		24 * time.Hour, 9 * 24 * time.Hour, 10 * 24 * time.Hour, 40 * 24 * time.Hour, 200 * 24 * time.Hour,
		400 * 24 * time.Hour, 4000 * 24 * time.Hour, -time.Second, -time.Hour, -400 * 24 * time.Hour,
	} {
		times = append(times, base.Add(d))
	}
	// The same instants seen from other zones.
	east, west := time.FixedZone("E", 9*60*60), time.FixedZone("W", -11*60*60)
	n := len(times)
	for i := range n {
		times = append(times, times[i].In(east), times[i].In(west))
	}
	for i, a := range times {
		for _, b := range times[i:] {
			sa, sb := FormatTime(a), FormatTime(b)
			ta, tb := a.Truncate(time.Second), b.Truncate(time.Second)
			switch {
			case ta.Before(tb) && !(sa < sb), ta.After(tb) && !(sa > sb), ta.Equal(tb) && sa != sb:
				t.Errorf("%v vs %v: formatted %q vs %q do not compare like the times", a, b, sa, sb)
			}
		}
	}
	strs := make([]string, len(times))
	for i, tm := range times {
		strs[i] = FormatTime(tm)
	}
	sort.Strings(strs)
	for i := 1; i < len(strs); i++ {
		prev, _ := ParseTime(strs[i-1])
		cur, _ := ParseTime(strs[i])
		if cur.Before(prev) {
			t.Errorf("sorted strings %q then %q are out of time order", strs[i-1], strs[i])
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{7 * time.Minute, "7m"},
		{10 * time.Minute, "10m"},
		{30 * time.Minute, "30m"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{70 * time.Minute, "1h10m"},
		{100 * time.Hour, "100h"},
		{90 * time.Second, "1m30s"},
		{45 * time.Second, "45s"},
		{2*time.Hour + 5*time.Second, "2h0m5s"},
		{time.Minute + 50*time.Second, "1m50s"},
		{0, "0s"},
	}
	for _, tt := range tests {
		got := FormatDuration(tt.in)
		if got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
		back, err := time.ParseDuration(got)
		if err != nil || back != tt.in {
			t.Errorf("time.ParseDuration(%q) = %v, %v; want %v", got, back, err, tt.in)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in   time.Duration
		json string
	}{
		{7 * time.Minute, `"7m"`},
		{90 * time.Minute, `"1h30m"`},
		{2*time.Hour + 5*time.Second, `"2h0m5s"`},
		{45 * time.Second, `"45s"`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(Duration(tt.in))
		if err != nil {
			t.Fatalf("marshal %v: %v", tt.in, err)
		}
		if string(b) != tt.json {
			t.Errorf("json.Marshal(Duration(%v)) = %s, want %s", tt.in, b, tt.json)
		}
		var d Duration
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if time.Duration(d) != tt.in {
			t.Errorf("round trip of %v gave %v", tt.in, time.Duration(d))
		}
	}
	// Go's own long form is read too.
	var d Duration
	if err := json.Unmarshal([]byte(`"7m0s"`), &d); err != nil || time.Duration(d) != 7*time.Minute {
		t.Errorf(`unmarshal "7m0s" = %v, %v; want 7m`, time.Duration(d), err)
	}
	for _, bad := range []string{`420`, `"soon"`, `""`, `null`, `{"d":"7m"}`} {
		var d Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("unmarshal %s into Duration = %v, nil; want an error", bad, time.Duration(d))
		}
	}
}
