package claim

// Fuzz targets of what a claim decides from data it does not control: the
// instance type patterns, and the queue messages. `go test` runs the seeds
// and testdata/fuzz/<FuzzName>; `make fuzz` runs the fuzzers.

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// globMatch is the pool protocol's pattern rule, written independently of
// wildcardMatch: `*` matches any run of bytes, everything else matches
// itself, the whole of s must match. Dynamic programming over prefixes,
// so any number of stars stays cheap.
func globMatch(pattern, s string) bool {
	// prev[j]: pattern[:i] matches s[:j].
	prev := make([]bool, len(s)+1)
	cur := make([]bool, len(s)+1)
	prev[0] = true
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		cur[0] = prev[0] && c == '*'
		for j := 1; j <= len(s); j++ {
			if c == '*' {
				cur[j] = prev[j] || cur[j-1] // the star matches nothing, or one more byte
			} else {
				cur[j] = prev[j-1] && s[j-1] == c
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(s)]
}

// regexpMatch is the rule once more, through the regexp package: literal
// runs quoted, each star `.*`, anchored, case-insensitive. Only for ASCII
// (the domain of instance types, and of the patterns the provider accepts).
func regexpMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?is)\A` + strings.Join(parts, ".*") + `\z`).MatchString(s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// referenceMatch: any pattern of the list matches the type, case-insensitively.
func referenceMatch(patterns []string, typ string) bool {
	for _, p := range patterns {
		if globMatch(strings.ToLower(p), strings.ToLower(typ)) {
			return true
		}
	}
	return false
}

func FuzzMatchInstanceType(f *testing.F) {
	for _, c := range []struct{ patterns, typ string }{
		// the pool protocol's examples and the unit tests' cases.
		{"c*", "c6i.large"}, {"c*g", "c6i.large"}, {"c*g", "c6g.large"}, {"c*g", "c6g"}, {"c6i", "c6i.large"},
		{"c6i.large", "c6ixlarge"}, {"c6i.*", "c6ilarge"}, {"c6?.large", "c6i.large"}, {"c6+.large", "c6i.large"},
		{"C6I.*", "c6i.large"}, {"c6i.*", "C6I.LARGE"}, {"c*.*", "c6ilarge"}, {"*6*large", "c6i.xlarge"},
		{"*large*6", "c6i.large"}, {"c**large", "c6i.large"}, {"ab*ba", "aba"}, {"a*ba", "aba"}, {"*ab*b", "ab"},
		{"*ab*b", "abb"}, {"*", ""}, {"", ""}, {"", "c6i.large"}, {"*", "m7g.2xlarge"},
		// Several patterns, one per line.
		{"r*\nm*\nc6i.*", "c6i.large"}, {"r*\nm*", "c6i.large"}, {"\n", ""},
		// Regexp and glob metacharacters are literal.
		{"c6i.[a-z]*", "c6i.large"}, {"c6i.[a-z]*", "c6i.[a-z]large"}, {"(c|m)*", "c6i.large"}, {"^c*$", "^c6i$"},
		{"c6i\\.large", "c6i.large"}, {"c?i.large", "c6i.large"}, {".*", "c6i.large"}, {"%", "%"},
		// Many stars, long types.
		{strings.Repeat("*a", 20), strings.Repeat("a", 40)}, {strings.Repeat("*a", 21), strings.Repeat("a", 20)},
		{"*" + strings.Repeat("ab", 30) + "*", strings.Repeat("ab", 100)},
		// Non-ASCII: ToLower maps the Kelvin sign to k and every invalid byte to U+FFFD.
		{"c6i.k*", "c6i.\u212aarge"}, {"\xff", "\xfe"}, {"ſ*", "S6i"}, {"i*", "İ"}, {"größe*", "GRÖSSE"},
	} {
		f.Add(c.patterns, c.typ)
	}
	f.Fuzz(func(t *testing.T, patternList, typ string) {
		patterns := strings.Split(patternList, "\n")
		got := MatchInstanceType(patterns, typ)
		if want := referenceMatch(patterns, typ); got != want {
			t.Fatalf("MatchInstanceType(%q, %q) = %v, the reference says %v", patterns, typ, got, want)
		}
		if isASCII(patternList) && isASCII(typ) {
			want := false
			for _, p := range patterns {
				want = want || regexpMatch(p, typ)
			}
			if got != want {
				t.Fatalf("MatchInstanceType(%q, %q) = %v, the regexp reading says %v", patterns, typ, got, want)
			}
		}
		// Each pattern on its own: the list matches when one of them does.
		any := false
		for _, p := range patterns {
			any = any || MatchInstanceType([]string{p}, typ)
		}
		if any != got {
			t.Fatalf("MatchInstanceType(%q, %q) = %v, but its patterns one by one say %v", patterns, typ, got, any)
		}
		if !MatchInstanceType([]string{"*"}, typ) || !MatchInstanceType(append([]string{"*"}, patterns...), typ) {
			t.Fatalf("* does not match %q", typ)
		}
		if !MatchInstanceType([]string{typ}, typ) {
			t.Fatalf("%q does not match itself", typ)
		}
		if isASCII(typ) && !MatchInstanceType([]string{strings.ToUpper(typ)}, strings.ToLower(typ)) {
			t.Fatalf("%q does not match itself in upper case", typ)
		}
	})
}

// maxWireSecond is 9999-12-31T23:59:59Z: the last instant the protocol's
// four-digit years can write (and compare as strings).
const maxWireSecond = 253402300799

func FuzzClassify(f *testing.F) {
	ok := idleMessage("i-0abc", "c6i.large", time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC)).Body()
	swap := func(old, new string) string { return strings.Replace(ok, old, new, 1) }
	nowSec := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC).Unix()
	for _, body := range []string{
		ok,
		swap(`"mmem":4096`, `"mmem":8192`),
		swap(`"instanceType":"c6i.large"`, `"instanceType":"m6i.large"`),
		swap(`"instanceType":"c6i.large"`, `"instanceType":"C6I.LARGE"`),
		swap(`"instanceType":"c6i.large"`, `"instanceType":"r6i.large"`),
		swap(`"instanceType":"c6i.large"`, `"instanceType":"m6in.large"`),
		swap(`"usageClass":"on-demand"`, `"usageClass":"spot"`),
		swap(`"resourceClass":"large"`, `"resourceClass":"huge"`),
		swap(`"cpu":2`, `"cpu":4`),
		swap(`"mmem":4096`, `"mmem":4095`),
		swap("2026-06-01T13:00:00Z", "2026-06-01T12:00:00Z"),
		swap("2026-06-01T13:00:00Z", "2026-06-01T12:00:01Z"),
		swap("2026-06-01T13:00:00Z", "2026-06-01T11:59:59Z"),
		swap("2026-06-01T13:00:00Z", "2026-06-01T13:00:00.5Z"),
		swap("2026-06-01T13:00:00Z", "9999-12-31T23:59:59Z"),
		swap(`"id":"i-0abc"`, `"id":""`),
		`{"id":"i-0abc",`, `"i-0abc"`, ``, `null`, `{}`, `[]`, "\xff",
	} {
		f.Add(body, "large", 2, 4096, "c*\nm6i.*", protocol.UsageOnDemand, nowSec, int64(0))
	}
	f.Add(ok, "large", 2, 4096, "c*", protocol.UsageOnDemand, nowSec, int64(999_999_999))      // now 12:00:00.999999999
	f.Add(ok, "large", 2, 4096, "c*", protocol.UsageOnDemand, nowSec+3600, int64(0))           // deadline now
	f.Add(ok, "large", 0, 0, "c*", protocol.UsageOnDemand, nowSec, int64(0))                   // a corrupt class
	f.Add(ok, "", 2, 4096, "", "", nowSec, int64(0))                                           // empty wants
	f.Add(ok, "large", 2, 4096, "*", protocol.UsageOnDemand, int64(-1), int64(-1))             // clock before 1970
	f.Add(ok, "large", 2, 4096, "*", protocol.UsageOnDemand, int64(maxWireSecond+1), int64(0)) // clock past year 9999
	f.Add(ok, "large", -2, -4096, "C6I.LARGE", protocol.UsageOnDemand, nowSec, int64(0))       // negative class
	f.Add(ok, "large", 2, 4096, "c6i.large\nc6i.large", protocol.UsageSpot, nowSec, int64(0))  // usage differs
	f.Add(ok, "LARGE", 2, 4096, "c6i.large", protocol.UsageOnDemand, nowSec, int64(0))         // class names are case-sensitive
	f.Add(swap(`"cpu":2`, `"cpu":9223372036854775807`), "large", 9223372036854775807, 1, "*", protocol.UsageOnDemand, nowSec, int64(0))

	f.Fuzz(func(t *testing.T, body, class string, cpu, mem int, patternList, usage string, sec, nsec int64) {
		// The clock stays within what the protocol's timestamps can say.
		sec = int64(uint64(sec) % (maxWireSecond + 1))
		now := time.Unix(sec, int64(uint64(nsec)%1e9)).UTC()
		w := Wants{ResourceClass: class, Class: protocol.ResourceClass{CPU: cpu, MemoryMiB: mem}, AllowedTypes: strings.Split(patternList, "\n"), UsageClass: usage}

		m, v, reason := Classify(body, w, now)

		if v != Discard && v != Requeue && v != Accept {
			t.Fatalf("verdict %d", v)
		}
		if (v == Accept) != (reason == "") {
			t.Fatalf("verdict %v with reason %q: every verdict but accept needs a reason", v, reason)
		}
		parsed, err := protocol.ParseMessage(body)
		if err != nil {
			if v != Discard || m != (protocol.Message{}) {
				t.Fatalf("unparsable %q (%v): verdict %v, message %+v; want a discard", body, err, v, m)
			}
			return
		}
		if m != parsed {
			t.Fatalf("Classify read %+v, ParseMessage %+v", m, parsed)
		}
		// The verdict, decided independently.
		threshold, _ := protocol.ParseTime(m.Threshold)
		discard := m.ResourceClass != class || m.CPU != cpu || m.MemoryMiB < mem || !threshold.After(now.Truncate(time.Second))
		requeue := !referenceMatch(w.AllowedTypes, m.InstanceType) || m.UsageClass != usage
		want := Accept
		switch {
		case discard:
			want = Discard
		case requeue:
			want = Requeue
		}
		if v != want {
			t.Fatalf("Classify(%q, %+v, %s) = %v (%q), want %v", body, w, now.Format(time.RFC3339Nano), v, reason, want)
		}
		switch v {
		case Accept: // what a claim worker gets matches every want
			if m.ResourceClass != class || m.CPU != cpu || m.MemoryMiB < mem || !threshold.After(now) ||
				!MatchInstanceType(w.AllowedTypes, m.InstanceType) || m.UsageClass != usage {
				t.Fatalf("accepted %+v for %+v at %s", m, w, now)
			}
		case Requeue: // the reason names the mismatch
			if !strings.Contains(reason, m.InstanceType) && !strings.Contains(reason, m.UsageClass) {
				t.Errorf("requeue reason %q names neither the type nor the usage class", reason)
			}
		}
	})
}
