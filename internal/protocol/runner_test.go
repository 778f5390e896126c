package protocol

import (
	"testing"
	"time"
)

func TestCompareRunnerVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"2.330.0", "2.330.0", 0},
		{"2.330.0", "2.331.0", -1},
		{"2.400.0", "2.39.0", 1}, // numbers, not text
		{"3.0.0", "2.999.9", 1},
		{"", "2.329.0", -1},
		{"v2.330.0", "2.0.0", -1},
	} {
		if got := CompareRunnerVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareRunnerVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// GitHub's policy: the newest, or one whose successor came out less than
// 30 days ago, and never below 2.329.0.
func TestRunnerPolicyAt(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	releases := []RunnerRelease{
		{Version: "2.331.0", PublishedAt: now.Add(-20 * day)},
		{Version: "2.328.0", PublishedAt: now.Add(-200 * day)},
		{Version: "2.329.0", PublishedAt: now.Add(-100 * day)},
		{Version: "2.330.0", PublishedAt: now.Add(-40 * day)},
		{Version: "not-a-version", PublishedAt: now},
	}
	p, ok := RunnerPolicyAt(releases, now)
	if !ok || p.Newest.Version != "2.331.0" || p.Minimum != "2.330.0" {
		t.Fatalf("policy %+v, %v; want newest 2.331.0, minimum 2.330.0", p, ok)
	}
	for v, want := range map[string]bool{"2.331.0": true, "2.330.0": true, "2.329.0": false, "2.332.0": true, "": false} {
		if p.Accepts(v) != want {
			t.Errorf("Accepts(%q) = %v", v, !want)
		}
	}
	if until, ok := AcceptedUntil(releases, "2.330.0"); !ok || !until.Equal(now.Add(10*day)) {
		t.Errorf("2.330.0 accepted until %v, %v; want 10 days from now", until, ok)
	}
	if _, ok := AcceptedUntil(releases, "2.331.0"); ok {
		t.Error("the newest has an end")
	}
	// Within 30 days of 2.329.0's successor, it is still never below the
	// minimum to register.
	p, _ = RunnerPolicyAt(releases, now.Add(-50*day))
	if p.Minimum != "2.329.0" {
		t.Errorf("50 days ago: minimum %s, want 2.329.0", p.Minimum)
	}
	if _, ok := RunnerPolicyAt([]RunnerRelease{{Version: "latest"}}, now); ok {
		t.Error("a policy from no valid release")
	}
}

func TestRunnerReleaseItemRoundTrip(t *testing.T) {
	arn := "arn:aws:ec2:eu-west-1:123456789012:instance/i-0123456789abcdef0"
	digest := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	in := RunnerReleaseItem{InstanceARN: arn, Minimum: "2.330.0", UpdatedAt: "2026-11-27T00:00:00Z",
		Release: RunnerRelease{Version: "2.331.0", PublishedAt: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), SHA256: map[string]string{"linux-x64": digest}}}
	out, err := RunnerReleaseFromItem(in.Item())
	if err != nil || out.Release.Version != "2.331.0" || out.Minimum != "2.330.0" || out.Release.SHA256["linux-x64"] != digest ||
		!out.Release.PublishedAt.Equal(in.Release.PublishedAt) || out.InstanceARN != arn {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	bad := in
	bad.Release.SHA256 = map[string]string{"linux-x64": "NOT-HEX"}
	if _, err := RunnerReleaseFromItem(bad.Item()); err == nil {
		t.Error("an item with a digest that is not one was read")
	}
	bad = in
	bad.Minimum = "latest"
	if _, err := RunnerReleaseFromItem(bad.Item()); err == nil {
		t.Error("an item with a minimum that is not a version was read")
	}
}
