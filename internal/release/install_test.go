package release

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"golang.org/x/mod/sumdb/dirhash"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

const region = "us-east-1"

// endpoint is the AWS emulator's, set by TestMain under TF_ACC.
var endpoint string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	if os.Getenv("TF_ACC") == "" {
		return m.Run() // every test skips
	}
	ep, stop, err := emulator.Ensure(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "the install test needs the AWS emulator:", err)
		return 1
	}
	defer stop()
	endpoint = ep
	return m.Run()
}

// TestAccRelease_install installs the release build as users do, from the
// archives alone and with no dev_overrides, two ways:
//
//   - from a registry (newRegistry: the provider registry protocol over
//     HTTPS, serving dist/), where terraform verifies the signature of
//     SHA256SUMS with the published key and the archive against it, and
//     writes the lock file a user commits: the h1: hash of this platform's
//     package and the zh: hash (SHA-256 of the zip) of every platform's;
//   - from a filesystem mirror in the packed layout
//     (<host>/<namespace>/<type>/<archive>.zip), where init must accept that
//     committed lock file, write an h1: hash of its own without it, write
//     every platform's with `terraform providers lock`, and refuse a lock
//     file whose hash is wrong.
//
// Every hash in a lock file must be an archive's. Then the provider
// installed from the mirror plans and applies a pool and a claim on the
// emulator (one runner warm from the pool, one launched by the fleet;
// simulated agents play the instances) and destroys them, and every AWS
// request it made names the release's version in its User-Agent: the
// version goreleaser stamped into the binary.
func TestAccRelease_install(t *testing.T) {
	requireAcceptance(t)
	s := loadSnapshot(t)
	host := hostPlatform()
	if _, ok := s.zips[host]; !ok {
		t.Fatalf("the release build has no archive for %s; it has %v", host, s.platforms())
	}
	hostH1 := h1(t, s.path(s.zips[host]))

	// From the registry: signed, and the lock file a user commits.
	reg := newRegistry(t, s)
	fromRegistry := newTerraform(t, s, reg.cliConfig(), "SSL_CERT_FILE="+reg.certFile)
	out := fromRegistry.mustRun("init", "-input=false")
	if want := "(self-signed, key ID " + reg.keyID + ")"; !strings.Contains(out, want) {
		t.Errorf("init from the registry did not report the signature check %q:\n%s", want, out)
	}
	committed := fromRegistry.readLock()
	t.Logf("lock file after init from the registry: %s %v", committed.Version, committed.Hashes)
	checkLockHashes(t, s, committed)
	if !slices.Contains(committed.Hashes, hostH1) {
		t.Errorf("the lock file lacks the h1 hash of %s: %v", s.zips[host], committed.Hashes)
	}
	for _, p := range s.platforms() {
		if zh := "zh:" + s.sums[s.zips[p]]; !slices.Contains(committed.Hashes, zh) {
			t.Errorf("the lock file lacks %s's zh hash %s: %v", p, zh, committed.Hashes)
		}
	}
	checkInstalled(t, fromRegistry, s)

	// From a filesystem mirror, with the committed lock file.
	mirror := newMirror(t, s)
	tf := newTerraform(t, s, mirrorConfig(mirror))
	tf.writeLock(committed)
	tf.mustRun("init", "-input=false")

	// Without one: this platform's package, in h1 form (the hash of the
	// archive's contents).
	plain := newTerraform(t, s, mirrorConfig(mirror))
	plain.mustRun("init", "-input=false")
	lock := plain.readLock()
	t.Logf("lock file after init from the mirror: %s %v", lock.Version, lock.Hashes)
	checkLockHashes(t, s, lock)
	if !slices.Contains(lock.Hashes, hostH1) {
		t.Errorf("the lock file lacks the h1 hash of %s: %v", s.zips[host], lock.Hashes)
	}
	checkInstalled(t, plain, s)

	// Every platform of the build, from the same mirror.
	args := []string{"providers", "lock", "-fs-mirror=" + mirror}
	for _, p := range s.platforms() {
		args = append(args, "-platform="+p)
	}
	plain.mustRun(args...)
	lock = plain.readLock()
	t.Logf("lock file for %v: %v", s.platforms(), lock.Hashes)
	for _, p := range s.platforms() {
		if !slices.Contains(lock.Hashes, h1(t, s.path(s.zips[p]))) {
			t.Errorf("terraform providers lock did not record %s's hash: %v", p, lock.Hashes)
		}
	}
	checkLockHashes(t, s, lock)
	plain.mustRun("init", "-input=false")

	// A lock file that does not match the archive stops init.
	tampered := newTerraform(t, s, mirrorConfig(mirror))
	wrong := lock
	wrong.Hashes = []string{"h1:" + strings.Repeat("A", 43) + "="}
	tampered.writeLock(wrong)
	if out, err := tampered.run("init", "-input=false"); err == nil || !strings.Contains(out, "checksum") {
		t.Errorf("init with a lock file whose hash is wrong: err %v, want a checksum error:\n%s", err, out)
	}

	// The installed release at work: plan and apply a pool, then a claim.
	w := newWorld(t)
	tf.vars = []string{
		"-var", "endpoint=" + w.proxy.URL,
		"-var", "pool=" + w.pool,
		"-var", "launch_template_id=" + w.launchTemplate,
		"-var", "subnet_ids=" + jsonList(w.subnets),
	}
	t.Cleanup(func() {
		if !tf.destroyed {
			_, _ = tf.run(append([]string{"destroy", "-auto-approve", "-input=false", "-var", "claim=true"}, tf.vars...)...)
		}
	})
	tf.mustRun(append([]string{"apply", "-auto-approve", "-input=false", "-var", "claim=false"}, tf.vars...)...)
	if _, err := w.sim.SeedIdle(context.Background(), 1, agentsim.SeedSpec{ResourceClass: "large", IdleTimeout: 30 * time.Minute}); err != nil {
		t.Fatalf("seeding a warm runner: %v", err)
	}
	plan := tf.mustRun(append([]string{"plan", "-input=false", "-out=claim.tfplan", "-var", "claim=true"}, tf.vars...)...)
	if !strings.Contains(plan, "1 to add, 0 to change, 0 to destroy") {
		t.Errorf("the plan of the claim should add one resource:\n%s", plan)
	}
	tf.mustRun("apply", "-input=false", "claim.tfplan")
	var instances []struct {
		ID     string `json:"id"`
		Source string `json:"source"`
	}
	tf.output("instances", &instances)
	var sources []string
	for _, i := range instances {
		sources = append(sources, i.Source)
	}
	slices.Sort(sources)
	if !slices.Equal(sources, []string{"fleet", "pool"}) {
		t.Errorf("the claim holds runners from %v, want one warm from the pool and one from the fleet: %+v", sources, instances)
	}
	tf.mustRun(append([]string{"destroy", "-auto-approve", "-input=false", "-var", "claim=true"}, tf.vars...)...)
	tf.destroyed = true

	agents := w.userAgents()
	want := awsconfig.Product + "/" + s.version
	if len(agents) == 0 {
		t.Fatal("the provider made no AWS request through the recording proxy")
	}
	for _, ua := range agents {
		if !strings.Contains(ua, want) {
			t.Errorf("an AWS request's User-Agent %q lacks %s", ua, want)
		}
	}
	t.Logf("User-Agent of the provider's AWS requests: %s", agents[0])
}

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

const configuration = `terraform {
  required_providers {
    ec2runners = {
      source  = "ec2runners/ec2runners"
      version = %q
    }
  }
}

variable "endpoint" {
  type    = string
  default = "http://127.0.0.1:4566"
}

variable "pool" {
  type    = string
  default = "release-install"
}

variable "launch_template_id" {
  type    = string
  default = "lt-0000000000"
}

variable "subnet_ids" {
  type    = list(string)
  default = ["subnet-00000000"]
}

variable "claim" {
  type    = bool
  default = false
}

provider "ec2runners" {
  region     = %q
  access_key = "test"
  secret_key = "test"

  endpoints {
    sqs      = var.endpoint
    dynamodb = var.endpoint
    ec2      = var.endpoint
    sts      = var.endpoint
  }
}

resource "ec2runners_pool" "release" {
  name          = var.pool
  force_destroy = true

  resource_classes = {
    large = { cpu = 2, memory_mib = 4096 }
  }

  fleet = {
    launch_template_id = var.launch_template_id
    subnet_ids         = var.subnet_ids
    instance_selection = "explicit"
  }
}

resource "ec2runners_claim" "build" {
  count = var.claim ? 1 : 0

  pool           = ec2runners_pool.release.name
  instance_count = 2
}

output "instances" {
  value = one(ec2runners_claim.build[*].instances)
}
`

func newTerraform(t *testing.T, s *snapshot, cliConfig string, env ...string) *terraform {
	t.Helper()
	bin := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("terraform"); err != nil {
			t.Fatalf("the install test runs terraform: put it on PATH or set TF_ACC_TERRAFORM_PATH (%v)", err)
		}
	}
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

// newMirror is a filesystem mirror of the release build in the packed
// layout: <hostname>/<namespace>/<type>/<archive>.zip.
func newMirror(t *testing.T, s *snapshot) string {
	t.Helper()
	mirror := t.TempDir()
	pkgDir := filepath.Join(mirror, filepath.FromSlash(providerAddress))
	mkdir(t, pkgDir)
	for _, name := range s.zips {
		src, err := filepath.Abs(s.path(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(src, filepath.Join(pkgDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return mirror
}

// mirrorConfig installs this provider from the mirror alone.
func mirrorConfig(mirror string) string {
	return fmt.Sprintf(`provider_installation {
  filesystem_mirror {
    path    = %q
    include = [%q]
  }
}
`, filepath.ToSlash(mirror), providerAddress)
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

// world is the emulator side of the test: a launch template and subnets for
// the pool's fleet, simulated agents for the pool's instances, and a proxy
// in front of the emulator that records the User-Agent of every request the
// provider sends through it.
type world struct {
	pool           string
	launchTemplate string
	subnets        []string
	sim            *agentsim.Sim
	proxy          *httptest.Server

	mu     sync.Mutex
	agents []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	w := &world{pool: "release-" + hex.EncodeToString(b)}
	clients, err := awsconfig.New(ctx, awsconfig.Options{
		Region: region, AccessKey: "test", SecretKey: "test",
		Endpoints: awsconfig.Endpoints{SQS: endpoint, DynamoDB: endpoint, EC2: endpoint, STS: endpoint},
	})
	if err != nil {
		t.Fatal(err)
	}
	// An image the emulator offers (moto's and LocalStack's differ), in a
	// launch template tagged for the pool: claims launch no other.
	images, err := clients.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("an x86_64 image for the launch template: %v (%d found)", err, len(images.Images))
	}
	lt, err := clients.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(w.pool),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: images.Images[0].ImageId},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: aws.String(protocol.TagPool), Value: aws.String(w.pool)},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.launchTemplate = aws.ToString(lt.LaunchTemplate.LaunchTemplateId)
	t.Cleanup(func() {
		_, _ = clients.EC2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId})
	})
	subnets, err := clients.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("subnets: %v", err)
	}
	w.subnets = []string{aws.ToString(subnets.Subnets[0].SubnetId)}

	w.sim = agentsim.New(agentsim.Clients{DynamoDB: clients.DynamoDB, EC2: clients.EC2, SQS: clients.SQS}, w.pool, agentsim.Options{
		HeartbeatInterval: time.Second, PollInterval: 250 * time.Millisecond, SelfCheckInterval: 5 * time.Second, Logf: t.Logf,
	})
	w.sim.WatchFleet(ctx, nil)
	t.Cleanup(w.sim.Stop)

	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	w.proxy = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.agents = append(w.agents, r.Header.Get("User-Agent"))
		w.mu.Unlock()
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.proxy.Close)
	return w
}

func (w *world) userAgents() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.agents)
}

func jsonList(values []string) string {
	b, _ := json.Marshal(values)
	return string(b)
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
