package github

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// RunnerReleasesPath lists the releases of the GitHub Actions runner,
// newest first, with the SHA-256 digests GitHub computes for every asset.
const RunnerReleasesPath = "/repos/actions/runner/releases"

// RunnerReleases lists the runner's recent releases, to apply GitHub's
// runner version policy to (protocol.RunnerPolicyAt).
func (c *Client) RunnerReleases(ctx context.Context) ([]protocol.RunnerRelease, error) {
	op := operation{what: "list the releases of actions/runner", hint: func(int) string { return "" }}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.what, err)
	}
	body, _, err := c.call(ctx, op, "GET", RunnerReleasesPath+"?per_page=10", bearer)
	if err != nil {
		return nil, err
	}
	var list []json.RawMessage
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", op.what, err)
	}
	var out []protocol.RunnerRelease
	for _, raw := range list {
		if r, err := ParseRunnerRelease(raw); err == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// ParseRunnerRelease reads one release of the runner as GitHub's REST API
// gives it: its tag (v2.330.0), when it was published, and the digests
// ("sha256:<hex>") of its Linux archives,
// actions-runner-<platform>-<version>.tar.gz. Drafts and prereleases are
// not releases runners may use.
func ParseRunnerRelease(raw []byte) (protocol.RunnerRelease, error) {
	var rel struct {
		TagName     string    `json:"tag_name"`
		Draft       bool      `json:"draft"`
		Prerelease  bool      `json:"prerelease"`
		PublishedAt time.Time `json:"published_at"`
		Assets      []struct {
			Name   string `json:"name"`
			Digest string `json:"digest"`
		} `json:"assets"`
	}
	if err := json.Unmarshal(raw, &rel); err != nil {
		return protocol.RunnerRelease{}, fmt.Errorf("a runner release: %w", err)
	}
	r := protocol.RunnerRelease{Version: strings.TrimPrefix(rel.TagName, "v"), PublishedAt: rel.PublishedAt, SHA256: map[string]string{}}
	if err := protocol.ValidateRunnerVersion(r.Version); err != nil {
		return protocol.RunnerRelease{}, err
	}
	if rel.Draft || rel.Prerelease {
		return protocol.RunnerRelease{}, fmt.Errorf("runner %s is a draft or a prerelease", r.Version)
	}
	for _, platform := range protocol.RunnerPlatforms {
		want := "actions-runner-" + platform + "-" + r.Version + ".tar.gz"
		for _, asset := range rel.Assets {
			if hex, ok := strings.CutPrefix(asset.Digest, "sha256:"); ok && asset.Name == want && protocol.ValidateSHA256(strings.ToLower(hex)) == nil {
				r.SHA256[platform] = strings.ToLower(hex)
			}
		}
	}
	return r, nil
}
