package protocol

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GitHub's runner version policy (docs.github.com, "Self-hosted runners
// reference": runner software updates; enforced on github.com since
// 2026-09-25): a runner registers only from MinimumRunnerVersion on, and is
// sent jobs only while it runs the newest release, or one whose successor
// was published less than RunnerUpdateWindow ago. An older runner's
// listener is refused with "Runner version v<version> is deprecated and
// cannot receive messages."
const (
	MinimumRunnerVersion = "2.329.0"
	RunnerUpdateWindow   = 30 * 24 * time.Hour
)

// RunnerPlatforms are the runner's release platforms the agent runs on, by
// Go architecture.
var RunnerPlatforms = map[string]string{"amd64": "linux-x64", "arm64": "linux-arm64"}

// SortKeyRunnerRelease is the agent partition item that tells the agent the
// runner release to install (RunnerRelease): written by claims, releases
// and fills, which read GitHub's releases with the provider's credentials,
// so that runners need not ask GitHub's API themselves.
const SortKeyRunnerRelease = "RUNNER"

const entityRunner = "RUNNER"

var runnerVersionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)

// ValidateRunnerVersion reports why v is not a runner release version
// (2.330.0), or nil.
func ValidateRunnerVersion(v string) error {
	if !runnerVersionPattern.MatchString(v) {
		return fmt.Errorf("runner version %q is not a release version such as %s", v, MinimumRunnerVersion)
	}
	return nil
}

// CompareRunnerVersions compares two release versions numerically (-1, 0,
// +1); a version that is not one sorts first.
func CompareRunnerVersions(a, b string) int {
	pa, pb := versionParts(a), versionParts(b)
	if pa == nil || pb == nil {
		return cmp.Compare(len(pa), len(pb))
	}
	return slices.Compare(pa, pb)
}

func versionParts(v string) []int {
	if !runnerVersionPattern.MatchString(v) {
		return nil
	}
	var out []int
	for _, s := range strings.Split(v, ".") {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// RunnerRelease is one release of the GitHub Actions runner.
type RunnerRelease struct {
	Version     string
	PublishedAt time.Time
	// SHA256 is the digest GitHub publishes for each platform's archive
	// (RunnerPlatforms), in hex.
	SHA256 map[string]string
}

// RunnerPolicy is what GitHub accepts at one moment, from its releases.
type RunnerPolicy struct {
	Newest RunnerRelease
	// Minimum is the oldest version GitHub still sends jobs to.
	Minimum string
}

// RunnerPolicyAt applies GitHub's policy to its releases at now: a version
// is accepted when it is the newest, or the release after it was published
// less than RunnerUpdateWindow ago, and never below MinimumRunnerVersion.
// ok is false without any valid release.
func RunnerPolicyAt(releases []RunnerRelease, now time.Time) (p RunnerPolicy, ok bool) {
	valid := slices.DeleteFunc(slices.Clone(releases), func(r RunnerRelease) bool {
		return ValidateRunnerVersion(r.Version) != nil
	})
	if len(valid) == 0 {
		return RunnerPolicy{}, false
	}
	slices.SortFunc(valid, func(a, b RunnerRelease) int { return CompareRunnerVersions(a.Version, b.Version) })
	p.Newest = valid[len(valid)-1]
	p.Minimum = p.Newest.Version
	for i := len(valid) - 2; i >= 0; i-- {
		if !now.Before(valid[i+1].PublishedAt.Add(RunnerUpdateWindow)) || CompareRunnerVersions(valid[i].Version, MinimumRunnerVersion) < 0 {
			break
		}
		p.Minimum = valid[i].Version
	}
	return p, true
}

// AcceptedUntil is when GitHub stops sending jobs to a runner of version
// v: RunnerUpdateWindow after the first release newer than v came out; ok
// is false while none is.
func AcceptedUntil(releases []RunnerRelease, v string) (until time.Time, ok bool) {
	var successor string
	for _, r := range releases {
		if CompareRunnerVersions(r.Version, v) > 0 && (!ok || CompareRunnerVersions(r.Version, successor) < 0) {
			successor, until, ok = r.Version, r.PublishedAt.Add(RunnerUpdateWindow), true
		}
	}
	return until, ok
}

// Accepts tells whether GitHub sends jobs to a runner of version v.
func (p RunnerPolicy) Accepts(v string) bool {
	return CompareRunnerVersions(v, p.Minimum) >= 0
}

// RunnerReleaseItem is the SortKeyRunnerRelease item of an agent: the
// newest release, with the oldest version GitHub accepts when it was
// written, for the agent to install, update to while idle, and check its
// runner against before it registers.
type RunnerReleaseItem struct {
	InstanceARN string
	Release     RunnerRelease
	Minimum     string
	UpdatedAt   string
}

// Fields of the runner release item's value map.
const (
	runnerValueVersion     = "version"
	runnerValuePublishedAt = "publishedAt"
	runnerValueSHA256      = "sha256"
	runnerValueMinimum     = "minimum"
)

// Item renders the item; it expires with the agent's other items.
func (r RunnerReleaseItem) Item() map[string]types.AttributeValue {
	item := agentItem(r.InstanceARN, SortKeyRunnerRelease, entityRunner, r.UpdatedAt)
	if t, err := ParseTime(r.UpdatedAt); err == nil {
		item[AttrExpiresAt] = ExpiresAt(t)
	}
	digests := map[string]types.AttributeValue{}
	for _, platform := range slices.Sorted(maps.Keys(r.Release.SHA256)) {
		digests[platform] = &types.AttributeValueMemberS{Value: r.Release.SHA256[platform]}
	}
	item[AttrValue] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		runnerValueVersion:     &types.AttributeValueMemberS{Value: r.Release.Version},
		runnerValuePublishedAt: &types.AttributeValueMemberS{Value: FormatTime(r.Release.PublishedAt)},
		runnerValueSHA256:      &types.AttributeValueMemberM{Value: digests},
		runnerValueMinimum:     &types.AttributeValueMemberS{Value: r.Minimum},
	}}
	return item
}

// RunnerReleaseFromItem reads a runner release item; anything but one of an
// agent partition with a release version, digests in hex and a minimum
// version is an error.
func RunnerReleaseFromItem(item map[string]types.AttributeValue) (RunnerReleaseItem, error) {
	arn, ok := agentOf(item, SortKeyRunnerRelease)
	if !ok {
		return RunnerReleaseItem{}, fmt.Errorf("runner release item: partition key %q, sort key %q and identifier %q do not name an instance's %s item",
			StringAttr(item, AttrPK), StringAttr(item, AttrSK), StringAttr(item, AttrIdentifier), SortKeyRunnerRelease)
	}
	value, ok := item[AttrValue].(*types.AttributeValueMemberM)
	if !ok {
		return RunnerReleaseItem{}, fmt.Errorf("runner release item: its %s attribute is %s, want a map", AttrValue, describeAttr(item[AttrValue]))
	}
	v := value.Value
	r := RunnerReleaseItem{InstanceARN: arn, UpdatedAt: StringAttr(item, AttrUpdatedAt), Minimum: StringAttr(v, runnerValueMinimum),
		Release: RunnerRelease{Version: StringAttr(v, runnerValueVersion), SHA256: map[string]string{}}}
	if err := ValidateRunnerVersion(r.Release.Version); err != nil {
		return RunnerReleaseItem{}, fmt.Errorf("runner release item: %w", err)
	}
	if err := ValidateRunnerVersion(r.Minimum); err != nil {
		return RunnerReleaseItem{}, fmt.Errorf("runner release item: minimum: %w", err)
	}
	published, err := ParseTime(StringAttr(v, runnerValuePublishedAt))
	if err != nil {
		return RunnerReleaseItem{}, fmt.Errorf("runner release item: %s: %w", runnerValuePublishedAt, err)
	}
	r.Release.PublishedAt = published
	digests, _ := v[runnerValueSHA256].(*types.AttributeValueMemberM)
	if digests != nil {
		for platform := range digests.Value {
			digest := StringAttr(digests.Value, platform)
			if !sha256Pattern.MatchString(digest) {
				return RunnerReleaseItem{}, fmt.Errorf("runner release item: the %s digest %q is not a SHA-256 in hex", platform, digest)
			}
			r.Release.SHA256[platform] = digest
		}
	}
	return r, nil
}

// sha256Pattern is a SHA-256 digest in lower-case hex, as GitHub and
// sha256sum print it.
var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidateSHA256 reports why s is not a SHA-256 digest in lower-case hex.
func ValidateSHA256(s string) error {
	if !sha256Pattern.MatchString(s) {
		return fmt.Errorf("%q is not a SHA-256 digest in lower-case hex", s)
	}
	return nil
}

// AttrRunnerVersion, on a heartbeat item: the version of the runner the
// agent registers with, so that a claim never hands out a runner GitHub
// would send no job to.
const AttrRunnerVersion = "runnerVersion"

// HeartbeatRunnerVersion is the runner version a heartbeat item carries
// ("" when none).
func HeartbeatRunnerVersion(item map[string]types.AttributeValue) string {
	v := StringAttr(item, AttrRunnerVersion)
	if ValidateRunnerVersion(v) != nil {
		return ""
	}
	return v
}
