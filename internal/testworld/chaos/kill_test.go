//go:build unix

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/tfcli"
)

// Crash safety with the real terraform CLI: terraform and the provider
// plugin (one process group) are SIGKILLed at chosen requests of a claim's
// Create or Delete, seen by the world's proxy; running terraform again must
// converge, and the pool's invariants must hold. A Ctrl-C (SIGINT to
// terraform) during Create must roll back before terraform exits.
//
// A kill point is a request: it is forwarded and takes effect, and nothing
// the process sends after it does (the proxy drops it), until the process
// group is killed, once the request's effect is visible in the emulator.
// That is a process that died right after AWS carried out the request.
// (Killing inside the hook and then letting the request through does not
// do: httputil.ReverseProxy, under the proxy, cancels the forwarded request
// once its client's connection closes, so the request may never arrive.)
//
// The scenarios run at the same time, four at most (most of their time is
// spent waiting: for a dead attempt's lease to lapse, for agents), as
// subtests started from goroutines, so that -parallel (GOMAXPROCS by
// default) does not serialise them.
func TestKill(t *testing.T) {
	t.Parallel()
	tf := setUpTerraform(t)
	scenarios := []struct {
		name string
		run  func(*testing.T)
	}{
		// Kills during Create, then apply again and destroy. One warm
		// runner for a claim of two: the fleet launches the other.
		{"create-claim-record", func(t *testing.T) {
			testKilledCreate(t, tf, "create-claim-record", atClaimRecordPut, false, "pending")
		}},
		// The killed apply's fleet instances are unknown to the pool
		// (launched, never recorded) until the reaper's grace period is over.
		{"create-fleet", func(t *testing.T) { testKilledCreate(t, tf, "create-fleet", atCreateFleet, true, "pending") }},
		// The transaction to running also completes the claim record: the
		// claim was made, only terraform does not know; the re-apply adopts it.
		{"create-to-running", func(t *testing.T) {
			testKilledCreate(t, tf, "create-to-running", atUpdateToState(protocol.StateRunning), false, "complete")
		}},
		// Kills during Delete, then destroy again, then apply and destroy.
		{"delete-send-message", func(t *testing.T) { testKilledDelete(t, tf, "delete-send-message", atSendMessageBatch) }},
		{"delete-to-idle", func(t *testing.T) { testKilledDelete(t, tf, "delete-to-idle", atUpdateToState(protocol.StateIdle)) }},
		// Ctrl-C during Create: while CreateFleet is in flight, and while
		// the new instance is being validated.
		{"interrupt-fleet-in-flight", func(t *testing.T) { testInterruptedCreate(t, tf, true) }},
		{"interrupt-validation", func(t *testing.T) { testInterruptedCreate(t, tf, false) }},
	}
	// Bounded: every world polls EC2 for its fleet several times a second,
	// and the emulator serves one request at a time. The longest scenarios
	// come first.
	slots := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, sc := range scenarios {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			t.Run(sc.name, sc.run)
		})
	}
	wg.Wait()
}

// A killed apply, at a point of the claim's Create, then apply again (it
// waits out the dead attempt's lease, cleans it up and claims anew, or
// adopts the claim the dead apply completed), then destroy.
func testKilledCreate(t *testing.T, tf *terraformCLI, name string, point killPoint, orphansAfterKill bool, wantRecord string) {
	w := newWorld(t, "kill", uint64(len(name)))
	w.seed(1)
	s := newTFScenario(t, w, tf, "run-"+name, 2)

	s.killDuring(point, "apply", "-auto-approve")
	rec, found := s.claimRecord()
	t.Logf("after the kill: claim record found=%t state=%q owns %v", found, rec.State, rec.OwnedIDs)
	if !found || rec.State != wantRecord {
		t.Errorf("the killed apply should leave a %s claim record; found=%t state=%q", wantRecord, found, rec.State)
	}
	killedFleet := s.awaitFleetInstances()
	var orphans []string
	if orphansAfterKill {
		orphans = slices.Sorted(maps.Keys(killedFleet))
		if len(orphans) == 0 {
			t.Errorf("CreateFleet was killed in flight but launched nothing")
		}
		for _, id := range orphans {
			if slices.Contains(rec.OwnedIDs, id) {
				t.Errorf("%s was launched by the killed CreateFleet yet is in the claim record: the kill came too late", id)
			}
		}
		t.Logf("the killed CreateFleet launched %v, which no record names", orphans)
	}

	started := time.Now()
	s.mustRun("apply", "-auto-approve")
	t.Logf("re-apply took %s (a dead attempt's lease lapses within 30s)", time.Since(started).Round(100*time.Millisecond))
	out := s.outputs()
	s.checkHolds(out)
	if wantRecord == "complete" && !slices.Equal(slices.Sorted(slices.Values(out.InstanceIDs)), slices.Sorted(slices.Values(rec.OwnedIDs))) {
		t.Errorf("the re-apply holds %v, want the completed claim's %v adopted", out.InstanceIDs, rec.OwnedIDs)
	}
	// The re-apply's cleanup of the dead attempt terminates what its
	// CreateFleet launched unrecorded (tagged with the run id).
	for id, state := range s.fleetInstances() {
		if slices.Contains(orphans, id) && state != ec2types.InstanceStateNameTerminated && state != ec2types.InstanceStateNameShuttingDown {
			t.Errorf("%s, launched by the killed CreateFleet, is %s after the re-apply", id, state)
		}
	}
	w.audit("after the re-apply")
	unclaimed := len(killedFleet)
	if wantRecord == "complete" {
		unclaimed = 0 // the adopted claim's new runners are the ones the killed apply launched
	}
	s.checkFleetAccounting(out, unclaimed)

	s.mustRun("destroy", "-auto-approve")
	s.checkNoClaimRecord()
	w.audit("after the destroy")
}

// A successful apply, then a destroy killed at a point of the release, then
// destroy again; then the same run claims and releases once more.
func testKilledDelete(t *testing.T, tf *terraformCLI, name string, point killPoint) {
	w := newWorld(t, "kill", uint64(len(name)))
	w.seed(1)
	s := newTFScenario(t, w, tf, "run-"+name, 2)
	s.mustRun("apply", "-auto-approve")
	out := s.outputs()
	s.checkHolds(out)

	s.killDuring(point, "destroy", "-auto-approve")
	rec, found := s.claimRecord()
	t.Logf("after the kill: claim record found=%t state=%q; instances: %s", found, rec.State, s.describeRecords(out.InstanceIDs))

	started := time.Now()
	res := s.mustRun("destroy", "-auto-approve")
	t.Logf("second destroy took %s: %s", time.Since(started).Round(100*time.Millisecond), lastLine(res.output(), "Destroy complete"))
	s.checkNoClaimRecord()
	s.checkReleased(out.InstanceIDs)
	w.audit("after the second destroy")
	if n := launchedCapacity(s.fleetRequests()); n != out.CreatedCount {
		t.Errorf("CreateFleet launches for %d runner(s), %d created: %v", n, out.CreatedCount, s.fleetRequests())
	}

	// The run can claim again: whatever the killed destroy left behind
	// does not stand in for a claim.
	s.mustRun("apply", "-auto-approve")
	s.checkHolds(s.outputs())
	s.mustRun("destroy", "-auto-approve")
	s.checkNoClaimRecord()
	w.audit("after the last destroy")
}

// Ctrl-C during Create: terraform tells the provider to stop, the provider
// rolls the claim back, and terraform exits with an error. Nothing runs
// terraform again: the pool must be whole at once.
//
// fleetInFlight: the interrupt comes while CreateFleet is in flight: EC2
// has launched, and the answer has not reached the provider (the proxy
// drops it, and drops the SDK's retries), as when Ctrl-C is pressed during
// a CreateFleet call that takes seconds. Otherwise it comes while the new
// instance is being validated (at the first read after its record is
// written, held 2s so the interrupt lands first).
func testInterruptedCreate(t *testing.T, tf *terraformCLI, fleetInFlight bool) {
	w := newWorld(t, "kill", 7)
	warm := w.seed(1)
	name := "run-interrupt-validation"
	if fleetInFlight {
		name = "run-interrupt-fleet"
	}
	s := newTFScenario(t, w, tf, name, 2)
	interrupt := func(r *tfRun) {
		if err := syscall.Kill(r.pid, syscall.SIGINT); err != nil { // terraform only
			t.Errorf("SIGINT: %v", err)
		}
	}
	var tr *trigger
	interrupted := make(chan struct{})
	if fleetInFlight {
		w.proxy.SetRules(faultproxy.Rule{Service: "ec2", Action: "CreateFleet", Kind: faultproxy.DropAfter, Rate: 1})
		tr = s.arm(atCreateFleet, func(r *tfRun, _ faultproxy.Request) faultproxy.Kind {
			launched := atCreateFleet.effect(s)
			w.proxy.SetRules(faultproxy.Rule{Service: "ec2", Action: "CreateFleet", Kind: faultproxy.DropBefore, Rate: 1})
			go func() {
				defer close(interrupted)
				if err := await.Poll(await.Patience, func() error { return await.Bool(launched()) }); err != nil {
					t.Errorf("CreateFleet launched nothing within %s", await.Patience)
				}
				interrupt(r)
			}()
			return faultproxy.None
		})
	} else {
		var created atomic.Bool
		tr = s.arm(killPoint{name: "the first read after a created record", match: func(r faultproxy.Request) bool {
			if r.Service == "dynamodb" && r.Action == "PutItem" && bytes.Contains(r.Body, []byte(protocol.TypeInstance)) &&
				bytes.Contains(r.Body, []byte(`"`+protocol.StateCreated+`"`)) {
				created.Store(true)
			}
			return created.Load() && r.Service == "dynamodb" && r.Action == "BatchGetItem"
		}}, func(r *tfRun, _ faultproxy.Request) faultproxy.Kind {
			interrupt(r)
			close(interrupted)
			// Held until terraform has told the provider to stop, so that
			// the interrupt lands while the new instance is validated.
			if err := await.Poll(await.Patience, func() error { return await.Bool(r.providerStopped()) }); err != nil {
				t.Errorf("the provider was not told to stop within %s of the interrupt", await.Patience)
			}
			return faultproxy.None
		})
	}
	started := time.Now()
	r := s.start("apply", "-auto-approve")
	s.waitRun(r, 4*time.Minute)
	s.disarm()
	took := time.Since(started)
	if !tr.fired.Load() {
		w.proxy.SetRules()
		t.Fatalf("apply ended without reaching %s: %v", tr.point.name, r.err)
	}
	<-interrupted
	w.proxy.SetRules()
	var exit *exec.ExitError
	switch {
	case r.err == nil:
		t.Errorf("the interrupted apply succeeded")
	case !errors.As(r.err, &exit) || exit.ExitCode() <= 0:
		t.Errorf("the interrupted apply should exit with an error status, got %v", r.err)
	}
	t.Logf("interrupted apply exited (%v) after %s; %s", r.err, took.Round(100*time.Millisecond), lastLine(r.output(), "Interrupt"))
	if !strings.Contains(r.output(), "Interrupt received") {
		t.Errorf("terraform did not acknowledge the interrupt")
	}
	// The provider's Create returned (after its rollback) before terraform
	// exited: its diagnostic is there.
	if !strings.Contains(r.output(), "Cannot claim runners from pool") {
		t.Errorf("terraform exited without the provider's diagnostic: the rollback may not have finished")
	}
	s.requireGroupGone(r)

	ctx := context.Background()
	if _, found := s.claimRecord(); found {
		t.Errorf("the interrupted claim left its claim record")
	}
	records, err := pool.ListInstances(ctx, direct.DynamoDB, w.pool)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]protocol.Instance{}
	for _, rec := range records {
		byID[rec.ID] = rec
		if rec.RunID == s.runID && rec.State != protocol.StateTerminated {
			t.Errorf("%s is still %s for the interrupted run", rec.ID, rec.State)
		}
	}
	for _, id := range warm {
		switch rec := byID[id]; {
		case rec.State == protocol.StateIdle:
		case rec.State == protocol.StateTerminated && strings.Contains(r.output(), id+": "):
			// It failed the claim's checks (a slow emulator), and the
			// claim's error says so.
			t.Logf("warm runner %s was discarded: %s", id, lastLine(r.output(), id+": "))
		default:
			t.Errorf("warm runner %s is %q, not back idle", id, rec.State)
		}
	}
	fleet := s.fleetInstances()
	t.Logf("fleet instances of the interrupted run: %v", fleet)
	if len(fleet) == 0 {
		t.Errorf("CreateFleet launched nothing: the scenario tested little")
	}
	var leaked []string
	for id, state := range fleet {
		if state != ec2types.InstanceStateNameTerminated && state != ec2types.InstanceStateNameShuttingDown {
			leaked = append(leaked, fmt.Sprintf("%s (%s, record %q)", id, state, byID[id].State))
		}
	}
	if len(leaked) > 0 {
		slices.Sort(leaked)
		t.Errorf("the rollback left fleet instances running: %v", leaked)
	}
	w.audit("after the interrupted apply")
}

// terraformCLI is the terraform binary and a CLI config whose dev_overrides
// point at the provider built from this module.
type terraformCLI struct {
	terraform string
	cliConfig string
}

func setUpTerraform(t *testing.T) *terraformCLI {
	t.Helper()
	terraform := tfcli.Must(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	started := time.Now()
	build := exec.Command("go", "build", "-buildvcs=false", "-o", filepath.Join(bin, "terraform-provider-ec2runners"), "../../..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the provider: %v\n%s", err, out)
	}
	t.Logf("built the provider in %s", time.Since(started).Round(100*time.Millisecond))
	rc := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"registry.terraform.io/ec2runners/ec2runners\" = %q\n  }\n  direct {}\n}\n", bin)
	cliConfig := filepath.Join(dir, "terraformrc")
	if err := os.WriteFile(cliConfig, []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	return &terraformCLI{terraform: terraform, cliConfig: cliConfig}
}

// env is the process environment without anything that could point the
// provider or terraform elsewhere, plus the test's settings.
func (tf *terraformCLI) env(logPath string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "TF_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"TF_CLI_CONFIG_FILE="+tf.cliConfig, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1",
		"AWS_ACCESS_KEY_ID="+awsrecord.ClaimsKey, "AWS_SECRET_ACCESS_KEY="+awsrecord.TestSecret, "AWS_REGION="+region,
		// The protocol's trace shows when the provider was told to stop.
		"TF_LOG_PROVIDER=TRACE", "TF_LOG_SDK_PROTO=TRACE", "TF_LOG_SDK_FRAMEWORK=DEBUG", "TF_LOG_PATH="+logPath)
}

// tfScenario is one world driven through terraform in its own directory.
type tfScenario struct {
	t     *testing.T
	w     *world
	tf    *terraformCLI
	dir   string
	runID string
	n     int

	mu      sync.Mutex
	runs    []*tfRun
	cur     *tfRun
	trigger *trigger
	fleets  []fleetRequest
}

// fleetRequest is a CreateFleet request the proxy saw.
type fleetRequest struct {
	seq      int
	token    string
	capacity int
}

// killPoint chooses a request.
type killPoint struct {
	name  string
	match func(faultproxy.Request) bool
	// effect is called when the request is seen, before it is forwarded;
	// the func it returns tells whether the request has taken effect.
	effect func(*tfScenario) func() bool
}

// trigger acts once, on the first request of the current run that matches.
type trigger struct {
	point killPoint
	// act runs in the proxy's hook for the request at point, and may choose
	// that request's fault.
	act   func(*tfRun, faultproxy.Request) faultproxy.Kind
	fired atomic.Bool
}

// tfRun is one terraform process, the leader of its process group.
type tfRun struct {
	args []string
	pid  int // = its process group id
	log  string
	out  lockedBuffer
	done chan struct{}
	err  error
	// started: when it was started; took: how long it ran
	started time.Time
	took    time.Duration
	// the group's processes when it was killed
	killedGroup []string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// providerStopped tells whether terraform has stopped the provider (its
// StopProvider call has cancelled the provider's contexts).
func (r *tfRun) providerStopped() bool {
	log, _ := os.ReadFile(r.log)
	return bytes.Contains(log, []byte("Closed all our contexts"))
}

func (r *tfRun) output() string {
	r.out.mu.Lock()
	defer r.out.mu.Unlock()
	return r.out.b.String()
}

func newTFScenario(t *testing.T, w *world, tf *terraformCLI, runID string, n int) *tfScenario {
	t.Helper()
	s := &tfScenario{t: t, w: w, tf: tf, dir: t.TempDir(), runID: runID, n: n}
	config := fmt.Sprintf(`terraform {
  required_providers {
    ec2runners = { source = "ec2runners/ec2runners" }
  }
}

provider "ec2runners" {
  endpoints {
    sqs      = %[1]q
    dynamodb = %[1]q
    ec2      = %[1]q
    sts      = %[1]q
  }
}

resource "ec2runners_claim" "test" {
  pool                   = %[2]q
  run_id                 = %[3]q
  instance_count         = %[4]d
  resource_class         = "large"
  allowed_instance_types = ["*"]
  fleet_validation_wait  = "60s"
}

output "instance_ids" { value = ec2runners_claim.test.instance_ids }
output "reused_count" { value = ec2runners_claim.test.reused_count }
output "created_count" { value = ec2runners_claim.test.created_count }
`, w.proxy.URL, w.pool, runID, n)
	if err := os.WriteFile(filepath.Join(s.dir, "main.tf"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	w.proxy.OnRequest(s.onRequest)
	t.Cleanup(func() {
		w.proxy.OnRequest(nil)
		if !t.Failed() {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, r := range s.runs {
			t.Logf("terraform %s (#%d, %v after %s), combined output:\n%s", strings.Join(r.args, " "), i+1, r.err, r.took.Round(100*time.Millisecond), r.output())
			if log, err := os.ReadFile(r.log); err == nil {
				t.Logf("its provider log, claim lines:\n%s", claimLogLines(string(log), 80))
			}
		}
	})
	return s
}

// onRequest is the proxy's hook: it records fleet requests and fires the
// armed trigger.
func (s *tfScenario) onRequest(r faultproxy.Request) faultproxy.Kind {
	if r.Service == "ec2" && r.Action == "CreateFleet" {
		form, _ := url.ParseQuery(string(r.Body))
		capacity, _ := strconv.Atoi(form.Get("TargetCapacitySpecification.TotalTargetCapacity"))
		s.mu.Lock()
		s.fleets = append(s.fleets, fleetRequest{seq: r.Seq, token: form.Get("ClientToken"), capacity: capacity})
		s.mu.Unlock()
	}
	s.mu.Lock()
	tr, run := s.trigger, s.cur
	s.mu.Unlock()
	if tr == nil || run == nil || !tr.point.match(r) || !tr.fired.CompareAndSwap(false, true) {
		return faultproxy.None
	}
	s.t.Logf("proxy request #%d (%s %s): %s, %s into terraform %s", r.Seq, r.Service, r.Action, tr.point.name, time.Since(run.started).Round(100*time.Millisecond), run.args[0])
	return tr.act(run, r)
}

func (s *tfScenario) arm(point killPoint, act func(*tfRun, faultproxy.Request) faultproxy.Kind) *trigger {
	tr := &trigger{point: point, act: act}
	s.mu.Lock()
	s.trigger = tr
	s.mu.Unlock()
	return tr
}

func (s *tfScenario) disarm() {
	s.mu.Lock()
	s.trigger = nil
	s.mu.Unlock()
}

func (s *tfScenario) fleetRequests() []fleetRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fleets)
}

// start runs terraform with args in the scenario's directory, in a process
// group of its own (the provider plugin is its child, in the same group).
func (s *tfScenario) start(args ...string) *tfRun {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &tfRun{args: args, done: make(chan struct{}), log: filepath.Join(s.dir, fmt.Sprintf("terraform-%d.log", len(s.runs)+1))}
	cmd := exec.Command(s.tf.terraform, append(slices.Clone(args), "-input=false", "-no-color")...)
	cmd.Dir, cmd.Env = s.dir, s.tf.env(r.log)
	cmd.Stdout, cmd.Stderr = &r.out, &r.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.started = time.Now()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting terraform: %v", err)
	}
	r.pid = cmd.Process.Pid
	s.runs = append(s.runs, r)
	s.cur = r
	go func() {
		r.err = cmd.Wait()
		r.took = time.Since(r.started)
		close(r.done)
	}()
	return r
}

// waitRun waits for terraform to exit; past limit it kills the group and
// fails the test.
func (s *tfScenario) waitRun(r *tfRun, limit time.Duration) {
	s.t.Helper()
	select {
	case <-r.done:
	case <-time.After(limit):
		_ = syscall.Kill(-r.pid, syscall.SIGKILL)
		<-r.done
		s.t.Fatalf("terraform %s did not finish within %s", strings.Join(r.args, " "), limit)
	}
	s.mu.Lock()
	if s.cur == r {
		s.cur = nil
	}
	s.mu.Unlock()
}

// mustRun runs terraform to completion and requires success.
func (s *tfScenario) mustRun(args ...string) *tfRun {
	s.t.Helper()
	r := s.start(args...)
	s.waitRun(r, 4*time.Minute)
	if r.err != nil {
		s.t.Fatalf("terraform %s failed after %s: %v\n%s", strings.Join(args, " "), r.took.Round(100*time.Millisecond), r.err, r.output())
	}
	s.t.Logf("terraform %s: %s in %s", args[0], lastLine(r.output(), "complete!"), r.took.Round(100*time.Millisecond))
	return r
}

// killDuring runs terraform and SIGKILLs its process group, terraform and
// the provider, at the point's first request: that request is forwarded,
// everything the process sends after it is dropped, and the group is
// killed once the request's effect shows in the emulator.
func (s *tfScenario) killDuring(point killPoint, args ...string) *tfRun {
	s.t.Helper()
	t := s.t
	killed := make(chan struct{})
	tr := s.arm(point, func(r *tfRun, _ faultproxy.Request) faultproxy.Kind {
		tookEffect := point.effect(s)
		// From now on the process reaches nothing: it is as good as dead.
		// This request still takes effect, but its answer never arrives.
		s.w.proxy.SetRules(faultproxy.Rule{Kind: faultproxy.DropBefore, Rate: 1})
		go func() {
			defer close(killed)
			if err := await.Poll(await.Patience, func() error { return await.Bool(tookEffect()) }); err != nil {
				t.Errorf("%s did not take effect within %s", point.name, await.Patience)
			}
			r.killedGroup = groupProcesses(r.pid)
			if err := syscall.Kill(-r.pid, syscall.SIGKILL); err != nil {
				t.Errorf("killing process group %d: %v", r.pid, err)
			}
			if !waitGroupGone(r.pid) {
				t.Errorf("process group %d still alive %s after SIGKILL: %v", r.pid, await.Patience, groupProcesses(r.pid))
			}
			s.w.proxy.SetRules()
		}()
		return faultproxy.DropAfter
	})
	r := s.start(args...)
	s.waitRun(r, 4*time.Minute)
	s.disarm()
	if !tr.fired.Load() {
		t.Fatalf("terraform %s ended (%v) without reaching %s", strings.Join(args, " "), r.err, point.name)
	}
	<-killed
	var exit *exec.ExitError
	if !errors.As(r.err, &exit) {
		t.Fatalf("terraform %s: want it killed, got %v", args[0], r.err)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("terraform %s: want it killed by SIGKILL, got %v", args[0], r.err)
	}
	// The kill must have reached the provider plugin, not only terraform.
	hasProvider := slices.ContainsFunc(r.killedGroup, func(p string) bool { return strings.Contains(p, "terraform-provider-ec2runners") })
	if len(r.killedGroup) > 0 && !hasProvider { // empty: no /proc to look in
		t.Errorf("the provider plugin was not in terraform's process group: %v", r.killedGroup)
	}
	t.Logf("killed terraform %s at %s after %s; the group was %v", args[0], point.name, r.took.Round(100*time.Millisecond), r.killedGroup)
	s.requireGroupGone(r)
	return r
}

func (s *tfScenario) requireGroupGone(r *tfRun) {
	s.t.Helper()
	if !waitGroupGone(r.pid) {
		s.t.Fatalf("terraform's process group %d outlived it: %v", r.pid, groupProcesses(r.pid))
	}
}

// groupProcesses lists the live (not zombie) processes of a process group
// as "pid cmdline", from /proc; nil where there is no /proc.
func groupProcesses(pgid int) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[0] == "X" || fields[2] != strconv.Itoa(pgid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, fmt.Sprintf("%d %s", pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))))
	}
	return out
}

// waitGroupGone waits until no live process is left in the group.
func waitGroupGone(pgid int) bool {
	return await.Poll(await.Patience, func() error {
		if _, err := os.Stat("/proc/self/stat"); err == nil {
			return await.Bool(len(groupProcesses(pgid)) == 0)
		}
		return await.Bool(syscall.Kill(-pgid, 0) != nil)
	}) == nil
}

// tfOutputs are the config's outputs after an apply.
type tfOutputs struct {
	InstanceIDs  []string
	ReusedCount  int
	CreatedCount int
}

func (s *tfScenario) outputs() tfOutputs {
	s.t.Helper()
	cmd := exec.Command(s.tf.terraform, "output", "-json", "-no-color")
	cmd.Dir, cmd.Env = s.dir, s.tf.env(filepath.Join(s.dir, "terraform-output.log"))
	raw, err := cmd.Output()
	if err != nil {
		s.t.Fatalf("terraform output: %v", err)
	}
	var outs map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	var o tfOutputs
	err = json.Unmarshal(raw, &outs)
	if err == nil {
		err = errors.Join(json.Unmarshal(outs["instance_ids"].Value, &o.InstanceIDs),
			json.Unmarshal(outs["reused_count"].Value, &o.ReusedCount),
			json.Unmarshal(outs["created_count"].Value, &o.CreatedCount))
	}
	if err != nil {
		s.t.Fatalf("terraform output: %v\n%s", err, raw)
	}
	return o
}

// claimer reads and reaps the pool directly, not through the proxy.
func (s *tfScenario) claimer() *claim.Claimer {
	return &claim.Claimer{DynamoDB: direct.DynamoDB, SQS: direct.SQS, EC2: direct.EC2}
}

func (s *tfScenario) claimRecord() (claim.Record, bool) {
	s.t.Helper()
	rec, _, found, err := s.claimer().Read(context.Background(), s.w.pool, s.runID)
	if err != nil {
		s.t.Fatalf("reading the claim record: %v", err)
	}
	return rec, found
}

// checkHolds: terraform's claim, its record and the instance records agree
// on n distinct runners running for the run.
func (s *tfScenario) checkHolds(out tfOutputs) {
	s.t.Helper()
	t := s.t
	ids := slices.Sorted(slices.Values(out.InstanceIDs))
	if len(slices.Compact(slices.Clone(ids))) != s.n || len(ids) != s.n {
		t.Errorf("the claim holds %v, want %d distinct runners", out.InstanceIDs, s.n)
	}
	if out.ReusedCount+out.CreatedCount != s.n {
		t.Errorf("reused %d + created %d != %d", out.ReusedCount, out.CreatedCount, s.n)
	}
	rec, live, found, err := s.claimer().Read(context.Background(), s.w.pool, s.runID)
	if err != nil || !found {
		t.Fatalf("claim record: found=%t, %v", found, err)
	}
	if rec.State != "complete" || !slices.Equal(slices.Sorted(slices.Values(rec.OwnedIDs)), ids) || len(live) != s.n {
		t.Errorf("claim record: state %q, owns %v, %d live; terraform holds %v", rec.State, rec.OwnedIDs, len(live), ids)
	}
	for _, id := range ids {
		if r := s.record(id); r.State != protocol.StateRunning || r.RunID != s.runID {
			t.Errorf("%s is %s for run %q, want running for %s", id, r.State, r.RunID, s.runID)
		}
	}
}

// checkReleased: the claim's runners are back idle (or were terminated).
func (s *tfScenario) checkReleased(ids []string) {
	s.t.Helper()
	for _, id := range ids {
		r := s.record(id)
		if released := r.State == protocol.StateIdle && r.RunID == ""; !released && r.State != protocol.StateTerminated {
			s.t.Errorf("%s is %s for run %q after the destroy", id, r.State, r.RunID)
		}
	}
}

func (s *tfScenario) checkNoClaimRecord() {
	s.t.Helper()
	if rec, found := s.claimRecord(); found {
		s.t.Errorf("the claim record of %s is left after the destroy: state %q, owns %v", s.runID, rec.State, rec.OwnedIDs)
	}
}

func (s *tfScenario) record(id string) protocol.Instance {
	s.t.Helper()
	records, err := pool.ListInstances(context.Background(), direct.DynamoDB, s.w.pool)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, r := range records {
		if r.ID == id {
			return r
		}
	}
	return protocol.Instance{ID: id, State: "(no record)"}
}

func (s *tfScenario) describeRecords(ids []string) string {
	var parts []string
	for _, id := range ids {
		r := s.record(id)
		parts = append(parts, fmt.Sprintf("%s %s run %q", id, r.State, r.RunID))
	}
	return strings.Join(parts, ", ")
}

// fleetInstances are the instances CreateFleet launched for the run (the
// pool's tag and the InitialRunId tag; seeded runners have none), in any
// state, with their EC2 state.
func (s *tfScenario) fleetInstances() map[string]ec2types.InstanceStateName {
	s.t.Helper()
	out, err := s.fleetInstancesErr()
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s *tfScenario) fleetInstancesErr() (map[string]ec2types.InstanceStateName, error) {
	out := map[string]ec2types.InstanceStateName{}
	p := ec2.NewDescribeInstancesPaginator(direct.EC2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + protocol.TagPool), Values: []string{s.w.pool}},
		{Name: aws.String("tag:" + protocol.TagInitialRunID), Values: []string{s.runID}},
	}})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				var state ec2types.InstanceStateName
				if i.State != nil {
					state = i.State.Name
				}
				out[aws.ToString(i.InstanceId)] = state
			}
		}
	}
	return out, nil
}

// awaitFleetInstances waits until the fleet requests seen so far have all
// launched (a request of a killed process is forwarded after the kill).
func (s *tfScenario) awaitFleetInstances() map[string]ec2types.InstanceStateName {
	s.t.Helper()
	want := launchedCapacity(s.fleetRequests())
	var got map[string]ec2types.InstanceStateName
	err := await.Poll(await.Patience, func() error {
		if got = s.fleetInstances(); len(got) < want {
			return fmt.Errorf("%d of %d launched", len(got), want)
		}
		return nil
	})
	if err != nil || len(got) != want {
		s.t.Errorf("%d fleet instance(s) for the run, but the fleet launches asked for %d: %v", len(got), want, s.fleetRequests())
	}
	return got
}

// launchedCapacity is what the fleet requests launch: requests that share a
// ClientToken are one launch, as on AWS (the proxy answers a repeated token
// as AWS does).
func launchedCapacity(reqs []fleetRequest) int {
	byToken := map[string]int{}
	for _, f := range reqs {
		byToken[f.token] = f.capacity
	}
	n := 0
	for _, c := range byToken {
		n += c
	}
	return n
}

// checkFleetAccounting: every fleet launch (a ClientToken) launched exactly
// its capacity, and the re-apply launched only what its claim needed.
// killedLaunched is what the killed apply launched that the claim does not
// hold.
func (s *tfScenario) checkFleetAccounting(out tfOutputs, killedLaunched int) {
	s.t.Helper()
	t := s.t
	reqs := s.fleetRequests()
	total := launchedCapacity(reqs)
	launched := s.fleetInstances()
	t.Logf("fleet: %d CreateFleet request(s) %v; %d instance(s) launched for the run (killed apply %d, re-apply's claim created %d)",
		len(reqs), reqs, len(launched), killedLaunched, out.CreatedCount)
	if len(launched) != total {
		t.Errorf("%d instances launched for %d requested", len(launched), total)
	}
	if len(launched) != killedLaunched+out.CreatedCount {
		t.Errorf("%d instances launched in all; the killed apply launched %d and the claim created %d: duplicates", len(launched), killedLaunched, out.CreatedCount)
	}
}

// Kill points.

var atClaimRecordPut = killPoint{
	name: "the first claim record PutItem",
	match: func(r faultproxy.Request) bool {
		return r.Service == "dynamodb" && r.Action == "PutItem" && bytes.Contains(r.Body, []byte(protocol.TypeClaim))
	},
	effect: func(s *tfScenario) func() bool {
		return func() bool {
			_, _, found, err := s.claimer().Read(context.Background(), s.w.pool, s.runID)
			return err == nil && found
		}
	},
}

var atCreateFleet = killPoint{
	name:  "CreateFleet",
	match: func(r faultproxy.Request) bool { return r.Service == "ec2" && r.Action == "CreateFleet" },
	effect: func(s *tfScenario) func() bool {
		want := launchedCapacity(s.fleetRequests()) // this one included
		return func() bool {
			got, err := s.fleetInstancesErr()
			return err == nil && len(got) >= want
		}
	},
}

var atSendMessageBatch = killPoint{
	name:  "the first SendMessageBatch of the release",
	match: func(r faultproxy.Request) bool { return r.Service == "sqs" && r.Action == "SendMessageBatch" },
	effect: func(s *tfScenario) func() bool {
		before, err := s.queued()
		return func() bool {
			n, qerr := s.queued()
			return err == nil && qerr == nil && n > before
		}
	},
}

// atUpdateToState is the first conditional instance transition to state,
// alone (UpdateItem) or in a transaction.
func atUpdateToState(state string) killPoint {
	type update struct {
		ExpressionAttributeValues map[string]struct{ S string }
	}
	return killPoint{
		name: "the first write of an instance to " + state,
		match: func(r faultproxy.Request) bool {
			if r.Service != "dynamodb" {
				return false
			}
			var updates []update
			switch r.Action {
			case "UpdateItem":
				var in update
				if json.Unmarshal(r.Body, &in) == nil {
					updates = append(updates, in)
				}
			case "TransactWriteItems":
				var in struct{ TransactItems []struct{ Update *update } }
				if json.Unmarshal(r.Body, &in) == nil {
					for _, ti := range in.TransactItems {
						if ti.Update != nil {
							updates = append(updates, *ti.Update)
						}
					}
				}
			}
			for _, u := range updates {
				if u.ExpressionAttributeValues[":toState"].S == state {
					return true
				}
			}
			return false
		},
		effect: func(s *tfScenario) func() bool {
			count := func() (int, error) {
				records, err := pool.ListInstances(context.Background(), direct.DynamoDB, s.w.pool)
				n := 0
				for _, r := range records {
					if r.State == state {
						n++
					}
				}
				return n, err
			}
			before, err := count()
			return func() bool {
				n, cerr := count()
				return err == nil && cerr == nil && n > before
			}
		},
	}
}

// queued counts the messages in the pool's queue, visible or not.
func (s *tfScenario) queued() (int, error) {
	ctx := context.Background()
	cfg, err := pool.ReadConfig(ctx, direct.DynamoDB, s.w.pool)
	if err != nil {
		return 0, err
	}
	out, err := direct.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(cfg.QueueURLs["large"]),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range out.Attributes {
		i, _ := strconv.Atoi(v)
		n += i
	}
	return n, nil
}

// lastLine is the last line of out containing substr, for logs.
func lastLine(out, substr string) string {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], substr) {
			return strings.TrimSpace(lines[i])
		}
	}
	return "(no line with " + strconv.Quote(substr) + ")"
}

// claimLogLines keeps the provider's log lines from the claim logic, the
// last max of them.
func claimLogLines(log string, max int) string {
	var keep []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "provider.terraform-provider-ec2runners") && strings.Contains(line, "@module=ec2runners") {
			keep = append(keep, line)
		}
	}
	if len(keep) > max {
		keep = keep[len(keep)-max:]
	}
	return strings.Join(keep, "\n")
}
