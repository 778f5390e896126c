package release

import (
	"archive/zip"
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	"time"
)

const (
	projectName     = "terraform-provider-ec2runners"
	providerAddress = "registry.terraform.io/ec2runners/ec2runners"

	// DistEnv names another directory to check instead of dist/.
	DistEnv = "EC2RUNNERS_RELEASE_DIST"
	// defaultDist is dist/ relative to this package's directory, where
	// `go test` runs the tests.
	defaultDist = "../../../dist"
	// signingKeyFile is the public half of the key that signed SHA256SUMS,
	// which make release-snapshot exports beside the archives (a release's
	// key is the one registered with the registry).
	signingKeyFile = "signing-key.asc"
	// manifestFile is the registry manifest in the repository.
	manifestFile = "../../../terraform-registry-manifest.json"
)

var sumsName = regexp.MustCompile(`^` + projectName + `_(.+)_SHA256SUMS$`)

// snapshot is a release build in dist/, as goreleaser wrote it.
type snapshot struct {
	dir     string
	version string
	// sums are SHA256SUMS: file name to SHA-256 in hex.
	sums map[string]string
	// zips are the archives by platform ("linux_amd64") to file name.
	zips map[string]string
}

func (s *snapshot) path(name string) string { return filepath.Join(s.dir, name) }

func (s *snapshot) sumsFile() string { return fmt.Sprintf("%s_%s_SHA256SUMS", projectName, s.version) }

func (s *snapshot) platforms() []string {
	var out []string
	for p := range s.zips {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// hostPlatform is the platform terraform installs for here.
func hostPlatform() string { return runtime.GOOS + "_" + runtime.GOARCH }

// requireAcceptance skips without TF_ACC, as the provider's acceptance
// tests do: these need a release build, terraform and the emulator.
func requireAcceptance(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("an acceptance test: set TF_ACC=1 (make test builds the snapshot it checks, then runs it)")
	}
}

// loadSnapshot reads dist/ (or DistEnv). A missing or partial build fails
// the test: it is built by make release-snapshot, which make test runs
// first, so its absence is a broken setup, never a reason to skip.
func loadSnapshot(t *testing.T) *snapshot {
	t.Helper()
	dir := cmp.Or(os.Getenv(DistEnv), defaultDist)
	hint := "build it with `make release-snapshot SNAPSHOT_PLATFORMS=host` (make test does), or set " + DistEnv
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("no release build to check: %v; %s", err, hint)
	}
	s := &snapshot{dir: dir, sums: map[string]string{}, zips: map[string]string{}}
	for _, e := range entries {
		if m := sumsName.FindStringSubmatch(e.Name()); m != nil {
			if s.version != "" {
				t.Fatalf("%s holds two SHA256SUMS files (versions %s and %s); %s", dir, s.version, m[1], hint)
			}
			s.version = m[1]
		}
	}
	if s.version == "" {
		t.Fatalf("%s has no %s_<version>_SHA256SUMS; %s", dir, projectName, hint)
	}
	s.sums = readSums(t, s.path(s.sumsFile()))
	zipName := regexp.MustCompile(`^` + regexp.QuoteMeta(projectName+"_"+s.version+"_") + `([a-z0-9]+_[a-z0-9]+)\.zip$`)
	for name := range s.sums {
		if m := zipName.FindStringSubmatch(name); m != nil {
			s.zips[m[1]] = name
		}
	}
	if len(s.zips) == 0 {
		t.Fatalf("%s lists no archive", s.sumsFile())
	}
	return s
}

// readSums reads a SHA256SUMS file: file name to SHA-256 in hex.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		sum, name, ok := strings.Cut(lines.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("%s: line %q is not `<sha256>  <file>`", filepath.Base(path), lines.Text())
		}
		sums[name] = sum
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// checkSignedSums: the SHA256SUMS file name lists exactly the files of
// digests (file name to SHA-256 in hex), with those digests, and gpg
// verifies its signature with the release's key.
func checkSignedSums(t *testing.T, s *snapshot, name string, digests map[string]string) {
	t.Helper()
	if _, err := os.Stat(s.path(name)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	sums := readSums(t, s.path(name))
	for _, file := range slices.Sorted(maps.Keys(digests)) {
		if sums[file] != digests[file] {
			t.Errorf("%s lists %s with SHA-256 %q; the file's is %s", name, file, sums[file], digests[file])
		}
	}
	if got, want := slices.Sorted(maps.Keys(sums)), slices.Sorted(maps.Keys(digests)); !slices.Equal(got, want) {
		t.Errorf("%s lists %v, want %v", name, got, want)
	}
	verifySignature(t, s, name)
}

// TestAccRelease_layout checks dist/ against what the Terraform Registry
// requires of a release: an archive per platform named
// terraform-provider-ec2runners_<version>_<os>_<arch>.zip holding the
// binary, SHA256SUMS listing every archive and the manifest with their
// hashes, a detached GPG signature of SHA256SUMS made with an RSA or DSA key
// (the only kinds the registry takes), and the manifest, renamed
// <name>_<version>_manifest.json, saying protocol version 6.
func TestAccRelease_layout(t *testing.T) {
	requireAcceptance(t)
	s := loadSnapshot(t)
	t.Logf("release %s in %s: %s", s.version, s.dir, strings.Join(s.platforms(), ", "))

	if _, ok := s.zips[hostPlatform()]; !ok {
		t.Errorf("no archive for this machine's platform %s: the install test needs one", hostPlatform())
	}
	for name, want := range s.sums {
		if got := fileSHA256(t, s.path(name)); got != want {
			t.Errorf("%s: SHA-256 %s, SHA256SUMS says %s", name, got, want)
		}
	}
	matches, err := filepath.Glob(s.path(projectName + "_*.zip"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range matches {
		if _, ok := s.sums[filepath.Base(m)]; !ok {
			t.Errorf("%s is not in %s", filepath.Base(m), s.sumsFile())
		}
	}
	for platform, name := range s.zips {
		checkArchive(t, s, platform, name)
	}

	manifest := fmt.Sprintf("%s_%s_manifest.json", projectName, s.version)
	if _, ok := s.sums[manifest]; !ok {
		t.Errorf("the manifest %s is not in %s", manifest, s.sumsFile())
	}
	// The registry ingests the archives and the manifest, and rejects a
	// SHA256SUMS that lists anything else (a signature, an SBOM, the agent's
	// binaries and the broker's zips, which have SHA256SUMS of their own:
	// TestAccRelease_agent, TestAccRelease_broker).
	for name := range s.sums {
		if name != manifest && !slices.Contains(slices.Collect(maps.Values(s.zips)), name) {
			t.Errorf("%s lists %s, which is neither an archive nor the manifest", s.sumsFile(), name)
		}
	}
	got, err := os.ReadFile(s.path(manifest))
	if err != nil {
		t.Errorf("the renamed manifest: %v", err)
	}
	want, err := os.ReadFile(manifestFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from terraform-registry-manifest.json:\n%s", manifest, got)
	}
	if !bytes.Contains(want, []byte(`"protocol_versions": ["6.0"]`)) {
		t.Errorf("terraform-registry-manifest.json must declare protocol version 6.0 (the plugin framework's):\n%s", want)
	}

	verifySignature(t, s, s.sumsFile())
}

// checkArchive: the zip holds exactly the provider's binary, named as
// terraform looks for it.
func checkArchive(t *testing.T, s *snapshot, platform, name string) {
	t.Helper()
	r, err := zip.OpenReader(s.path(name))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	defer r.Close()
	want := projectName + "_v" + s.version
	if strings.HasPrefix(platform, "windows_") {
		want += ".exe"
	}
	var names []string
	for _, f := range r.File {
		names = append(names, f.Name)
	}
	if len(names) != 1 || names[0] != want {
		t.Errorf("%s holds %v, want only %s", name, names, want)
	}
}

// verifySignature checks the detached signature of a SHA256SUMS file in
// the build (sums, its name) with gpg, against a keyring holding only the
// exported public key, as the registry does with the key a publisher
// registers.
func verifySignature(t *testing.T, s *snapshot, sums string) {
	t.Helper()
	gpg, err := exec.LookPath("gpg")
	if err != nil {
		t.Fatalf("gpg is needed to check the signature of SHA256SUMS: %v", err)
	}
	home := gpgHome(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gpg, append([]string{"--homedir", home, "--batch", "--no-tty", "--status-fd", "1"}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("gpg %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	key := s.path(signingKeyFile)
	if _, err := os.Stat(key); err != nil {
		t.Fatalf("the signing key's public half: %v (make release-snapshot exports it)", err)
	}
	run("--import", key)
	for _, line := range strings.Split(run("--with-colons", "--list-keys"), "\n") {
		fields := strings.Split(line, ":")
		if fields[0] == "pub" && len(fields) > 3 && fields[3] != "1" && fields[3] != "17" {
			t.Errorf("the signing key's algorithm is %s: the registry takes only RSA (1) and DSA (17) keys", fields[3])
		}
	}
	sig := s.path(sums + ".sig")
	out := run("--verify", sig, s.path(sums))
	if !strings.Contains(out, "[GNUPG:] VALIDSIG") {
		t.Errorf("gpg --verify of %s did not report a valid signature:\n%s", filepath.Base(sig), out)
	}
	data, err := os.ReadFile(sig)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(data, []byte("-----BEGIN")) {
		t.Errorf("%s is ASCII-armored; the registry expects a binary detached signature", filepath.Base(sig))
	}
}

// gpgHome is an empty GnuPG home, whose agent (if gpg started one) is
// stopped at the end of the test.
func gpgHome(t *testing.T) string {
	home, err := os.MkdirTemp("", "gpg-") // short: gpg's socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = exec.CommandContext(ctx, "gpgconf", "--homedir", home, "--kill", "all").Run()
		os.RemoveAll(home)
	})
	return home
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
