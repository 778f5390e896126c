package release

import (
	"archive/zip"
	"io/fs"
	"os"
	"testing"
	"time"
)

// brokerPackage is the broker's main package, as its build info names it.
const brokerPackage = "github.com/ec2runners/terraform-provider-ec2runners/internal/broker/cmd/ec2runners-broker"

// brokerArchitectures are Lambda's (x86_64 and arm64), as Go names them.
var brokerArchitectures = []string{"amd64", "arm64"}

// brokerZipTime is the one timestamp the broker's zips record, fixed so
// that the same commit makes the same zip.
var brokerZipTime = time.Date(1980, time.January, 1, 0, 0, 0, 0, time.UTC)

// brokerZip is the broker's Lambda package for arch, as examples/complete
// (variable broker_zip) and CONTRIBUTING.md name it.
func brokerZip(version, arch string) string {
	return "ec2runners-broker_" + version + "_linux_" + arch + ".zip"
}

// brokerSumsFile is the SHA256SUMS of the broker's zips, which
// tools/release-agent-and-broker.sh writes and signs beside the registry's.
func brokerSumsFile(version string) string { return "ec2runners-broker_" + version + "_SHA256SUMS" }

// TestAccRelease_broker checks the broker released with the provider, as a
// pool's stack deploys it (examples/complete/broker.tf): a zip for each of
// Lambda's architectures, listed with its SHA-256 in
// ec2runners-broker_<version>_SHA256SUMS, whose signature gpg verifies
// with the release's key; each holding one file, bootstrap, executable
// (0755) as the provided.al2023 runtime runs it, with the fixed timestamp
// and no extra fields of `zip -X`; that file built as the provider is (the
// same Go, CGO_ENABLED=0, -trimpath, stripped by -s -w) from the broker's
// main package for linux and its architecture, the release's version
// stamped in. And the release uploads exactly these files with the
// agent's (release.extra_files in goreleaser's effective configuration,
// dist/config.yaml).
func TestAccRelease_broker(t *testing.T) {
	requireAcceptance(t)
	s := loadSnapshot(t)
	digests := map[string]string{}
	for _, arch := range brokerArchitectures {
		name := brokerZip(s.version, arch)
		if _, err := os.Stat(s.path(name)); err != nil {
			t.Fatalf("the broker for linux/%s: %v (tools/release-agent-and-broker.sh builds it, tools/release-snapshot.sh copies it into dist/)", arch, err)
		}
		digests[name] = fileSHA256(t, s.path(name))
	}
	checkSignedSums(t, s, brokerSumsFile(s.version), digests)
	provider := providerBuild(t, s)
	for _, arch := range brokerArchitectures {
		name := brokerZip(s.version, arch)
		if bootstrap := brokerBootstrap(t, s, name); bootstrap != nil {
			checkLinuxBinary(t, s, name+": bootstrap", bootstrap, brokerPackage, arch, provider)
		}
	}
	checkReleaseUploads(t, s)
}

// brokerBootstrap: the zip name holds one file, bootstrap, recorded as
// Lambda and reproducibility need it; it returns its content, or nil when
// the zip holds no such file.
func brokerBootstrap(t *testing.T, s *snapshot, name string) []byte {
	t.Helper()
	r, err := zip.OpenReader(s.path(name))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return nil
	}
	defer r.Close()
	var names []string
	for _, f := range r.File {
		names = append(names, f.Name)
	}
	if len(names) != 1 || names[0] != "bootstrap" {
		t.Errorf("%s holds %v, want only bootstrap (the provided.al2023 runtime runs it)", name, names)
		return nil
	}
	f := r.File[0]
	if mode := f.Mode(); mode != 0o755 {
		t.Errorf("%s: bootstrap has the mode %v, want %v (Lambda runs it: executable, a plain file)", name, mode, fs.FileMode(0o755))
	}
	if !f.Modified.Equal(brokerZipTime) {
		t.Errorf("%s: bootstrap is dated %v, want the fixed %v (the same commit makes the same zip)", name, f.Modified, brokerZipTime)
	}
	if len(f.Extra) > 0 {
		t.Errorf("%s: bootstrap has %d bytes of extra fields (owner, timestamps), want none: zip -X", name, len(f.Extra))
	}
	return readZipFile(t, f)
}
