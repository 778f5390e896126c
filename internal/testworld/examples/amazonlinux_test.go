package examples

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/providermirror"
)

// runnerDependency is a package the GitHub runner's dependencies script,
// bin/installdependencies.sh of actions/runner, installs on a Fedora-like
// system ("dnf install -y lttng-ust openssl-libs krb5-libs zlib libicu"; the
// same list is in the runner's docs/start/envlinux.md).
type runnerDependency struct {
	pkg string
	// optional: the runner starts without it.
	optional bool
	why      string
}

// runnerDependencies are the runner's dependencies on Fedora-like systems.
// The script itself installs nothing on Amazon Linux 2023: it takes a
// system for Fedora-like by /etc/redhat-release, which Amazon Linux 2023
// does not have, and stops with "Can't detect current OS type based on
// /etc/os-release." (the agent runs it, and only logs that). Stock Amazon
// Linux 2023 lacks libicu, without which the runner does not start
// (actions/runner#2511, "Couldn't find a valid ICU package"); the others
// are in the image, and installing them is a no-op, which keeps the
// example right on images that lack them.
var runnerDependencies = []runnerDependency{
	{pkg: "libicu", why: "the runner's .NET runtime needs ICU; config.sh checks for it, and the runner does not start without it"},
	{pkg: "openssl-libs", why: "TLS to GitHub (.NET's crypto library, which config.sh checks)"},
	{pkg: "krb5-libs", why: "a library .NET's runtime links"},
	{pkg: "zlib", why: "compression (.NET's compression library, which config.sh checks)"},
	{pkg: "lttng-ust", optional: true, why: ".NET's tracing provider, loaded only when present; config.sh does not check it"},
}

// completeDir is examples/complete, the configuration the README's
// quickstart applies.
var completeDir = filepath.Join(examplesDir, "complete")

// TestExamples_completeRunsOnAmazonLinux2023 checks that examples/complete
// boots a runner on stock Amazon Linux 2023, x86_64 and arm64, as written:
//
//   - it renders the example's ec2runners_runner_script as the data source
//     does and reads the agent's configuration back from the user data: its
//     pre-runner script, which the agent runs once per instance as root
//     after installing the runner and before the instance is prepared
//     (UD_OK), so before any runner registers or starts, is the example's;
//   - that script stops at its first failure (set -e: a failed install
//     fails the preparation, UD_FAILED, rather than a runner later), and
//     its dnf install commands install every dependency the runner's
//     dependencies script names for Fedora-like systems but the optional
//     one, libicu first of all, which stock Amazon Linux 2023 lacks;
//   - the image the launch template takes, without ami_id, is Amazon Linux
//     2023's public SSM parameter for the architecture variable, which
//     admits x86_64 and arm64, the agent's two, and nothing else.
func TestExamples_completeRunsOnAmazonLinux2023(t *testing.T) {
	blocks := completeBlocks(t, "data", runnerScript)
	if len(blocks) != 1 {
		t.Fatalf("examples/complete has %d data %q blocks, want 1", len(blocks), runnerScript)
	}
	o := exampleOptions(t, "complete", blocks[0].Body)
	if o.PreRunnerScript == "" {
		t.Fatal("examples/complete's runner script has no pre_runner_script: nothing installs ICU, and the runner does not start on stock Amazon Linux 2023")
	}
	userData, err := agentscript.Render(o)
	if err != nil {
		t.Fatal(err)
	}
	cfg := agentConfigOf(t, userData)
	if cfg.PreRunnerScript != o.PreRunnerScript {
		t.Fatalf("the agent's pre-runner script in the user data is %q, want the example's %q", cfg.PreRunnerScript, o.PreRunnerScript)
	}
	for _, arch := range []string{"x86_64", "aarch64"} {
		if !strings.Contains(userData, "\n"+arch+") arch=") {
			t.Errorf("the user data picks no agent for %s instances", arch)
		}
	}

	script := cfg.PreRunnerScript
	if !stopsAtFirstFailure(script) {
		t.Errorf("the pre-runner script does not start with set -e (or set -o errexit): a failed install would go unnoticed until a runner fails\n%s", script)
	}
	installed := dnfInstalls(script)
	for _, d := range runnerDependencies {
		if !d.optional && !slices.Contains(installed, d.pkg) {
			t.Errorf("the pre-runner script does not install %s (%s); it installs %v\n%s", d.pkg, d.why, installed, script)
		}
	}

	checkAMIArchitectures(t)
}

// devOnlyExample is the example no user copies: `make demo` applies it
// with the provider built from the checkout (dev_overrides), whatever its
// version, so it pins none.
const devOnlyExample = "demo"

// TestExamples_pinTheProvider checks that every example that declares the
// ec2runners provider (examples/complete and its claim module among them)
// pins it to its release line, as the README says to: the constraint
// admits the release the actions install
// (.github/actions/lib/provider-version) and its patch releases, and
// neither the next minor release (a 0.x minor may break) nor an older one.
func TestExamples_pinTheProvider(t *testing.T) {
	release := version.Must(version.NewVersion(providermirror.Version(t)))
	segs := release.Segments()
	line := func(major, minor, patch int) *version.Version {
		return version.Must(version.NewVersion(fmt.Sprintf("%d.%d.%d", major, minor, patch)))
	}
	admits := map[*version.Version]bool{
		release:                           true,
		line(segs[0], segs[1], segs[2]+7): true,  // a patch release
		line(segs[0], segs[1]+1, 0):       false, // the next minor release
		line(segs[0]+1, 0, 0):             false, // the next major release
	}
	var checked []string
	for _, dir := range exampleDirs(t) {
		if dir == devOnlyExample {
			continue
		}
		files, err := filepath.Glob(filepath.Join(examplesDir, filepath.FromSlash(dir), "*.tf"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			constraint, declared := requiredVersion(t, file, "ec2runners")
			if !declared {
				continue
			}
			name, _ := filepath.Rel(examplesDir, file)
			name = "examples/" + filepath.ToSlash(name)
			checked = append(checked, name)
			if constraint == "" {
				t.Errorf("%s does not pin the ec2runners provider (required_providers: version)", name)
				continue
			}
			c, err := version.NewConstraint(constraint)
			if err != nil {
				t.Errorf("%s: the ec2runners provider's version constraint %q: %v", name, constraint, err)
				continue
			}
			for v, want := range admits {
				if got := c.Check(v); got != want {
					t.Errorf("%s: the constraint %q admits %s: %v, want %v (the release line of %s, which the actions install)", name, constraint, v, got, want, release)
				}
			}
		}
	}
	for _, want := range []string{"examples/complete/versions.tf", "examples/complete/claim/main.tf"} {
		if !slices.Contains(checked, want) {
			t.Errorf("%s was not checked (checked: %v)", want, checked)
		}
	}
}

// completeBlocks are the blocks of a type and first label in examples/complete's files.
func completeBlocks(t *testing.T, typ, label string) []*hclsyntax.Block {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(completeDir, "*.tf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no *.tf in %s: %v", completeDir, err)
	}
	var blocks []*hclsyntax.Block
	for _, path := range files {
		for _, b := range parseBody(t, path).Blocks {
			if b.Type == typ && len(b.Labels) > 0 && b.Labels[0] == label {
				blocks = append(blocks, b)
			}
		}
	}
	return blocks
}

func parseBody(t *testing.T, path string) *hclsyntax.Body {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parsing %s: %v", path, diags)
	}
	return file.Body.(*hclsyntax.Body)
}

// agentConfigOf reads the agent's configuration from rendered user data:
// the JSON of the quoted here-document the bootstrap writes to its file.
func agentConfigOf(t *testing.T, userData string) agent.Config {
	t.Helper()
	const marker = "EC2RUNNERS_AGENT_CONFIG"
	_, rest, ok := strings.Cut(userData, "<<'"+marker+"'\n")
	body, _, ok2 := strings.Cut(rest, "\n"+marker+"\n")
	if !ok || !ok2 {
		t.Fatalf("no agent configuration (here-document %s) in the user data:\n%s", marker, userData)
	}
	var cfg agent.Config
	if err := json.Unmarshal([]byte(body), &cfg); err != nil {
		t.Fatalf("the agent's configuration in the user data: %v", err)
	}
	return cfg
}

// commands are a shell script's simple commands, one per line: comments
// dropped, continued lines joined, lists split at ; && and ||.
func commands(script string) []string {
	script = strings.ReplaceAll(script, "\\\n", " ")
	var cmds []string
	for _, line := range strings.Split(script, "\n") {
		if i := strings.Index(line, "#"); i == 0 || (i > 0 && strings.ContainsAny(line[i-1:i], " \t")) {
			line = line[:i]
		}
		for _, part := range regexp.MustCompile(`;|&&|\|\|`).Split(line, -1) {
			if f := strings.TrimSpace(part); f != "" {
				cmds = append(cmds, f)
			}
		}
	}
	return cmds
}

// stopsAtFirstFailure tells whether the script's first command turns on
// errexit.
func stopsAtFirstFailure(script string) bool {
	cmds := commands(script)
	if len(cmds) == 0 {
		return false
	}
	f := strings.Fields(cmds[0])
	if f[0] != "set" {
		return false
	}
	for i, arg := range f[1:] {
		short := strings.HasPrefix(arg, "-") && !strings.HasPrefix(arg, "--")
		if short && strings.Contains(arg, "e") || arg == "-o" && i+2 < len(f) && f[i+2] == "errexit" {
			return true
		}
	}
	return false
}

// dnfInstalls are the packages the script's dnf (or yum) install commands
// name, options left out.
func dnfInstalls(script string) []string {
	var pkgs []string
	for _, cmd := range commands(script) {
		f := strings.Fields(cmd)
		if len(f) == 0 || (f[0] != "dnf" && f[0] != "yum") {
			continue
		}
		i := slices.Index(f, "install")
		if i < 0 || slices.ContainsFunc(f[1:i], func(s string) bool { return !strings.HasPrefix(s, "-") }) {
			continue // another subcommand
		}
		for _, arg := range f[i+1:] {
			if !strings.HasPrefix(arg, "-") {
				pkgs = append(pkgs, arg)
			}
		}
	}
	return pkgs
}

// checkAMIArchitectures evaluates examples/complete's AMI lookup and its
// architecture variable's validation for each architecture: the agent's
// two are admitted, each names Amazon Linux 2023's public parameter for
// it, and anything else is refused.
func checkAMIArchitectures(t *testing.T) {
	t.Helper()
	params := completeBlocks(t, "data", "aws_ssm_parameter")
	if len(params) != 1 {
		t.Fatalf("examples/complete has %d data \"aws_ssm_parameter\" blocks, want the AMI lookup alone", len(params))
	}
	name := params[0].Body.Attributes["name"]
	vars := completeBlocks(t, "variable", "architecture")
	if name == nil || len(vars) != 1 {
		t.Fatal("examples/complete has no variable \"architecture\" for its AMI lookup's name")
	}
	var conditions []hcl.Expression
	for _, b := range vars[0].Body.Blocks {
		if b.Type == "validation" && b.Body.Attributes["condition"] != nil {
			conditions = append(conditions, b.Body.Attributes["condition"].Expr)
		}
	}
	if len(conditions) == 0 {
		t.Fatal("variable \"architecture\" has no validation: a typo would look up no image")
	}
	funcs := map[string]function.Function{"contains": stdlib.ContainsFunc}
	for arch, admitted := range map[string]bool{"x86_64": true, "arm64": true, "i386": false, "aarch64": false, "": false} {
		ctx := &hcl.EvalContext{
			Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{"architecture": cty.StringVal(arch)})},
			Functions: funcs,
		}
		ok := true
		for _, cond := range conditions {
			v, diags := cond.Value(ctx)
			if diags.HasErrors() {
				t.Fatalf("variable \"architecture\"'s validation for %q: %v", arch, diags)
			}
			ok = ok && v.True()
		}
		if ok != admitted {
			t.Errorf("variable \"architecture\" admits %q: %v, want %v", arch, ok, admitted)
		}
		if !admitted {
			continue
		}
		v, diags := name.Expr.Value(ctx)
		if diags.HasErrors() {
			t.Fatalf("the AMI lookup's name for %s: %v", arch, diags)
		}
		if want := "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-" + arch; v.AsString() != want {
			t.Errorf("the AMI lookup for %s names %s, want %s (Amazon Linux 2023's public parameter)", arch, v.AsString(), want)
		}
	}
}

// requiredVersion is the version constraint of a provider in the
// terraform block's required_providers of a file ("" when none), and
// whether the file declares the provider there.
func requiredVersion(t *testing.T, path, provider string) (constraint string, declared bool) {
	t.Helper()
	for _, tf := range parseBody(t, path).Blocks {
		if tf.Type != "terraform" {
			continue
		}
		for _, rp := range tf.Body.Blocks {
			if rp.Type != "required_providers" || rp.Body.Attributes[provider] == nil {
				continue
			}
			v, diags := rp.Body.Attributes[provider].Expr.Value(nil)
			if diags.HasErrors() || !v.Type().IsObjectType() {
				t.Fatalf("%s: required_providers.%s is not an object of literals: %v", path, provider, diags)
			}
			if !v.Type().HasAttribute("version") {
				return "", true
			}
			return v.GetAttr("version").AsString(), true
		}
	}
	return "", false
}
