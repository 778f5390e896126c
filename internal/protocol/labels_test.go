package protocol

import (
	"strings"
	"testing"
)

func TestNewLabel(t *testing.T) {
	seen := map[string]bool{}
	for _, runID := range []string{"run-1", "4242-1", "a", strings.Repeat("r", MaxNewRunIDLength)} {
		for range 100 {
			label := NewLabel(runID)
			secret, ok := strings.CutPrefix(label, runID+"-")
			if !ok || len(secret) != LabelSecretLength || strings.Trim(secret, "abcdefghijklmnopqrstuvwxyz234567") != "" {
				t.Fatalf("NewLabel(%q) = %q, want %s-<%d characters of a-z and 2-7>", runID, label, runID, LabelSecretLength)
			}
			if err := ValidateLabel(runID, label); err != nil {
				t.Fatalf("ValidateLabel(%q, NewLabel) = %v", runID, err)
			}
			// A label is a valid run id too: lower case, GitHub's label characters.
			if err := ValidateRunID(label); err != nil {
				t.Fatalf("label %q: %v", label, err)
			}
			if len(label) > MaxLabelLength {
				t.Fatalf("label %q is %d characters long, over %d", label, len(label), MaxLabelLength)
			}
			if seen[label] {
				t.Fatalf("NewLabel repeated %q", label)
			}
			seen[label] = true
		}
	}
	// 65 random bits: every character of the alphabet turns up in the
	// secrets' last position as often as in the others'.
	last := map[byte]bool{}
	for label := range seen {
		last[label[len(label)-1]] = true
	}
	if len(last) < 20 {
		t.Errorf("the secrets' last characters took only %d values of 32 in %d labels", len(last), len(seen))
	}
}

func TestValidateLabel(t *testing.T) {
	long := strings.Repeat("r", MaxNewRunIDLength)
	for _, tt := range []struct {
		runID, label string
		ok           bool
	}{
		{"run-1", "run-1-abcdefgh23456", true},
		{"run-1", "run-1", true}, // a claim made before labels carried a secret
		{long, long + "-abcdefgh23456", true},
		{long + "r", long + "r-abcdefgh23456", false}, // 101 characters
		{"run-1", "run-1-abcdefgh2345", false},        // 12 characters
		{"run-1", "run-1-abcdefgh234567", false},      // 14
		{"run-1", "run-1-abcdefgh23451", false},       // '1' is not base32
		{"run-1", "run-1-ABCDEFGH23456", false},
		{"run-1", "run-2-abcdefgh23456", false},
		{"run", "run-1-abcdefgh23456", false}, // run "run"'s label is run-<secret>
		{"run-1", "run-1abcdefgh23456", false},
		{"run-1", "", false},
		{"Run-1", "Run-1-abcdefgh23456", false},
	} {
		err := ValidateLabel(tt.runID, tt.label)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateLabel(%q, %q) = %v, want ok %v", tt.runID, tt.label, err, tt.ok)
		}
	}
}

func TestValidateNewRunID(t *testing.T) {
	if err := ValidateNewRunID(strings.Repeat("r", MaxNewRunIDLength)); err != nil {
		t.Errorf("a run id of %d characters: %v", MaxNewRunIDLength, err)
	}
	err := ValidateNewRunID(strings.Repeat("r", MaxNewRunIDLength+1))
	if err == nil || !strings.Contains(err.Error(), "at most 86") {
		t.Errorf("a run id of %d characters: %v, want an error naming the limit 86", MaxNewRunIDLength+1, err)
	}
	// Still a run id: older claims may have one that long.
	if err := ValidateRunID(strings.Repeat("r", MaxNewRunIDLength+1)); err != nil {
		t.Errorf("ValidateRunID: %v", err)
	}
	if err := ValidateNewRunID("Run-1"); err == nil || !strings.Contains(err.Error(), "lower case") {
		t.Errorf("ValidateNewRunID(Run-1) = %v, want the run id's own error", err)
	}
}

func TestValidateRunnerGroup(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"Default", true},
		{"Expensive hardware runners", true},
		{"trusted-repos_1.x", true},
		{"Gruppe für Builds", true},
		{strings.Repeat("g", MaxRunnerGroupLength), true},
		{strings.Repeat("g", MaxRunnerGroupLength+1), false},
		{"", false},
		{" trusted", false},
		{"trusted ", false},
		{"trusted\nbuilds", false},
		{"trusted\x00", false},
		{"\xff", false},
	} {
		if err := ValidateRunnerGroup(tt.name); (err == nil) != tt.ok {
			t.Errorf("ValidateRunnerGroup(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	if !SameRunnerGroup("Trusted", "trusted") || SameRunnerGroup("trusted", "trusted2") {
		t.Error("SameRunnerGroup does not compare as config.sh does, ignoring case")
	}
}
