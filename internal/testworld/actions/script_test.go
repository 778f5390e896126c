package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/providermirror"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/tfcli"
)

// TestActions_claimAndRelease runs the actions' steps as their action.yml
// runs them (prepare, then claim or release), each job on a fresh runner
// (its own RUNNER_TEMP), with the real Terraform CLI and the provider built
// from this checkout, against the emulator; simulated agents play the
// runners. It shows: a claim and its label; a second claim job of the run
// without a name input, which fails instead of sharing the claim; a
// release on another machine with no backend, which adopts the claim by
// its identity and gives its runners back warm; init from the providers' cache alone (the mirror
// gone); a release that also gives back what an earlier attempt of the run
// left; a release with nothing to release; a claim and release through a
// backend; a claim step cancelled as the runner cancels a step (its
// process signalled, as GitHub does to a cancelled run's), which stops
// Terraform and gives back what the claim took; and a claim job whose
// runner was lost, whose claim the release gives back.
func TestActions_claimAndRelease(t *testing.T) {
	requireAcceptance(t)
	tf := tfcli.Must(t)
	ctx := context.Background()
	endpoint, stop, err := emulator.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"} {
		t.Setenv(k, v)
	}
	clients, err := awsconfig.New(ctx, awsconfig.Options{Endpoints: awsconfig.Endpoints{SQS: endpoint, DynamoDB: endpoint, EC2: endpoint, STS: endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("act-%d", time.Now().UnixNano()%1e9)
	lt, subnets := poolLaunchTemplate(t, clients.EC2, name)
	sim := agentsim.New(agentsim.Clients{DynamoDB: clients.DynamoDB, EC2: clients.EC2, SQS: clients.SQS}, name, agentsim.Options{
		HeartbeatInterval: time.Second, PollInterval: 250 * time.Millisecond, Logf: t.Logf,
	})
	defer sim.Stop()
	// Runners the fleet launches register, except while a test below needs
	// a claim that is still waiting for them when it is interrupted.
	var fleetNeverRegisters atomic.Bool
	sim.WatchFleet(ctx, func(string, int) agentsim.Behavior {
		if fleetNeverRegisters.Load() {
			return agentsim.NeverRegisters
		}
		return agentsim.Healthy
	})
	t.Cleanup(func() {
		_ = (&pool.Manager{DynamoDB: clients.DynamoDB, SQS: clients.SQS, EC2: clients.EC2}).Delete(context.Background(), name, true)
	})

	// The actions run without a broker, with the broker's rights
	// (TestActions_broker runs them with one), the pool's stack as its
	// manager: make test records their AWS calls and checks them against
	// the documented policies (internal/testworld/iamcheck).
	recorded, stopRecording, err := awsrecord.Start(ctx, endpoint, "actions")
	if err != nil {
		t.Fatal(err)
	}
	defer stopRecording()

	// The CLI as the actions find it: terraform on PATH.
	bin := t.TempDir()
	if err := os.Symlink(tf, filepath.Join(bin, "terraform")); err != nil {
		t.Fatal(err)
	}
	mirror, archive := providermirror.Build(t)
	env := map[string]string{
		"PATH":                  bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"AWS_ENDPOINT_URL":      recorded,
		"AWS_REGION":            "us-east-1",
		"AWS_ACCESS_KEY_ID":     awsrecord.ClaimsKey,
		"AWS_SECRET_ACCESS_KEY": "test",
		"TF_CLI_CONFIG_FILE":    providermirror.CLIConfig(t, mirror),
		// What actions/cache restores and saves between jobs.
		"EC2RUNNERS_CACHE_DIR":        filepath.Join(t.TempDir(), "cache"),
		"EC2RUNNERS_POOL":             name,
		"EC2RUNNERS_PROVIDER_VERSION": providermirror.Version(t),
		"EC2RUNNERS_INSTANCE_COUNT":   "2",
		"EC2RUNNERS_MAX_RUNTIME":      "30m",
		"GITHUB_RUN_ID":               "4242",
	}
	pm := maps.Clone(env)
	pm["AWS_ACCESS_KEY_ID"] = awsrecord.PoolManagementKey
	applyPool(t, tf, pm, name, lt, subnets)

	runners := func(runID string) []string {
		t.Helper()
		all, err := pool.ListInstances(ctx, clients.DynamoDB, name)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, inst := range all {
			if inst.RunID == runID && (inst.State == protocol.StateRunning || inst.State == protocol.StateClaimed) {
				ids = append(ids, inst.ID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	warm := func(ids []string) {
		t.Helper()
		all, err := pool.ListInstances(ctx, clients.DynamoDB, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, inst := range all {
			if slices.Contains(ids, inst.ID) && (inst.State != protocol.StateIdle || inst.RunID != "") {
				t.Errorf("runner %s is %s for %q after its release, want idle (warm, back in the pool)", inst.ID, inst.State, inst.RunID)
			}
		}
	}
	record := func(runID string) bool {
		t.Helper()
		out, err := clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(protocol.TableName(name)), Key: protocol.Key(protocol.TypeClaim, runID), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item != nil
	}
	claim := func(attempt string, more map[string]string) (*job, map[string]string) {
		t.Helper()
		j := newJob(t, env)
		j.env["GITHUB_RUN_ATTEMPT"] = attempt
		for k, v := range more {
			j.env[k] = v
		}
		j.must("prepare", "claim")
		if got := j.outputs(); got["proceed"] != "true" || got["cache-key"] == "" {
			t.Fatalf("prepare claim: outputs %v, want proceed=true and a cache key", got)
		}
		j.must("claim")
		return j, j.outputs()
	}
	release := func(attempt, runID string, more map[string]string) string {
		t.Helper()
		j := newJob(t, env)
		j.env["GITHUB_RUN_ATTEMPT"] = attempt
		j.env["EC2RUNNERS_RUN_ID"] = runID
		for k, v := range more {
			j.env[k] = v
		}
		j.must("prepare", "release")
		return j.must("release")
	}

	// The claim job: the label is the run id (the run and attempt) and a
	// random part; the instance ids a JSON array.
	_, out := claim("1", nil)
	if err := protocol.ValidateLabel("4242-1", out["label"]); err != nil || out["label"] == "4242-1" || out["runs-on"] != out["label"] ||
		out["run-id"] != "4242-1" || out["claimed"] != "true" || out["attempt"] != "1" {
		t.Fatalf("claim outputs %v, want label and runs-on 4242-1-<random part> (%v), run-id 4242-1, claimed true, attempt 1", out, err)
	}
	var ids []string
	if err := json.Unmarshal([]byte(out["instance-ids"]), &ids); err != nil {
		t.Fatalf("instance-ids %q: %v", out["instance-ids"], err)
	}
	slices.Sort(ids)
	if held := runners("4242-1"); len(ids) != 2 || !slices.Equal(held, ids) {
		t.Fatalf("instance-ids %v, the pool's table says 4242-1 holds %v; want the same 2", ids, held)
	}

	// A second claim job of the run without a name input (another
	// GITHUB_JOB, the same run id and inputs) fails, saying to name the
	// claims, and takes nothing: sharing the first job's claim, its jobs
	// would lose their runners when the first job's claim is released.
	other := newJob(t, env)
	other.env["GITHUB_JOB"] = "claim-arm"
	other.must("prepare", "claim")
	if got, err := other.run("claim"); err == nil || !strings.Contains(got, "give each claim job its own name input") {
		t.Errorf("a second claim job of run 4242-1: %v, want a failure naming the name input", err)
	}
	if held := runners("4242-1"); !slices.Equal(held, ids) {
		t.Errorf("after the second claim job 4242-1 holds %v, want the first job's %v", held, ids)
	}

	// The release job, on another machine, with no backend: the claim is
	// adopted by its identity and its runners go back warm.
	release("1", out["run-id"], nil)
	if held := runners("4242-1"); len(held) != 0 || record("4242-1") {
		t.Fatalf("after the release 4242-1 still holds %v (claim record: %v)", held, record("4242-1"))
	}
	warm(ids)

	// The cache restored, init downloads nothing: with the mirror's archive
	// broken, the next claim installs the provider from the cache. (Terraform
	// still lists the versions the mirror offers, as it asks a registry for
	// them, even with a lock file.) It gets the warm runners.
	good, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, archive, "not the provider")
	j2, out2 := claim("2", nil)
	writeFile(t, archive, string(good))
	if init, _ := os.ReadFile(filepath.Join(j2.env["RUNNER_TEMP"], "ec2runners", "claim-4242-2", "init.log")); !strings.Contains(string(init), "from the shared cache directory") {
		t.Errorf("attempt 2's init did not install the provider from the cache:\n%s", init)
	}
	var ids2 []string
	if err := json.Unmarshal([]byte(out2["instance-ids"]), &ids2); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids2)
	if !slices.Equal(ids2, ids) {
		t.Errorf("attempt 2 holds %v, want attempt 1's warm runners %v", ids2, ids)
	}

	// Attempt 2's release never ran; "Re-run all jobs" claims anew, and
	// attempt 3's release gives back both.
	_, out3 := claim("3", nil)
	if out3["run-id"] != "4242-3" || len(runners("4242-2")) != 2 || len(runners("4242-3")) != 2 {
		t.Fatalf("attempt 3 claimed %v; 4242-2 holds %v, 4242-3 %v: want 2 each", out3, runners("4242-2"), runners("4242-3"))
	}
	got := release("3", out3["run-id"], nil)
	if !strings.Contains(got, "No claim "+name+"/4242-1") {
		t.Errorf("the release did not say that 4242-1 was released already")
	}
	for _, id := range []string{"4242-2", "4242-3"} {
		if held := runners(id); len(held) != 0 || record(id) {
			t.Errorf("after attempt 3's release %s still holds %v (claim record: %v)", id, held, record(id))
		}
	}

	// Nothing left: a release (of a cancelled run's claim job that never
	// claimed, say) says so and succeeds.
	if got := release("3", "", nil); !strings.Contains(got, "Nothing to release") {
		t.Errorf("a release with nothing to release did not say so")
	}

	// A backend stays possible: the release finds the claim in the state.
	backend := map[string]string{
		"EC2RUNNERS_BACKEND": "local", "EC2RUNNERS_BACKEND_CONFIG": "path=" + filepath.Join(t.TempDir(), "claim.tfstate"),
		"GITHUB_RUN_ID": "5151",
	}
	_, out4 := claim("1", backend)
	if len(runners("5151-1")) != 2 {
		t.Fatalf("the claim with a backend holds %v, want 2 runners", runners("5151-1"))
	}
	if got := release("1", out4["run-id"], backend); strings.Contains(got, "Import successful") {
		t.Errorf("the release imported the claim although the backend's state holds it")
	}
	if held := runners("5151-1"); len(held) != 0 {
		t.Errorf("after its release 5151-1 still holds %v", held)
	}

	// A cancelled run: the runner cancels the claim step mid-apply (here
	// while it launches runners: the claim asks for more than the pool has
	// warm) by signalling the step's process alone, `bash -e` on the run:
	// line: SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s after that
	// (cancelStep). Terraform must hear it and stop before the step's
	// process ends: nothing of the step may live on. When it stopped on the
	// SIGINT alone, its rollback gave back everything the claim took
	// (a loaded machine may take longer, and the SIGTERM stops it at once:
	// the release settles the rest). And a claim job whose runner was lost: its process tree dies
	// at once, the claim record stays pending, and the release (if:
	// always()) adopts it. Either way nothing stays claimed. The launched
	// runners never register, so that each claim is still under way when it
	// is interrupted, however fast this machine.
	fleetNeverRegisters.Store(true)
	for _, c := range []struct {
		run  string
		lost bool
	}{{"6161", false}, {"7171", true}} {
		runID := c.run + "-1"
		j := newJob(t, env)
		j.env["GITHUB_RUN_ID"] = c.run
		j.env["EC2RUNNERS_INSTANCE_COUNT"] = "6"
		j.must("prepare", "claim")
		cmdCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		var cmd *exec.Cmd
		if c.lost {
			cmd = j.command(cmdCtx, "claim")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the job's process tree
		} else {
			cmd = j.step(cmdCtx, "claim", "claim")
		}
		var buf strings.Builder
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		deadline := time.Now().Add(2 * time.Minute)
		for !record(runID) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second) // the warm runners register; the fleet launches
		var waitErr error
		last := syscall.SIGKILL
		if c.lost {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			waitErr = <-done
		} else {
			last, waitErr = cancelStep(cmd, done)
		}
		t.Logf("the claim of %s, interrupted (runner lost: %v, last signal %v): %v\n%s", runID, c.lost, last, waitErr, indent(buf.String()))
		if waitErr == nil {
			t.Errorf("the interrupted claim of %s succeeded, want a failure", runID)
		}
		if !c.lost {
			// What outlives the step's process is Terraform left running
			// on its own; the runner kills it at the job's end, mid-apply.
			if left := waitForGroupExit(cmd.Process.Pid, 5*time.Second); len(left) > 0 {
				t.Errorf("the cancelled claim step of %s ended (after %v) and left running: %s", runID, last, strings.Join(left, "; "))
			}
			if held := runners(runID); last == syscall.SIGINT && (len(held) != 0 || record(runID)) {
				t.Errorf("the cancelled claim step of %s ended and still holds %v (claim record: %v): Terraform did not roll the claim back", runID, held, record(runID))
			}
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the runner's orphan cleanup at the job's end
		cancel()
		release("1", "", map[string]string{"GITHUB_RUN_ID": c.run})
		if held := runners(runID); len(held) != 0 || record(runID) {
			t.Errorf("after the release of the cancelled %s it still holds %v (claim record: %v)", runID, held, record(runID))
		}
	}
}

// waitForGroupExit waits up to timeout for every process of the process
// group pgid to exit, and returns the command lines of those still there.
func waitForGroupExit(pgid int, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		left := groupProcesses(pgid)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// groupProcesses lists the command lines of the live processes of the
// process group pgid, from /proc.
func groupProcesses(pgid int) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if _, after, ok := strings.Cut(string(stat), ") "); ok && strings.HasPrefix(after, "Z") {
			continue // exited, not yet reaped
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, fmt.Sprintf("%d %s", pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))))
	}
	return out
}

// applyPool creates the pool with Terraform, as the pool stack does.
func applyPool(t testing.TB, tf string, env map[string]string, name, launchTemplate string, subnets []string) {
	t.Helper()
	dir := t.TempDir()
	quoted := make([]string, len(subnets))
	for i, s := range subnets {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	writeFile(t, filepath.Join(dir, "main.tf"), fmt.Sprintf(`terraform {
  required_providers {
    ec2runners = { source = "ec2runners/ec2runners" }
  }
}

provider "ec2runners" {}

resource "ec2runners_pool" "this" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 } }
  fleet = {
    launch_template_id = %q
    subnet_ids         = [%s]
    instance_selection = "explicit"
  }
}
`, name, launchTemplate, strings.Join(quoted, ", ")))
	for _, args := range [][]string{{"init", "-input=false", "-no-color"}, {"apply", "-auto-approve", "-input=false", "-no-color"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, tf, args...)
		cmd.Dir = dir
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("terraform %s (the pool): %v\n%s", args[0], err, out)
		}
	}
}

// poolLaunchTemplate makes the pool's launch template, tagged for it, with
// an image the emulator offers, and picks a subnet of the default VPC.
func poolLaunchTemplate(t testing.TB, client *ec2.Client, name string) (string, []string) {
	t.Helper()
	id, subnets, err := emulator.PoolLaunchTemplate(context.Background(), client, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
	})
	return id, subnets
}
