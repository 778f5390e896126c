package agentscript

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
)

// Release is an agent release: its version (the provider's) and the SHA-256
// of its binary for each architecture the bootstrap knows (amd64, arm64).
// A provider built for a release knows its own (Built); a development
// build knows none, and its user data runs only an agent baked into the
// image.
type Release struct {
	Version string
	SHA256  map[string]string
}

// Architectures are the agent's platforms, as Go and the release assets
// name them.
var Architectures = []string{"amd64", "arm64"}

// ReleaseRepository is where the agent is released, with the provider.
const ReleaseRepository = "https://github.com/ec2runners/terraform-provider-ec2runners"

// builtDigests is set by the release build (.goreleaser.yml: -X with
// "amd64=<hex>,arm64=<hex>", which tools/release-agent-and-broker.sh
// computes from the binaries it builds for the release): the digests of the
// agent binaries released with this provider.
var builtDigests string

// Built is the agent released with this provider of version.
func Built(version string) Release {
	r := Release{Version: version, SHA256: map[string]string{}}
	for _, pair := range strings.Split(builtDigests, ",") {
		if arch, digest, ok := strings.Cut(pair, "="); ok {
			r.SHA256[arch] = digest
		}
	}
	return r
}

func (r Release) validate() error {
	if r.Version == "" {
		return fmt.Errorf("agent: no version")
	}
	for _, arch := range slices.Sorted(maps.Keys(r.SHA256)) {
		if !slices.Contains(Architectures, arch) || !agent.SHA256Pattern.MatchString(r.SHA256[arch]) {
			return fmt.Errorf("agent: %q=%q is not an architecture's SHA-256", arch, r.SHA256[arch])
		}
	}
	return nil
}

// defaultDownloadURL is the directory of the release's assets on GitHub.
func (r Release) defaultDownloadURL() string {
	return ReleaseRepository + "/releases/download/v" + r.Version
}

// AssetName is the release asset of the agent binary for arch.
func AssetName(version, arch string) string {
	return "ec2runners-agent_" + version + "_linux_" + arch
}
