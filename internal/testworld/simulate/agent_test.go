package simulate

import (
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The runners' agents are the real agent on a simulated machine: the
// runner it installed (pinned) is in its heartbeat, the instance stays
// prepared, and the last signal is its confirmation of the second run's
// release, written by the agent before it terminated its instance.
func TestReplayRunsTheRealAgent(t *testing.T) {
	w, res := replayTwoRuns(t, 7*time.Minute)
	if res.Launched != 1 {
		t.Fatalf("launched %d, want the one runner of both runs", res.Launched)
	}
	life := lives(w)[0]
	var id string
	for k, l := range w.instances {
		if l == life {
			id = k
		}
	}
	arn := protocol.InstanceARN(arnPrefix, id)
	sig, ok := protocol.SignalFromItem(w.db.GetKey(protocol.AgentKey(arn, protocol.SortKeySignal)))
	if !ok || sig.State != protocol.SignalReleased || sig.RunID != "run-2" {
		t.Errorf("last signal %+v, want the agent's %s for run-2", sig, protocol.SignalReleased)
	}
	if v := protocol.HeartbeatRunnerVersion(w.db.GetKey(protocol.AgentKey(arn, protocol.SortKeyHeartbeat))); v != runnerVersion {
		t.Errorf("heartbeat's runner %q, want the agent's installed %s", v, runnerVersion)
	}
	if !life.host.Prepared() || life.runner.Installed() != runnerVersion || life.agent != nil || life.check != nil {
		t.Errorf("machine: prepared %v, runner %q, agent left %v, check left %v; want prepared with %s, no agent nor check once terminated",
			life.host.Prepared(), life.runner.Installed(), life.agent != nil, life.check != nil, runnerVersion)
	}
}

// An agent checks its deadlines every SelfCheckInterval from its boot, and
// ends its instance at the first check past its threshold and the grace:
// a claim's runner (booted at the launch, 0 s) released at 385 s with a
// 30 s idle_timeout (threshold 415 s) terminates itself at 480 s, its
// first check after 475 s.
func TestReplayAgentSelfChecksOnItsOwnSchedule(t *testing.T) {
	w := NewWorld(day, HotPolicy(30*time.Second), LatencyBySource(ColdBoot, StoppedStart))
	res := replayIn(t, w, oneRun(day, 5*time.Minute+10*time.Second))
	l := lives(w)[0]
	if want := day.Add(480 * time.Second); !l.ended.Equal(want) || !l.terminatedByIdle || res.TerminatedAtIdleDeadline != 1 {
		t.Errorf("ended at %s (by its agent: %v), want %s by its agent", l.ended.Format(time.TimeOnly), l.terminatedByIdle, want.Format(time.TimeOnly))
	}
}

// A stopped runner started again boots a new agent on the same machine:
// prepared once, and its runner installed once, at its first boot.
func TestReplayStartedRunnerKeepsItsMachine(t *testing.T) {
	policy := Policy{Name: "stopped 1", IdleTimeout: time.Minute, Warm: map[string]protocol.WarmTarget{"large": {Stopped: 1}}, FillAtStart: true}
	w := NewWorld(day, policy, LatencyBySource(ColdBoot, StoppedStart))
	res := replayIn(t, w, oneRun(at(10*time.Minute), 5*time.Minute))
	if res.BySource[SourceStopped] != 1 {
		t.Fatalf("sources %v, want one stopped start", res.BySource)
	}
	first := lives(w)[0]
	if first.boots != 1 || !first.host.Prepared() || first.runner.Installed() != runnerVersion {
		t.Errorf("the started runner: %d starts, prepared %v, runner %q; want 1 start on its prepared machine", first.boots, first.host.Prepared(), first.runner.Installed())
	}
}
