package examples

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/tfcli"
)

const (
	// examplesDir is examples/ relative to this package's directory, where
	// `go test` runs the test.
	examplesDir = "../../../examples"
	// moduleRoot holds the provider's main package.
	moduleRoot = "../../.."

	providerAddress = "registry.terraform.io/ec2runners/ec2runners"
	providerBinary  = "terraform-provider-ec2runners"

	// mustValidate is an example that uses only this provider, so it must be
	// validated, never just formatted: a guard against the rule below
	// silently sending everything to the weaker check.
	mustValidate = "complete/claim"

	commandTimeout = 2 * time.Minute
)

// otherProvider finds what makes a configuration need a provider other than
// ec2runners, which cannot be installed here (no registry access): AWS
// resources, data sources or provider blocks, or the hashicorp/aws source.
var otherProvider = regexp.MustCompile(`(?m)(resource|data|ephemeral)\s+"aws_|provider\s+"aws"|hashicorp/aws`)

// newerTerraform finds what Terraform 1.11 cannot read: import blocks by
// identity (1.12), actions and list resources (1.14). Those examples are
// checked with terraform-1.15.
var newerTerraform = regexp.MustCompile(`(?m)^\s*(action|list)\s+"|^\s*identity\s*=`)

// requiredProviders tells whether a configuration declares its providers; the
// short examples the docs embed do not, and Terraform would then look for
// hashicorp/ec2runners.
var requiredProviders = regexp.MustCompile(`(?m)^\s*required_providers\s*\{`)

// TestExamples_validate checks every directory under examples/ that holds
// Terraform files: `terraform validate` for those that use only this
// provider, `terraform fmt -check` for the others (they need the AWS
// provider, which terraform cannot install here).
func TestExamples_validate(t *testing.T) {
	tf := tfcli.Must(t)
	t.Logf("terraform: %s", tf)

	dirs := exampleDirs(t)
	if len(dirs) == 0 {
		t.Fatalf("no directory with *.tf files under %s", examplesDir)
	}

	// A copy of the whole examples tree: validate writes nothing into the
	// repository, and relative module sources still resolve.
	work := t.TempDir()
	copyTree(t, examplesDir, filepath.Join(work, "examples"))
	cliConfig := providerCLIConfig(t, buildProvider(t))

	var validated, formatted []string
	for _, dir := range dirs {
		src := filepath.Join(examplesDir, filepath.FromSlash(dir))
		text := configText(t, src)
		if otherProvider.MatchString(text) {
			formatted = append(formatted, dir)
			t.Logf("%s: terraform fmt -check -recursive (uses the AWS provider, which cannot be installed here)", dir)
			t.Run(dir, func(t *testing.T) {
				t.Parallel()
				runTerraform(t, tf, src, nil, "fmt", "-check", "-diff", "-recursive", "-no-color")
			})
			continue
		}
		validated = append(validated, dir)
		t.Logf("%s: terraform fmt -check and terraform validate (ec2runners only)", dir)
		copyDir := filepath.Join(work, "examples", filepath.FromSlash(dir))
		addRequiredProviders := !requiredProviders.MatchString(text)
		needsNewer := newerTerraform.MatchString(text)
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			tf, validate := tf, []string{"validate", "-no-color"}
			if needsNewer {
				tf, validate = toolPath(t, "terraform-1.15", "this example needs Terraform >= 1.12 (.ci/run adds ../shared/tools)"), append(validate, "-query")
			}
			runTerraform(t, tf, src, nil, "fmt", "-check", "-diff", "-no-color")
			if addRequiredProviders {
				// What a user's configuration around the snippet declares.
				writeFile(t, filepath.Join(copyDir, "zz_examples_test_providers.tf"), fmt.Sprintf(
					"terraform {\n  required_providers {\n    ec2runners = {\n      source = %q\n    }\n  }\n}\n",
					strings.TrimPrefix(providerAddress, "registry.terraform.io/")))
			}
			env := []string{"TF_CLI_CONFIG_FILE=" + cliConfig}
			out, ok := runTerraform(t, tf, copyDir, env, validate...)
			if ok && !strings.Contains(out, "Success! The configuration is valid") {
				t.Errorf("terraform validate in %s did not report success:\n%s", dir, out)
			}
		})
	}

	t.Logf("validated: %s", strings.Join(validated, ", "))
	t.Logf("fmt only: %s", strings.Join(formatted, ", "))
	if len(validated) == 0 {
		t.Errorf("no example was validated with terraform validate")
	}
	if !slices.Contains(validated, mustValidate) {
		t.Errorf("examples/%s must be validated with terraform validate; validated: %v, fmt only: %v", mustValidate, validated, formatted)
	}
}

// toolPath finds a tool the tests run on PATH. Outside CI a missing one
// skips the test, saying what is missing (why); CI (CI set, as .ci/run
// does, with ../shared/tools on PATH) fails instead.
func toolPath(t *testing.T, name, why string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := name + " is not on PATH: " + why
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// exampleDirs lists the directories under examples/ that hold *.tf (or
// *.tfquery.hcl) files,
// relative to examples/ with forward slashes, skipping hidden directories
// (.terraform, .terragrunt-cache).
func exampleDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(examplesDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != examplesDir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		tfFiles, err := configFiles(path)
		if err != nil {
			return err
		}
		if len(tfFiles) > 0 {
			rel, err := filepath.Rel(examplesDir, path)
			if err != nil {
				return err
			}
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", examplesDir, err)
	}
	return dirs
}

// configText is the directory's configuration and query files without their comment lines, so
// that a comment mentioning the AWS provider changes nothing.
func configText(t *testing.T, dir string) string {
	t.Helper()
	files, err := configFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "//") {
				continue
			}
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// configFiles are the configuration and query files of dir.
func configFiles(dir string) ([]string, error) {
	tf, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return nil, err
	}
	query, err := filepath.Glob(filepath.Join(dir, "*.tfquery.hcl"))
	return append(tf, query...), err
}

// buildProvider builds the provider once and returns the directory holding it.
func buildProvider(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-o", filepath.Join(dir, providerBinary), moduleRoot)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of the provider: %v\n%s", err, out)
	}
	return dir
}

// providerCLIConfig writes a Terraform CLI configuration that takes this
// provider from dir (dev_overrides: no registry, no `terraform init`).
func providerCLIConfig(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "terraformrc")
	writeFile(t, path, fmt.Sprintf(`provider_installation {
  dev_overrides {
    %q = %q
  }
  direct {}
}
`, providerAddress, filepath.ToSlash(dir)))
	return path
}

// runTerraform runs terraform in dir and returns its output and whether it
// succeeded; a failure fails the test with the output.
func runTerraform(t *testing.T, tf, dir string, env []string, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tf, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Errorf("terraform %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out.String())
		return out.String(), false
	}
	return out.String(), true
}

// copyTree copies the regular files under src to dst, skipping hidden files
// and directories (.terraform, lock files, .terragrunt-cache).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != src && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(path, target)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
