package claim

import "strings"

// MatchInstanceType reports whether instanceType matches any pattern: `*` is
// the only wildcard (any run of characters), everything else is literal, the
// whole type must match, case-insensitively.
func MatchInstanceType(patterns []string, instanceType string) bool {
	for _, p := range patterns {
		if wildcardMatch(strings.ToLower(p), strings.ToLower(instanceType)) {
			return true
		}
	}
	return false
}

func wildcardMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}
