package release

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
)

const (
	// agentPackage is the agent's main package, as its build info names it.
	agentPackage = "github.com/ec2runners/terraform-provider-ec2runners/internal/agent/cmd/ec2runners-agent"
	// repositoryRoot is where goreleaser ran, relative to this package's
	// directory: release.extra_files name files there.
	repositoryRoot = "../../.."
)

// agentSumsFile is the SHA256SUMS of the agent's binaries, which
// tools/release-agents.sh writes and signs beside the registry's.
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
// uploads exactly these files (release.extra_files in goreleaser's
// effective configuration, dist/config.yaml).
func TestAccRelease_agent(t *testing.T) {
	requireAcceptance(t)
	s := loadSnapshot(t)
	digests := checkAgentSums(t, s)
	provider := providerBuild(t, s)
	for _, arch := range agentscript.Architectures {
		checkAgentBinary(t, s, arch, provider)
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
			t.Fatalf("the agent for linux/%s: %v (tools/release-agents.sh builds it, tools/release-snapshot.sh copies it into dist/)", arch, err)
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
	name := agentSumsFile(s.version)
	if _, err := os.Stat(s.path(name)); err != nil {
		t.Fatalf("the agent's SHA256SUMS: %v", err)
	}
	sums := readSums(t, s.path(name))
	var want []string
	for _, arch := range agentscript.Architectures {
		asset := agentscript.AssetName(s.version, arch)
		want = append(want, asset)
		if sums[asset] != digests[arch] {
			t.Errorf("%s lists %s with SHA-256 %q; the file's is %s", name, asset, sums[asset], digests[arch])
		}
	}
	if got := slices.Sorted(maps.Keys(sums)); !slices.Equal(got, want) {
		t.Errorf("%s lists %v, want the agent's binaries %v", name, got, want)
	}
	verifySignature(t, s, name)
	return digests
}

// providerBuild is the build info of the provider binary for this machine.
func providerBuild(t *testing.T, s *snapshot) *buildinfo.BuildInfo {
	t.Helper()
	info, err := buildinfo.Read(bytes.NewReader(providerBinary(t, s, hostPlatform())))
	if err != nil {
		t.Fatalf("the build info of the provider for %s: %v", hostPlatform(), err)
	}
	return info
}

// providerBinary is the binary in the archive of platform.
func providerBinary(t *testing.T, s *snapshot, platform string) []byte {
	t.Helper()
	r, err := zip.OpenReader(s.path(s.zips[platform]))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.File) != 1 {
		t.Fatalf("%s holds %d files, want the provider's binary alone", s.zips[platform], len(r.File))
	}
	f, err := r.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func setting(info *buildinfo.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// checkAgentBinary: the agent for arch is a static, stripped linux binary
// of the agent's package, built with the provider's Go and flags, and holds
// the release's version. (With -trimpath the Go toolchain records no
// -ldflags: the version is looked for in the binary, and run below.)
func checkAgentBinary(t *testing.T, s *snapshot, arch string, provider *buildinfo.BuildInfo) {
	t.Helper()
	name := agentscript.AssetName(s.version, arch)
	info, err := buildinfo.ReadFile(s.path(name))
	if err != nil {
		t.Errorf("%s: no Go build info: %v", name, err)
		return
	}
	if info.Path != agentPackage {
		t.Errorf("%s is a build of %s, want %s", name, info.Path, agentPackage)
	}
	if info.GoVersion != provider.GoVersion {
		t.Errorf("%s was built with %s, the provider with %s", name, info.GoVersion, provider.GoVersion)
	}
	for key, want := range map[string]string{"GOOS": "linux", "GOARCH": arch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if got := setting(info, key); got != want {
			t.Errorf("%s: built with %s=%q, want %q", name, key, got, want)
		}
		if key == "CGO_ENABLED" || key == "-trimpath" {
			if p := setting(provider, key); p != want {
				t.Errorf("the provider was built with %s=%q, want %q as the agent", key, p, want)
			}
		}
	}
	f, err := elf.Open(s.path(name))
	if err != nil {
		t.Errorf("%s is not an ELF binary: %v", name, err)
		return
	}
	defer f.Close()
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]; f.Machine != want {
		t.Errorf("%s is for %s, want %s", name, f.Machine, want)
	}
	var unstripped []string
	for _, section := range f.Sections {
		if section.Name == ".symtab" || strings.HasPrefix(section.Name, ".debug_") || strings.HasPrefix(section.Name, ".zdebug_") {
			unstripped = append(unstripped, section.Name)
		}
	}
	if len(unstripped) > 0 {
		t.Errorf("%s has the sections %v: not built with -s -w", name, unstripped)
	}
	data, err := os.ReadFile(s.path(name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(s.version)) {
		t.Errorf("%s does not hold the version %s (-X main.version)", name, s.version)
	}
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

// checkReleaseUploads: what a release uploads beside goreleaser's own
// artifacts, release.extra_files, is what the snapshot holds: the agent's
// binaries, their SHA256SUMS and its signature, and the renamed manifest.
// A snapshot publishes nothing, so tools/release-snapshot.sh copies them
// into dist/; the files release.extra_files names in the repository must
// be those copies. goreleaser writes its effective configuration to
// dist/config.yaml.
func checkReleaseUploads(t *testing.T, s *snapshot) {
	t.Helper()
	data, err := os.ReadFile(s.path("config.yaml"))
	if err != nil {
		if os.Getenv(DistEnv) != "" {
			t.Logf("not checking release.extra_files: %v", err)
			return
		}
		t.Fatalf("goreleaser's effective configuration: %v", err)
	}
	var config struct {
		Release struct {
			ExtraFiles []struct {
				Glob         string `yaml:"glob"`
				NameTemplate string `yaml:"name_template"`
			} `yaml:"extra_files"`
		} `yaml:"release"`
	}
	if err := yaml.Unmarshal(data, &config); err != nil {
		t.Fatalf("dist/config.yaml: %v", err)
	}
	apply := func(text string) string {
		t.Helper()
		tmpl, err := template.New("").Option("missingkey=error").Parse(text)
		var b strings.Builder
		if err == nil {
			err = tmpl.Execute(&b, map[string]string{"ProjectName": projectName, "Version": s.version})
		}
		if err != nil {
			t.Fatalf("release.extra_files: %q: %v (the test knows {{ .ProjectName }} and {{ .Version }} only)", text, err)
		}
		return b.String()
	}
	uploads := map[string]string{} // name to file in the repository
	for _, extra := range config.Release.ExtraFiles {
		files, err := filepath.Glob(filepath.Join(repositoryRoot, apply(extra.Glob)))
		if err != nil {
			t.Fatalf("release.extra_files: %q: %v", extra.Glob, err)
		}
		for _, file := range files {
			name := filepath.Base(file)
			if extra.NameTemplate != "" {
				name = apply(extra.NameTemplate)
			}
			uploads[name] = file
		}
	}
	want := []string{agentSumsFile(s.version), agentSumsFile(s.version) + ".sig", projectName + "_" + s.version + "_manifest.json"}
	for _, arch := range agentscript.Architectures {
		want = append(want, agentscript.AssetName(s.version, arch))
	}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(uploads)); !slices.Equal(got, want) {
		t.Errorf("release.extra_files uploads %v, want %v", got, want)
	}
	for _, name := range want {
		if file, ok := uploads[name]; ok && fileSHA256(t, file) != fileSHA256(t, s.path(name)) {
			t.Errorf("release.extra_files uploads %s as %s, which differs from the snapshot's", file, name)
		}
	}
}
