package release

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/tfcli"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"golang.org/x/mod/sumdb/dirhash"
)

// lockEntry is a provider block of .terraform.lock.hcl.
type lockEntry struct {
	Address     string   `hcl:"address,label"`
	Version     string   `hcl:"version"`
	Constraints string   `hcl:"constraints,optional"`
	Hashes      []string `hcl:"hashes"`
}

// checkLockHashes: the lock names this provider at the build's version, and
// every hash in it is an archive's h1 (the hash of its contents) or the zh
// (the SHA-256, as in SHA256SUMS) of a file SHA256SUMS lists: terraform
// records one for each line, the manifest's too.
func checkLockHashes(t *testing.T, s *snapshot, lock lockEntry) {
	t.Helper()
	if lock.Version != s.version {
		t.Errorf("the lock file has version %q, want %q", lock.Version, s.version)
	}
	known := map[string]bool{}
	for _, name := range s.zips {
		known[h1(t, s.path(name))] = true
	}
	for _, sum := range s.sums {
		known["zh:"+sum] = true
	}
	if len(lock.Hashes) == 0 {
		t.Errorf("the lock file has no hash")
	}
	for _, h := range lock.Hashes {
		if !known[h] {
			t.Errorf("the lock file's hash %s is none of the release's", h)
		}
	}
}

// h1 is terraform's "h1:" hash of a provider archive: the Go module dirhash
// of its contents.
func h1(t *testing.T, zipPath string) string {
	t.Helper()
	h, err := dirhash.HashZip(zipPath, dirhash.Hash1)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// terraform is a working directory with the test's configuration, and a
// CLI configuration that says where this provider is installed from.
type terraform struct {
	t         *testing.T
	bin       string
	dir       string
	env       []string
	vars      []string
	destroyed bool
}

func newTerraform(t *testing.T, s *snapshot, cliConfig string, env ...string) *terraform {
	t.Helper()
	bin := tfcli.Must(t)
	root := t.TempDir()
	tf := &terraform{t: t, bin: bin, dir: filepath.Join(root, "work")}
	cliConfigFile := filepath.Join(root, "terraformrc")
	writeFile(t, cliConfigFile, cliConfig)
	mkdir(t, tf.dir)
	writeFile(t, filepath.Join(tf.dir, "main.tf"), fmt.Sprintf(configuration, s.version, region))

	// Nothing from the caller's environment may point terraform or the
	// provider elsewhere (a plugin cache, dev_overrides, AWS settings).
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "TF_") && !strings.HasPrefix(k, "AWS_") && k != "SSL_CERT_FILE" {
			tf.env = append(tf.env, kv)
		}
	}
	tf.env = append(tf.env, "TF_CLI_CONFIG_FILE="+cliConfigFile, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	tf.env = append(tf.env, env...)
	return tf
}

// checkInstalled: init unpacked the binary where terraform runs it from.
func checkInstalled(t *testing.T, tf *terraform, s *snapshot) {
	t.Helper()
	host := hostPlatform()
	binary := filepath.Join(tf.dir, ".terraform", "providers", filepath.FromSlash(providerAddress), s.version, host, projectName+"_v"+s.version)
	if strings.HasPrefix(host, "windows_") {
		binary += ".exe"
	}
	if _, err := os.Stat(binary); err != nil {
		t.Errorf("init did not unpack the provider's binary: %v", err)
	}
}

func (tf *terraform) run(args ...string) (string, error) {
	tf.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tf.bin, append(args, "-no-color")...)
	cmd.Dir, cmd.Env = tf.dir, tf.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	started := time.Now()
	err := cmd.Run()
	result := "ok"
	if err != nil {
		result = err.Error()
	}
	tf.t.Logf("terraform %s: %s, %s", args[0], time.Since(started).Round(10*time.Millisecond), result)
	return out.String(), err
}

func (tf *terraform) mustRun(args ...string) string {
	tf.t.Helper()
	out, err := tf.run(args...)
	if err != nil {
		tf.t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (tf *terraform) output(name string, v any) {
	tf.t.Helper()
	cmd := exec.Command(tf.bin, "output", "-json", name)
	cmd.Dir, cmd.Env = tf.dir, tf.env
	out, err := cmd.Output()
	if err != nil {
		tf.t.Fatalf("terraform output %s: %v", name, err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		tf.t.Fatalf("terraform output %s: %v\n%s", name, err, out)
	}
}

// readLock parses .terraform.lock.hcl and returns its one provider.
func (tf *terraform) readLock() lockEntry {
	tf.t.Helper()
	path := filepath.Join(tf.dir, ".terraform.lock.hcl")
	file, diags := hclparse.NewParser().ParseHCLFile(path)
	if diags.HasErrors() {
		tf.t.Fatalf("parsing the lock file: %s", diags.Error())
	}
	var lock struct {
		Providers []lockEntry `hcl:"provider,block"`
	}
	if diags := gohcl.DecodeBody(file.Body, nil, &lock); diags.HasErrors() {
		tf.t.Fatalf("decoding the lock file: %s", diags.Error())
	}
	if len(lock.Providers) != 1 || lock.Providers[0].Address != providerAddress {
		data, _ := os.ReadFile(path)
		tf.t.Fatalf("the lock file should list %s alone:\n%s", providerAddress, data)
	}
	return lock.Providers[0]
}

func (tf *terraform) writeLock(e lockEntry) {
	tf.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "provider %q {\n  version = %q\n", e.Address, e.Version)
	if e.Constraints != "" {
		fmt.Fprintf(&b, "  constraints = %q\n", e.Constraints)
	}
	b.WriteString("  hashes = [\n")
	for _, h := range e.Hashes {
		fmt.Fprintf(&b, "    %q,\n", h)
	}
	b.WriteString("  ]\n}\n")
	writeFile(tf.t, filepath.Join(tf.dir, ".terraform.lock.hcl"), b.String())
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
