package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// End to end: `terraform apply` of a one-runner claim from a warm pool, wall
// time including Terraform's own work (start, plan, the provider plugin,
// state), with the provider binary built from this tree and used through
// dev_overrides (terraform init cannot run offline). The provider runs as
// in production: default timings and opportunistic reaping.

const e2eConfig = `terraform {
  required_providers {
    ec2runners = {
      source = "ec2runners/ec2runners"
    }
  }
}

variable "endpoint" {
  type = string
}

variable "pool" {
  type = string
}

variable "run_id" {
  type = string
}

provider "ec2runners" {
  region     = "us-east-1"
  access_key = "test"
  secret_key = "test"

  endpoints {
    sqs      = var.endpoint
    dynamodb = var.endpoint
    ec2      = var.endpoint
    sts      = var.endpoint
  }
}

resource "ec2runners_claim" "bench" {
  pool           = var.pool
  run_id         = var.run_id
  instance_count = 1
  fleet_fallback = false
}
`

// tfWorkdir is a Terraform working directory using the provider built here.
type tfWorkdir struct {
	dir string
	env []string
	tf  string
}

func newTFWorkdir(b *testing.B) *tfWorkdir {
	b.Helper()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		b.Skip("terraform is not on PATH")
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		b.Fatal("cannot locate the repository")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	dir := b.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "terraform-provider-ec2runners"), ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the provider: %v\n%s", err, out)
	}
	rc := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"registry.terraform.io/ec2runners/ec2runners\" = %q\n  }\n  direct {}\n}\n", filepath.Join(dir, "bin"))
	if err := os.WriteFile(filepath.Join(dir, "terraformrc"), []byte(rc), 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(e2eConfig), 0o600); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "terraformrc"), "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	return &tfWorkdir{dir: dir, env: env, tf: tf}
}

func (w *tfWorkdir) run(args ...string) error {
	cmd := exec.Command(w.tf, append(args, "-input=false", "-no-color")...)
	cmd.Dir, cmd.Env = w.dir, w.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("terraform %s: %w\n%s", args[0], err, out.String())
	}
	return nil
}

// BenchmarkEndToEnd: terraform apply of a one-runner claim from a warm pool
// (untimed: terraform destroy, which releases it).
func BenchmarkEndToEnd(b *testing.B) {
	e := getEnv(b)
	w := newTFWorkdir(b)
	p := newWarmPool(b, b, e, 1)
	for _, mode := range []string{agentsInstant, agentsPolling} {
		b.Run("agents="+mode, func(b *testing.B) {
			var total time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				runID := "bench-" + randomSuffix()
				vars := []string{"-var", "endpoint=" + e.endpoint, "-var", "pool=" + p.name, "-var", "run_id=" + runID}
				if mode == agentsInstant {
					p.writeSignals(b, e, protocol.SignalRegistered, runID, p.ids)
				}
				b.StartTimer()
				start := time.Now()
				err := w.run(append([]string{"apply", "-auto-approve"}, vars...)...)
				elapsed := time.Since(start)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				total += elapsed
				p.waitAgents(b, runID, p.ids, false)
				if err := w.run(append([]string{"destroy", "-auto-approve"}, vars...)...); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.StopTimer()
			per := total / time.Duration(b.N)
			b.ReportMetric(per.Seconds(), "s/apply")
			summary.add(summaryRow{
				Section:  "5. End to end (terraform apply of a 1-runner claim from a warm pool; provider as shipped: default timings, reaping on)",
				Scenario: "agents " + mode,
				Ours:     fmt.Sprintf("%s wall time", per.Round(10*time.Millisecond)),
			})
		})
	}
}
