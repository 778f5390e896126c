package release

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
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
	if _, ok := s.zips[hostPlatform()]; !ok {
		t.Fatalf("the release build has no archive for %s; it has %v", hostPlatform(), s.platforms())
	}
	committed := installFromRegistry(t, s)
	tf := installFromMirror(t, s, committed)
	applyPoolAndClaim(t, s, tf)
}

// installFromRegistry: signed, and the lock file a user commits, which it
// returns.
func installFromRegistry(t *testing.T, s *snapshot) lockEntry {
	t.Helper()
	reg := newRegistry(t, s)
	tf := newTerraform(t, s, reg.cliConfig(), "SSL_CERT_FILE="+reg.certFile)
	out := tf.mustRun("init", "-input=false")
	if want := "(self-signed, key ID " + reg.keyID + ")"; !strings.Contains(out, want) {
		t.Errorf("init from the registry did not report the signature check %q:\n%s", want, out)
	}
	lock := tf.readLock()
	t.Logf("lock file after init from the registry: %s %v", lock.Version, lock.Hashes)
	checkLockHashes(t, s, lock)
	checkHostH1(t, s, lock)
	for _, p := range s.platforms() {
		if zh := "zh:" + s.sums[s.zips[p]]; !slices.Contains(lock.Hashes, zh) {
			t.Errorf("the lock file lacks %s's zh hash %s: %v", p, zh, lock.Hashes)
		}
	}
	checkInstalled(t, tf, s)
	return lock
}

// installFromMirror: init from a filesystem mirror accepts the committed
// lock file, writes its own without one, every platform's with
// `terraform providers lock`, and refuses a wrong hash. It returns the
// working directory initialized with the committed lock file.
func installFromMirror(t *testing.T, s *snapshot, committed lockEntry) *terraform {
	t.Helper()
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
	checkHostH1(t, s, lock)
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
	return tf
}

// applyPoolAndClaim: the installed release at work. It plans and applies a
// pool, then a claim of two runners (one warm, one from the fleet), and
// destroys both; every AWS request names the release's version.
func applyPoolAndClaim(t *testing.T, s *snapshot, tf *terraform) {
	t.Helper()
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
	checkRunnerScript(t, s, tf)
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

// checkRunnerScript: the user data the installed provider renders
// (ec2runners_runner_script) installs the agent of the release's version,
// downloaded from the release's assets on GitHub and checked against the
// SHA-256 of the binaries the release ships, for both architectures: the
// digests goreleaser built the provider with.
func checkRunnerScript(t *testing.T, s *snapshot, tf *terraform) {
	t.Helper()
	var version, content string
	tf.output("agent_version", &version)
	tf.output("runner_script", &content)
	if version != s.version {
		t.Errorf("ec2runners_runner_script.agent_version is %q, want the release's version %s", version, s.version)
	}
	check := func(what, pattern, want string) {
		t.Helper()
		m := regexp.MustCompile(pattern).FindStringSubmatch(content)
		if m == nil {
			t.Errorf("the runner script names no %s (no match for %s):\n%s", what, pattern, content)
		} else if m[1] != want {
			t.Errorf("the runner script's %s is %q, want %q", what, m[1], want)
		}
	}
	check("agent version", `(?m)^version='([^']*)'$`, s.version)
	check("agent download directory", `(?m)^\s*url='([^']*)'/ec2runners-agent_`, agentscript.ReleaseRepository+"/releases/download/v"+s.version)
	digests := agentDigests(t, s)
	for arch, digest := range digests {
		check(arch+" agent's SHA-256", `arch=`+arch+` sha256='([^']*)'`, digest)
	}
	t.Logf("the agent shipped with %s: %v", s.version, digests)
}

// checkHostH1: the lock has the h1 hash of this platform's archive, the one
// init installed.
func checkHostH1(t *testing.T, s *snapshot, lock lockEntry) {
	t.Helper()
	name := s.zips[hostPlatform()]
	if !slices.Contains(lock.Hashes, h1(t, s.path(name))) {
		t.Errorf("the lock file lacks the h1 hash of %s: %v", name, lock.Hashes)
	}
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

data "ec2runners_runner_script" "release" {
  pool         = var.pool
  github_owner = "ec2runners"
}

output "agent_version" {
  value = data.ec2runners_runner_script.release.agent_version
}

output "runner_script" {
  value     = data.ec2runners_runner_script.release.content
  sensitive = true
}
`
