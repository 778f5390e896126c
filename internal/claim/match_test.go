package claim

import "testing"

func TestMatchInstanceType(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		typ      string
		want     bool
	}{
		// the pool protocol's examples.
		{"c* matches c6i.large", []string{"c*"}, "c6i.large", true},
		{"c*g does not match c6i.large", []string{"c*g"}, "c6i.large", false},
		// The whole type must match.
		{"c*g does not match c6g.large", []string{"c*g"}, "c6g.large", false},
		{"c*g matches c6g", []string{"c*g"}, "c6g", true},
		{"literal must match whole", []string{"c6i"}, "c6i.large", false},
		{"literal prefix is not enough", []string{"c6i.larg"}, "c6i.large", false},
		{"literal suffix is not enough", []string{"6i.large"}, "c6i.large", false},
		{"exact literal", []string{"c6i.large"}, "c6i.large", true},
		// A dot is a dot, not any character.
		{"dot is literal", []string{"c6i.large"}, "c6ixlarge", false},
		{"dot in pattern with star", []string{"c6i.*"}, "c6i.large", true},
		{"dot with star does not match without dot", []string{"c6i.*"}, "c6ilarge", false},
		// Regexp characters are literal too.
		{"regexp chars literal", []string{"c6?.large"}, "c6i.large", false},
		{"plus literal", []string{"c6+.large"}, "c6i.large", false},
		// Case-insensitive both ways.
		{"upper pattern", []string{"C6I.*"}, "c6i.large", true},
		{"upper type", []string{"c6i.*"}, "C6I.LARGE", true},
		// Several stars.
		{"two stars", []string{"c*.*"}, "c6i.large", true},
		{"two stars need the dot", []string{"c*.*"}, "c6ilarge", false},
		{"star in middle and end", []string{"*6*large"}, "c6i.xlarge", true},
		{"star in middle needs order", []string{"*large*6"}, "c6i.large", false},
		{"adjacent stars", []string{"c**large"}, "c6i.large", true},
		{"overlapping prefix and suffix", []string{"ab*ba"}, "aba", false},
		{"prefix and suffix may meet", []string{"a*ba"}, "aba", true},
		{"middle overlapping suffix", []string{"*ab*b"}, "ab", false},
		{"middle then suffix", []string{"*ab*b"}, "abb", true},
		// Star alone, empty things.
		{"star alone", []string{"*"}, "m7g.2xlarge", true},
		{"star matches empty", []string{"*"}, "", true},
		{"empty pattern list", nil, "c6i.large", false},
		{"empty pattern list, empty type", []string{}, "", false},
		{"empty pattern matches only empty", []string{""}, "c6i.large", false},
		// Any pattern of the list.
		{"second pattern matches", []string{"r*", "m*", "c6i.*"}, "c6i.large", true},
		{"no pattern matches", []string{"r*", "m*"}, "c6i.large", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchInstanceType(tt.patterns, tt.typ); got != tt.want {
				t.Errorf("MatchInstanceType(%q, %q) = %v, want %v", tt.patterns, tt.typ, got, tt.want)
			}
		})
	}
}
