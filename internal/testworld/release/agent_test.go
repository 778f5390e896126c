package release

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
)

// agentPackage is the agent's main package, as its build info names it.
const agentPackage = "github.com/ec2runners/terraform-provider-ec2runners/internal/agent/cmd/ec2runners-agent"

// agentSumsFile is the SHA256SUMS of the agent's binaries, which
// tools/release-agent-and-broker.sh writes and signs beside the registry's.
func agentSumsFile(version string) string { return "ec2runners-agent_" + version + "_SHA256SUMS" }

// builtDigests matches the value of agentscript.builtDigests a release
// build sets with -X: "amd64=<sha256>,arm64=<sha256>".
var builtDigests = func() *regexp.Regexp {
	arch := "(?:" + strings.Join(agentscript.Architectures, "|") + ")=[0-9a-f]{64}"
	return regexp.MustCompile(arch + "(?:," + arch + ")*")
}()

// TestAccRelease_agent checks the agent released with the provider, as the
// user data the provider renders fetches it: a raw binary for each
// architecture the bootstrap knows (agentscript.AssetName), listed with
// its SHA-256 in ec2runners-agent_<version>_SHA256SUMS, whose signature
// gpg verifies with the release's key; built as the provider is (the same
// Go, CGO_ENABLED=0, -trimpath, stripped by -s -w) for linux and its
// architecture, the release's version stamped in (the agent for this
// machine runs and `version` prints it). Every provider binary embeds
// exactly those digests (agentscript.builtDigests), and the release
// uploads exactly these files with the broker's (release.extra_files in
// goreleaser's effective configuration, dist/config.yaml).
func TestAccRelease_agent(t *testing.T) {
	requireAcceptance(t)
	s := loadSnapshot(t)
	digests := checkAgentSums(t, s)
	provider := providerBuild(t, s)
	for _, arch := range agentscript.Architectures {
		name := agentscript.AssetName(s.version, arch)
		binary, err := os.ReadFile(s.path(name))
		if err != nil {
			t.Fatal(err)
		}
		checkLinuxBinary(t, s, name, binary, agentPackage, arch, provider)
	}
	runHostAgent(t, s)
	for _, platform := range s.platforms() {
		checkEmbeddedDigests(t, s, platform, digests)
	}
	checkReleaseUploads(t, s)
}

// agentDigests are the SHA-256 of the agent binaries in the build, by
// architecture.
func agentDigests(t *testing.T, s *snapshot) map[string]string {
	t.Helper()
	digests := map[string]string{}
	for _, arch := range agentscript.Architectures {
		name := agentscript.AssetName(s.version, arch)
		if _, err := os.Stat(s.path(name)); err != nil {
			t.Fatalf("the agent for linux/%s: %v (tools/release-agent-and-broker.sh builds it, tools/release-snapshot.sh copies it into dist/)", arch, err)
		}
		digests[arch] = fileSHA256(t, s.path(name))
	}
	return digests
}

// checkAgentSums: the agent's SHA256SUMS lists its binaries and nothing
// else, with their digests, and is signed. It returns the digests.
func checkAgentSums(t *testing.T, s *snapshot) map[string]string {
	t.Helper()
	digests := agentDigests(t, s)
	files := map[string]string{}
	for arch, digest := range digests {
		files[agentscript.AssetName(s.version, arch)] = digest
	}
	checkSignedSums(t, s, agentSumsFile(s.version), files)
	return digests
}

// runHostAgent: the agent for this machine runs, and `version` prints the
// release's version, the one the user data compares with the agent's.
func runHostAgent(t *testing.T, s *snapshot) {
	t.Helper()
	if runtime.GOOS != "linux" || !slices.Contains(agentscript.Architectures, runtime.GOARCH) {
		t.Logf("no agent runs on %s: not running one", hostPlatform())
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	binary, err := filepath.Abs(s.path(agentscript.AssetName(s.version, runtime.GOARCH)))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, binary, "version").CombinedOutput()
	if err != nil {
		t.Errorf("%s version: %v\n%s", filepath.Base(binary), err, out)
		return
	}
	if got := strings.TrimSpace(string(out)); got != s.version {
		t.Errorf("%s version printed %q, want the release's version %s", filepath.Base(binary), got, s.version)
	}
}

// checkEmbeddedDigests: the provider binary of platform holds the agent's
// digests as agentscript.builtDigests, and no other. The binary is
// stripped (-s), so the value is found by its form rather than by the
// variable's symbol; the install test sees the provider render it.
func checkEmbeddedDigests(t *testing.T, s *snapshot, platform string, digests map[string]string) {
	t.Helper()
	found := map[string]bool{}
	for _, m := range builtDigests.FindAll(providerBinary(t, s, platform), -1) {
		found[string(m)] = true
	}
	if len(found) != 1 {
		t.Errorf("the provider for %s holds %d sets of agent digests %v, want one: built without -X .../agentscript.builtDigests?",
			platform, len(found), slices.Sorted(maps.Keys(found)))
		return
	}
	for value := range found {
		got := map[string]string{}
		for _, pair := range strings.Split(value, ",") {
			arch, digest, _ := strings.Cut(pair, "=")
			got[arch] = digest
		}
		if !maps.Equal(got, digests) {
			t.Errorf("the provider for %s embeds the agent digests %s, want those of the agent binaries %v", platform, value, digests)
		}
	}
}
