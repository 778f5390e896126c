package scripttest

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Releases of the runner and of the agent, as GitHub serves them.

// PublishRunner publishes a release of the stub runner.
func (g *GitHub) PublishRunner(version string, published time.Time) {
	archive := runnerArchive(version)
	sum := sha256.Sum256(archive)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releases = append(g.releases, &runnerRelease{version: version, published: published.UTC().Truncate(time.Second), archive: archive, digest: hex.EncodeToString(sum[:])})
	slices.SortFunc(g.releases, func(a, b *runnerRelease) int { return protocol.CompareRunnerVersions(a.version, b.version) })
}

// TamperRunnerDownloads makes the stub serve runner archives that are not
// what their published digest says (a compromised mirror, say).
func (g *GitHub) TamperRunnerDownloads(tamper bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tamper = tamper
}

// RequireRunner makes the stub refuse runners older than version at once,
// as GitHub does after a critical security release of the runner: its
// releases do not say so.
func (g *GitHub) RequireRunner(version string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.required = version
}

// Policy is what the stub accepts now.
func (g *GitHub) Policy() protocol.RunnerPolicy {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, _ := protocol.RunnerPolicyAt(g.runnerReleases(), time.Now())
	if protocol.CompareRunnerVersions(p.Minimum, g.required) < 0 {
		p.Minimum = g.required
	}
	return p
}

// RunnerReleases are the stub's releases, as the provider reads them.
func (g *GitHub) RunnerReleases() []protocol.RunnerRelease {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runnerReleases()
}

func (g *GitHub) runnerReleases() []protocol.RunnerRelease {
	var out []protocol.RunnerRelease
	for _, r := range g.releases {
		digests := map[string]string{}
		for _, platform := range protocol.RunnerPlatforms {
			digests[platform] = r.digest
		}
		out = append(out, protocol.RunnerRelease{Version: r.version, PublishedAt: r.published, SHA256: digests})
	}
	return out
}

// RunnerReleasesURL is the REST API of the newest runner release.
func (g *GitHub) RunnerReleasesURL() string { return g.URL + "/repos/actions/runner/releases/latest" }

// RunnerDownloadBase is where the runner's release archives are.
func (g *GitHub) RunnerDownloadBase() string { return g.URL + "/actions/runner/releases/download" }

// RunnerArchiveURL is the archive of a runner version for linux-x64.
func (g *GitHub) RunnerArchiveURL(version string) string {
	return g.RunnerDownloadBase() + "/v" + version + "/actions-runner-linux-x64-" + version + ".tar.gz"
}

// RunnerDigest is the SHA-256 the stub publishes for a runner version.
func (g *GitHub) RunnerDigest(version string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.releases {
		if r.version == version {
			return r.digest
		}
	}
	return ""
}

// releaseJSON renders a release as GitHub's REST API does.
func (g *GitHub) releaseJSON(r *runnerRelease) map[string]any {
	var assets []map[string]any
	for _, platform := range []string{"linux-arm64", "linux-x64", "osx-x64", "win-x64"} {
		name := "actions-runner-" + platform + "-" + r.version + ".tar.gz"
		assets = append(assets, map[string]any{"name": name, "digest": "sha256:" + r.digest,
			"browser_download_url": g.RunnerDownloadBase() + "/v" + r.version + "/" + name})
	}
	return map[string]any{"tag_name": "v" + r.version, "name": "v" + r.version, "draft": false, "prerelease": false,
		"published_at": r.published.Format(time.RFC3339), "assets": assets}
}

func (g *GitHub) listReleases(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	var list []map[string]any
	for i := len(g.releases) - 1; i >= 0; i-- {
		list = append(list, g.releaseJSON(g.releases[i]))
	}
	g.apiCalls = append(g.apiCalls, "list-runner-releases")
	g.mu.Unlock()
	writeJSON(w, http.StatusOK, list)
}

func (g *GitHub) latestRelease(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	latest := g.releaseJSON(g.releases[len(g.releases)-1])
	g.apiCalls = append(g.apiCalls, "latest-runner-release")
	g.mu.Unlock()
	writeJSON(w, http.StatusOK, latest)
}

// runnerArchive serves /actions/runner/releases/download/v<version>/<asset>.
func (g *GitHub) runnerArchive(w http.ResponseWriter, r *http.Request) {
	version := strings.TrimPrefix(r.PathValue("tag"), "v")
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rel := range g.releases {
		if rel.version == version && strings.HasSuffix(r.PathValue("asset"), "-"+version+".tar.gz") {
			g.events = append(g.events, "download runner "+version)
			if g.tamper {
				_, _ = w.Write(append([]byte("tampered"), rel.archive...))
				return
			}
			_, _ = w.Write(rel.archive)
			return
		}
	}
	http.NotFound(w, r)
}

// ServeAgent publishes an agent binary as the release asset of version for
// arch, and returns the URL of the release's directory (agent_download_url).
func (g *GitHub) ServeAgent(version, arch string, binary []byte) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.agents["v"+version+"/ec2runners-agent_"+version+"_linux_"+arch] = binary
	return g.URL + "/ec2runners/releases/download/v" + version
}

func (g *GitHub) agentAsset(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	binary, ok := g.agents[r.PathValue("tag")+"/"+r.PathValue("asset")]
	if ok {
		g.events = append(g.events, "download agent "+r.PathValue("asset"))
	}
	g.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(binary)
}
