package agentscript_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript/scripttest"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The agent as EC2 runs it, in the instance stand-in: the user data, run as
// root, installs the unit and starts it; the agent reads the instance
// metadata at 169.254.169.254 and heartbeats to the emulator from inside the
// instance's network namespace; a claim registers the runner, whose job runs
// as the runner user the script created; the release deregisters it.
func TestInstance_servesAClaimAsEC2RunsIt(t *testing.T) {
	f := newFixture(t, nil)
	var inst *scripttest.Instance
	t.Cleanup(func() { checkInstanceGone(t, inst) }) // after the instance's own cleanup
	f.putTokens(owner + "/" + repo)
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	inst = f.env.StartInstance(t, f.env.Options(t, f.pool, owner, repo), scripttest.InstanceConfig{InstanceID: f.instanceID})
	o := inst.Options

	await.True(t, "the user data to finish", func() error {
		if status, exited := inst.UserDataExit(); !exited {
			return errors.New("still running")
		} else if status != 0 {
			return fmt.Errorf("exit status %d", status)
		}
		return nil
	})
	if got, want := inst.SystemctlCalls(), []string{"daemon-reload", "enable --now ec2runners-agent.service"}; !slices.Equal(got, want) {
		t.Errorf("systemctl calls = %q, want %q", got, want)
	}
	unit, err := os.ReadFile(filepath.Join(o.SystemdDir, scripttest.AgentUnit))
	if err != nil || !strings.Contains(string(unit), "ExecStart="+o.AgentPath+" run\n") {
		t.Errorf("unit file = %q, %v", unit, err)
	}

	await.True(t, "two heartbeats", func() error {
		if got := f.heartbeats(); len(got) < 2 {
			return fmt.Errorf("%d written", len(got))
		}
		return nil
	})
	if !strings.Contains(inst.Output(), "agent of "+f.instanceID) {
		t.Errorf("the agent did not learn its instance id from the metadata service:\n%s", inst.Output())
	}
	checkIdentityOverIPv6(t, inst)

	res, err := f.claim("run-1")
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(res.Instances) != 1 || res.Instances[0].ID != f.instanceID {
		t.Fatalf("claim = %+v, want the instance %s", res, f.instanceID)
	}
	f.waitSignal(protocol.SignalRegistered, "run-1")
	await.True(t, "the runner online with label run-1", func() error {
		if r, ok := f.env.GitHub.Runners()[f.instanceID]; !ok || r.Labels != "run-1" || !r.Running {
			return fmt.Errorf("runner %+v (registered: %t)", r, ok)
		}
		return nil
	})

	checkJob(t, f, inst)

	if outcomes, err := f.claimer.Release(context.Background(), f.pool, "run-1"); err != nil {
		t.Fatalf("release: %v (%v)", err, outcomes)
	}
	f.waitSignal(protocol.SignalReleased, "run-1")
	if r, registered := f.env.GitHub.Runners()[f.instanceID]; registered {
		t.Errorf("after the release the runner is still registered: %+v", r)
	}
	f.checkSignatures("dynamodb PutItem", "dynamodb GetItem")
}

// checkJob runs a job on the registered runner: it runs as the runner user,
// in its workspace below the runner's _work, with a job's environment.
func checkJob(t *testing.T, f *fixture, inst *scripttest.Instance) {
	t.Helper()
	id := f.env.GitHub.QueueJob("run-1", `id -un
echo "GITHUB_ACTIONS=$GITHUB_ACTIONS"
echo "HOME=$HOME"
echo "PWD=$PWD"
echo "GITHUB_WORKSPACE=$GITHUB_WORKSPACE"
echo "RUNNER_TEMP=$RUNNER_TEMP"
`)
	await.True(t, "the job's result", func() error { return await.Bool(f.env.GitHub.JobResult(id).Done) })
	job := f.env.GitHub.JobResult(id)
	work := filepath.Join(inst.Options.RunnerDir, "_work")
	want := strings.Join([]string{
		inst.RunnerUser,
		"GITHUB_ACTIONS=true",
		"HOME=/home/" + inst.RunnerUser,
		"PWD=" + work + "/" + repo + "/" + repo,
		"GITHUB_WORKSPACE=" + work + "/" + repo + "/" + repo,
		"RUNNER_TEMP=" + work + "/_temp",
	}, "\n") + "\n"
	if job.ExitCode != 0 || job.Output != want || job.Runner != f.instanceID {
		t.Errorf("job ran on %q with exit code %d and output:\n%s\nwant exit code 0 on %s and:\n%s", job.Runner, job.ExitCode, job.Output, f.instanceID, want)
	}
}

// checkIdentityOverIPv6 reads the instance identity document inside the
// instance, from the metadata service's IPv6 address: the emulator's account.
func checkIdentityOverIPv6(t *testing.T, inst *scripttest.Instance) {
	t.Helper()
	out, err := inst.Command("bash", "-c", `imds=http://[fd00:ec2::254]/latest
		token=$(curl -gsSf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$imds/api/token") &&
		curl -gsSf -H "X-aws-ec2-metadata-token: $token" "$imds/dynamic/instance-identity/document"`).CombinedOutput()
	for _, want := range []string{`"accountId" : "000000000000"`, `"instanceId" : "` + inst.ID + `"`, `"region" : "` + region + `"`} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("identity document over IPv6: %v\n%s\nwant %s in it", err, out, want)
		}
	}
}

// checkInstanceGone checks that the instance's cleanup left nothing behind.
func checkInstanceGone(t *testing.T, inst *scripttest.Instance) {
	if inst == nil {
		return
	}
	if _, err := user.Lookup(inst.RunnerUser); err == nil {
		t.Errorf("the runner user %s outlived the instance", inst.RunnerUser)
	}
	for _, path := range []string{inst.Root, "/home/" + inst.RunnerUser} {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s outlived the instance", path)
		}
	}
}
