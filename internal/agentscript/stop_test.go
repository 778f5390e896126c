package agentscript_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// The pool's stopped tier, on the instance's side (issue 13): an idle
// runner whose record keeps it stopped stops its own instance instead of
// terminating it, and a claim starts it again.

// An idle runner in the stopped tier (its record's stopUntil ahead) stops
// its instance once its threshold and the grace have passed, and does not
// terminate it. A claim then takes it as it takes a stopped runner (its
// record claimed for the run, the run's token handed over) and starts it:
// it boots, puts its walls up again (a job reaches nothing it must not,
// the metadata service included), and registers for the run, prepared
// once.
func TestInstance_stoppedTierStopsThenResumesForAClaim(t *testing.T) {
	f := newFixture(t, repo, nil)
	threshold := time.Now().Add(3 * time.Second).Truncate(time.Second)
	f.putIdle(threshold, time.Now().Add(time.Hour))
	inst := f.start(f.options(), nil)
	f.awaitStopped()
	stops, due := f.env.Proxy.VerifiedAt("ec2 StopInstances"), threshold.Add(time.Duration(inst.Options.Intervals.SelfTerminationGrace))
	if len(stops) == 0 || stops[0].Before(due) {
		t.Errorf("StopInstances at %v, want the first after its threshold and grace, %s", stops, due)
	}
	f.checkNotTerminated()

	f.putToken(owner+"/"+repo, "run-1", "")
	if err := scripttest.PutInstance(context.Background(), clients, f.pool, scripttest.Record(f.instanceID, protocol.StateClaimed, "run-1", time.Now().Add(5*time.Minute))); err != nil {
		t.Fatal(err)
	}
	f.startAgain()
	f.waitSignal(protocol.SignalRegistered, "run-1")
	if r := f.env.GitHub.Runners()[f.instanceID]; r.Labels != f.label("run-1") || r.Target != owner+"/"+repo {
		t.Errorf("runner = %+v, want one for run-1 at %s/%s", r, owner, repo)
	}
	checkHostileJob(t, f, "run-1")
	for _, c := range []struct {
		what      string
		log, line string
		want      int
	}{
		{"the user data ran", inst.BootLog(), "running the user data", 1},
		{"the runner was installed", inst.Output(), "installing the GitHub runner", 1},
		{"the agent started", inst.Output(), "agent of " + f.instanceID, 2},
		{"the firewall rule was set", inst.Output(), "jobs are kept away from the instance metadata service", 2},
	} {
		if n := strings.Count(c.log, c.line); n != c.want {
			t.Errorf("%s %d times over two boots, want %d", c.what, n, c.want)
		}
	}
	f.checkNotTerminated()
}

// A stopped fill, launched to fill the stopped tier (InitialRunId a fill
// id, its record idle from its launch with a stopped time ahead), prepares,
// says so for its fill id, registers nothing, and stops. Started again
// while no claim took it, it says so again, and stops again.
func TestInstance_stoppedFillPreparesThenStops(t *testing.T) {
	fill := "warm-" + randomHex(6)
	tags := map[string]string{protocol.TagInitialRunID: fill}
	f := newFixture(t, repo, tags)
	f.putIdle(time.Now(), time.Now().Add(time.Hour))
	o := f.options()
	marker := filepath.Join(markerDir(t), "pre-runner-ran")
	o.PreRunnerScript = "id -un >> " + marker
	inst := f.start(o, tags)
	f.awaitStopped()
	f.startAgain()
	f.awaitStopped()

	signals := f.env.Proxy.Written("WS", protocol.AttrUpdatedAt)
	if n := strings.Count(inst.Output(), "signal UD_OK for run "+fill); len(signals) != 2 || n != 2 {
		t.Errorf("%d signals written, %d of them UD_OK for %s; want one UD_OK at each boot", len(signals), n, fill)
	}
	if s := f.get(protocol.SortKeySignal); s["state"] != protocol.SignalUserDataOK || s["runId"] != fill {
		t.Errorf("signal %v, want UD_OK for the fill %s", s, fill)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "root\n" {
		t.Errorf("pre-runner script output %q, %v; want it run once, as root", b, err)
	}
	if n := f.env.Proxy.Verified()["ec2 StopInstances"]; n < 2 {
		t.Errorf("%d StopInstances calls, want one at each boot", n)
	}
	if events := f.env.GitHub.Events(); slices.ContainsFunc(events, func(e string) bool { return !strings.HasPrefix(e, "download ") }) {
		t.Errorf("GitHub saw %v, want downloads alone: a fill registers no runner", events)
	}
	if inst.Boots() != 2 {
		t.Errorf("%d boots, want 2", inst.Boots())
	}
	f.checkNotTerminated()
}

// A runner of the stopped tier stops only once it is prepared: past its
// threshold, it waits while its preparation runs, and stops once prepared;
// if its preparation does not end within the created lifetime after boot
// (the orphan timeout) it terminates.
func TestInstance_stopsOnlyOncePrepared(t *testing.T) {
	for _, tc := range []struct {
		name     string
		prepared bool // the pre-runner script ends
	}{
		{"preparedLate", true},
		{"neverPrepared", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, repo, nil)
			f.putIdle(time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
			dir := markerDir(t)
			started, proceed := filepath.Join(dir, "started"), filepath.Join(dir, "proceed")
			o := f.options()
			o.PreRunnerScript = "touch " + started + "; until [ -e " + proceed + " ]; do sleep 0.2; done"
			if !tc.prepared {
				o.Intervals.OrphanTimeout = protocol.Duration(3 * time.Second)
			}
			inst := f.start(o, nil)
			if !tc.prepared {
				f.awaitEC2State(ec2types.InstanceStateNameTerminated, ec2types.InstanceStateNameShuttingDown)
				if n := f.env.Proxy.Verified()["ec2 StopInstances"]; n != 0 || !strings.Contains(inst.Output(), "not prepared 3s after boot") {
					t.Errorf("%d StopInstances calls; want none, and a termination for want of preparation in the agent's log:\n%s", n, inst.Output())
				}
				return
			}
			await.Until(t, "the pre-runner script running", func() bool { _, err := os.Stat(started); return err == nil })
			// While it prepares, only the self-check reads the record: two
			// reads after the script started are two checks past the
			// threshold.
			since := time.Now()
			await.True(t, "two self-checks during the preparation", func() error {
				n := 0
				for _, at := range f.env.Proxy.VerifiedAt("dynamodb GetItem") {
					if at.After(since) {
						n++
					}
				}
				return await.Bool(n >= 2)
			})
			verified := f.env.Proxy.Verified()
			if verified["ec2 StopInstances"]+verified["ec2 TerminateInstances"] != 0 || !inst.Running() {
				t.Fatalf("while preparing: calls %v, running %t; want it to wait, running", verified, inst.Running())
			}
			if err := os.WriteFile(proceed, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			f.awaitStopped()
			f.checkNotTerminated()
		})
	}
}

// awaitStopped waits until EC2 says the instance is stopped and its
// stand-in has powered off.
func (f *fixture) awaitStopped() {
	f.t.Helper()
	f.awaitEC2State(ec2types.InstanceStateNameStopped)
	await.True(f.t, "the instance stand-in powered off", func() error {
		if f.inst.Running() {
			return errors.New("its processes still run")
		}
		return nil
	})
}

// startAgain starts the stopped instance, as a claim does, and waits until
// its stand-in has booted again (it may be stopping again already).
func (f *fixture) startAgain() {
	f.t.Helper()
	boots := f.inst.Boots()
	if _, err := clients.EC2.StartInstances(context.Background(), &ec2.StartInstancesInput{InstanceIds: []string{f.instanceID}}); err != nil {
		f.t.Fatal(err)
	}
	await.Until(f.t, "the instance booted again", func() bool { return f.inst.Boots() > boots })
}

// checkNotTerminated: the agent never asked EC2 to terminate its instance.
func (f *fixture) checkNotTerminated() {
	f.t.Helper()
	if n := f.env.Proxy.Verified()["ec2 TerminateInstances"]; n != 0 {
		f.t.Errorf("%d TerminateInstances calls, want none", n)
	}
	f.checkSignatures()
}
