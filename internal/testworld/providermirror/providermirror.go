// Package providermirror installs the provider built from this checkout as
// users install a release: from a Terraform filesystem mirror, under the
// version the checkout ships (.github/actions/lib/provider-version). So
// `terraform init` (which Terragrunt and the actions run) accepts it where
// a configuration pins the provider to its release line, as the examples
// do, and no registry is needed.
package providermirror

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

const (
	// Address is the provider's registry address.
	Address = "registry.terraform.io/ec2runners/ec2runners"
	// Binary is the name of the provider's executable.
	Binary = "terraform-provider-ec2runners"
)

// releaseVersion is a release's version, X.Y.Z.
var releaseVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)

// repoRoot is the repository's root, wherever the test runs.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the repository")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Version is the release this checkout ships, which the claim and release
// actions install and the examples pin: the X.Y.Z that
// .github/actions/lib/provider-version holds (make release checks that a
// release's tag names it).
func Version(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), ".github", "actions", "lib", "provider-version"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(data))
	if !releaseVersion.MatchString(v) {
		t.Fatalf(".github/actions/lib/provider-version holds %q, want a release's version X.Y.Z", v)
	}
	return v
}

// Build builds the provider from this checkout into a filesystem mirror,
// packed as the registry serves it (a zip of version Version), and returns
// the mirror's directory and the zip's path: terraform init installs from
// it as from the registry, and fills the plugin cache.
func Build(t testing.TB) (mirror, archive string) {
	t.Helper()
	version := Version(t)
	dir := t.TempDir()
	binary := filepath.Join(dir, Binary+"_v"+version)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-o", binary, ".")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of the provider: %v\n%s", err, out)
	}
	mirror = filepath.Join(dir, "mirror")
	archive = filepath.Join(mirror, Address, fmt.Sprintf("%s_%s_%s_%s.zip", Binary, version, runtime.GOOS, runtime.GOARCH))
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := zipExecutable(binary, archive); err != nil {
		t.Fatal(err)
	}
	return mirror, archive
}

// zipExecutable writes a zip at archive holding the executable binary.
func zipExecutable(binary, archive string) error {
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	h := &zip.FileHeader{Name: filepath.Base(binary), Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	in, err := os.Open(binary)
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := io.Copy(w, in); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// CLIConfig writes a Terraform CLI configuration that installs the
// provider from mirror and nothing from anywhere else, and returns its
// path (for TF_CLI_CONFIG_FILE).
func CLIConfig(t testing.TB, mirror string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "terraformrc")
	config := fmt.Sprintf(`provider_installation {
  filesystem_mirror {
    path    = %q
    include = [%q]
  }
}
`, filepath.ToSlash(mirror), Address)
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
