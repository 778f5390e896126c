package protocol

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A claim's runners take one label, <run id>-<secret>: the run id keeps it
// readable, the secret keeps it from anyone who does not hold the claim.
// Run ids are predictable (a workflow run's id and attempt), and any job
// that may use a runner, such as a job of another repository that may use
// an organization's runner group, gets the runners whose label it names.
// The label reaches the runner only through its registration token item,
// in its own agent partition, and the claim record; never through the
// instance records every runner may read.
const (
	// MaxLabelLength bounds a claim's label. GitHub publishes no limit of
	// its own for runner labels; the provider keeps labels as short as the
	// run ids were before they carried a secret.
	MaxLabelLength = 100
	// LabelSecretLength is the number of base32 characters of a label's
	// secret: 13 characters of 5 bits, 65 random bits.
	LabelSecretLength = 13
	// MaxNewRunIDLength bounds the run id of a new claim, so that its
	// label (<run id>-<secret>) stays within MaxLabelLength. Claims made
	// before labels carried a secret may have longer run ids.
	MaxNewRunIDLength = MaxLabelLength - 1 - LabelSecretLength
)

// labelSecretEncoding writes a label's secret in lower-case base32 (a-z,
// 2-7): characters every label may hold, and one case only, as GitHub
// matches labels case-insensitively.
var labelSecretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

var labelSecretPattern = regexp.MustCompile(`^[a-z2-7]{13}$`)

// NewLabel is a new label for a claim of runID: the run id, '-', and 65
// bits from crypto/rand. The run id must be valid for a new claim
// (ValidateNewRunID).
func NewLabel(runID string) string {
	b := make([]byte, 9) // 72 bits, of which 13 characters keep 65
	_, _ = rand.Read(b)  // never fails
	return runID + "-" + labelSecretEncoding.EncodeToString(b)[:LabelSecretLength]
}

// ValidateNewRunID reports why id cannot be the run id of a new claim, or
// nil: a run id (ValidateRunID) short enough to leave room for the label's
// secret.
func ValidateNewRunID(id string) error {
	if err := ValidateRunID(id); err != nil {
		return err
	}
	if len(id) > MaxNewRunIDLength {
		return fmt.Errorf("run id %q is %d characters long; a new claim's run id may have at most %d, as its runners' label adds '-' and a %d-character secret (at most %d characters in all)",
			id, len(id), MaxNewRunIDLength, LabelSecretLength, MaxLabelLength)
	}
	return nil
}

// ValidateLabel reports why label cannot be the label of runID's runners,
// or nil. A label is the run id, '-' and a secret of LabelSecretLength
// base32 characters; or the run id alone, the label of a claim made before
// labels carried a secret.
func ValidateLabel(runID, label string) error {
	if err := ValidateRunID(runID); err != nil {
		return err
	}
	if label == runID {
		return nil
	}
	secret, ok := strings.CutPrefix(label, runID+"-")
	if !ok || !labelSecretPattern.MatchString(secret) || len(label) > MaxLabelLength {
		return fmt.Errorf("label %q is not a label of run %s: want %s-<%d characters of a-z and 2-7>, at most %d characters", label, runID, runID, LabelSecretLength, MaxLabelLength)
	}
	return nil
}

// MaxRunnerGroupLength bounds a runner group's name. GitHub publishes no
// rule for the names of runner groups; the provider refuses only what
// cannot be one: an empty name, blanks around it, control characters, and
// a name longer than this.
const MaxRunnerGroupLength = 255

// RunnerGroupRule says what a runner group's name may be.
const RunnerGroupRule = "1-255 characters, no control characters, no blanks at either end"

// DefaultRunnerGroup is the runner group every organization has, where
// runners registered without a group go.
const DefaultRunnerGroup = "Default"

// ValidateRunnerGroup reports why name cannot name a runner group, or nil.
func ValidateRunnerGroup(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("runner group name must not be empty")
	case !utf8.ValidString(name):
		return fmt.Errorf("runner group name %q is not valid UTF-8", name)
	case utf8.RuneCountInString(name) > MaxRunnerGroupLength:
		return fmt.Errorf("runner group name %q is %d characters long; at most %d", name, utf8.RuneCountInString(name), MaxRunnerGroupLength)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("runner group name %q must not begin or end with blanks", name)
	case strings.ContainsFunc(name, unicode.IsControl):
		return fmt.Errorf("runner group name %q must not hold control characters", name)
	}
	return nil
}

// SameRunnerGroup tells whether GitHub takes two runner group names for
// one: the runner's config.sh looks groups up case-insensitively.
func SameRunnerGroup(a, b string) bool { return strings.EqualFold(a, b) }
