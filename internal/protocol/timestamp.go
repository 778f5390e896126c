package protocol

import (
	"strings"
	"time"
)

// TimeLayout is the only timestamp format ever written: conditions compare
// timestamps as strings, so they must sort lexicographically.
const TimeLayout = "2006-01-02T15:04:05Z"

// FormatTime renders t in UTC, whole seconds.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseTime parses a timestamp written with TimeLayout.
func ParseTime(s string) (time.Time, error) { return time.Parse(TimeLayout, s) }

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
