package protocol

import (
	"fmt"
	"strings"
	"time"
)

// TimeLayout is the only timestamp format ever written: conditions compare
// timestamps as strings, so they must sort lexicographically.
const TimeLayout = "2006-01-02T15:04:05Z"

// FormatTime renders t in UTC, whole seconds.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseTime parses a timestamp written with TimeLayout. It accepts only that
// exact form: time.Parse alone would also take fractional seconds
// ("...:00.5Z"), which must never appear on the wire.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	if err != nil {
		return time.Time{}, err
	}
	if t.Format(TimeLayout) != s {
		return time.Time{}, fmt.Errorf("timestamp %q is not of the form %s", s, TimeLayout)
	}
	return t, nil
}

// FormatDuration renders d as Go duration text without zero units: 7m, 1h30m, 90s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
