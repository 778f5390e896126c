package simulate

import (
	"context"
	"fmt"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agenttest"
)

// The pool's runners run the real agent (package agent), one agent.Agent
// per boot of an instance, on the instance's machine (an agenttest Host
// and Runner, kept across its boots: the runner installs at once and
// registers without GitHub). The replay drives the agent's steps (doc.go
// says why it does not run agent.Run): at its boot, when its record
// changes, and at its self-checks past its record's deadline. Each step
// heartbeats first, as the agent's heartbeat loop would have within the
// claims' HeartbeatMaxAge.

// runnerVersion is the runner the simulated agents install, pinned: there
// is no GitHub to ask for the newest, and a pinned runner is never updated
// while idle.
const runnerVersion = protocol.MinimumRunnerVersion

// agentConfig is the configuration of every simulated agent: the
// protocol's default intervals (SelfTerminationGrace, SelfCheckInterval),
// and no GitHub target (the pool hands out no tokens).
func agentConfig() agent.Config {
	return agent.Config{
		Pool: poolName, Region: "us-east-1", GitHubURL: "https://github.com", RunnerUser: "runner",
		Runner: agent.RunnerSource{Version: runnerVersion},
	}
}

// machine is what an instance keeps across its boots, and the agent of its
// current boot.
type machine struct {
	host   *agenttest.Host
	runner *agenttest.Runner
	// boots counts the instance's starts (0: its launch): a boot
	// scheduled for an earlier one (the instance stopped and started again
	// meanwhile) does not happen.
	boots int
	// agent is the agent of the current boot, bootAt when it booted; nil
	// while the instance boots, is stopped or ended.
	agent  *agent.Agent
	bootAt time.Time
	// check is the agent's next self-check that can act (nil: none).
	check *pendingCheck
}

// pendingCheck is a scheduled self-check; dropped once superseded, or its
// agent is down.
type pendingCheck struct {
	at      time.Time
	dropped bool
}

// down ends the current boot's agent and its scheduled check (World.mu
// held).
func (m *machine) down() {
	m.agent = nil
	if m.check != nil {
		m.check.dropped = true
		m.check = nil
	}
}

// bootAfter schedules the boot of id's agent d from now, for its instance's
// current launch or start (World.mu held).
func (w *World) bootAfter(id string, d time.Duration) {
	gen := w.instances[id].boots
	w.events.push(event{at: w.clock.Now().Add(d), key: "boot " + id, do: func(ctx context.Context) error { return w.boot(ctx, id, gen) }})
}

// boot is id's instance having booted (the gen-th launch or start): a new
// agent heartbeats, prepares the instance (Boot: UD_OK for its InitialRunId
// tag), checks its deadlines (a runner filled into the stopped tier stops
// now: its boot latency includes its preparation), and serves its record
// (Poll: it registers for a run its record names).
func (w *World) boot(ctx context.Context, id string, gen int) error {
	life := w.life(id)
	if life == nil {
		return nil
	}
	life.steps.Lock()
	defer life.steps.Unlock()
	w.ec2.Mu.Lock()
	initialRun := w.ec2.InitialRunIDs[id]
	w.ec2.Mu.Unlock()
	now := w.clock.Now()
	w.mu.Lock()
	booting := life.ended.IsZero() && !life.runningSince.IsZero() && life.agent == nil && life.boots == gen
	var ag *agent.Agent
	if booting {
		ag = agent.New(agentConfig(), agent.Identity{InstanceID: id, InstanceARN: protocol.InstanceARN(arnPrefix, id), InitialRunID: initialRun},
			agent.Deps{
				Table: w.db, EC2: meteredEC2{w.ec2, w}, Clock: w.clock, Host: life.host, Runner: life.runner,
				Background: func(f func()) { f() },
			})
		life.agent, life.bootAt = ag, now
	}
	w.mu.Unlock()
	if !booting {
		return nil // ended or stopped while it booted, or booted already (a claim's launch)
	}
	if err := ag.Heartbeat(ctx); err != nil {
		return fmt.Errorf("agent of %s: %w", id, err)
	}
	if err := ag.Boot(ctx, nil); err != nil {
		return fmt.Errorf("agent of %s preparing its instance: %w", id, err)
	}
	if w.selfCheck(ctx, id, life, ag) {
		return nil
	}
	w.serve(ctx, ag)
	w.scheduleCheck(id, life, ag)
	return nil
}

// changed is the table's AfterInstance: a write changed id's record, and
// its agent acts on it within the write, as one that just read it. A
// claim's launch (a new record in state created) boots at once.
func (w *World) changed(ctx context.Context, old, cur protocol.Instance, existed bool) {
	ctx = context.WithoutCancel(ctx) // the agent's calls are its own, not the writer's
	var err error
	if !existed && cur.State == protocol.StateCreated {
		w.mu.Lock()
		gen := -1
		if life := w.instances[cur.ID]; life != nil {
			gen = life.boots
		}
		w.mu.Unlock()
		err = w.boot(ctx, cur.ID, gen)
	} else {
		err = w.act(ctx, cur.ID)
	}
	if err != nil {
		w.fail(err)
	}
}

// act is id's agent acting on its changed record: it heartbeats and
// serves it (Poll: it registers for a new run, or confirms a release).
func (w *World) act(ctx context.Context, id string) error {
	life := w.life(id)
	if life == nil {
		return nil
	}
	life.steps.Lock()
	defer life.steps.Unlock()
	ag := w.agentOf(life)
	if ag == nil {
		return nil // booting, stopped or ended: it answers nothing
	}
	if err := ag.Heartbeat(ctx); err != nil {
		return fmt.Errorf("agent of %s: %w", id, err)
	}
	w.serve(ctx, ag)
	w.scheduleCheck(id, life, ag)
	return nil
}

// serve polls the record as the agent's serving loop does: again at once
// while a poll says so (it registered or left a run, and the record may
// already name the next).
func (w *World) serve(ctx context.Context, ag *agent.Agent) {
	for range 4 { // register, leave, register again: the most a record asks at once
		if ag.Poll(ctx) > 0 {
			return
		}
	}
}

// selfCheck runs the agent's SelfCheck and tells whether it ended its
// instance (stopped or terminated it: its lives are metered by meteredEC2).
func (w *World) selfCheck(ctx context.Context, id string, life *instanceLife, ag *agent.Agent) bool {
	switch ag.SelfCheck(ctx) {
	case agent.EndTerminated:
		w.mu.Lock()
		life.terminatedByIdle = true
		w.mu.Unlock()
		return true
	case agent.EndStopped:
		return true
	}
	return false
}

// scheduleCheck schedules the agent's first self-check that can act on
// its record: the first of its checks (every SelfCheckInterval from its
// boot) after the record's deadline (its threshold and the grace; none for
// a record without a threshold), or after its orphan timeout while it has
// no record; at its next check when the record is terminated (the claim
// that marked it terminates the instance first). It replaces the check
// scheduled before (life.steps held).
func (w *World) scheduleCheck(id string, life *instanceLife, ag *agent.Agent) {
	now := w.clock.Now()
	cfg := agentConfig().WithDefaults()
	rec, err := protocol.InstanceFromItem(w.db.Get(protocol.TypeInstance, id))
	w.mu.Lock()
	defer w.mu.Unlock()
	if life.agent != ag {
		return // it ended its instance
	}
	var deadline time.Time
	switch threshold, terr := protocol.ParseTime(rec.Threshold); {
	case err != nil:
		deadline = life.bootAt.Add(time.Duration(cfg.Intervals.OrphanTimeout))
	case rec.State == protocol.StateTerminated:
		deadline = now
	case terr == nil:
		deadline = threshold.Add(time.Duration(cfg.Intervals.SelfTerminationGrace))
	}
	if deadline.IsZero() {
		return
	}
	// Its checks are bootAt + k intervals; the first strictly after the
	// deadline (the agent acts once it is past), and after now.
	interval := time.Duration(cfg.Intervals.SelfCheck)
	after := later(deadline, now)
	at := life.bootAt.Add((after.Sub(life.bootAt)/interval + 1) * interval)
	if life.check != nil {
		if life.check.at.Equal(at) {
			return
		}
		life.check.dropped = true
	}
	check := &pendingCheck{at: at}
	life.check = check
	w.events.push(event{at: at, key: "check " + id, dropped: &check.dropped, do: func(ctx context.Context) error { return w.checkAt(ctx, id, check) }})
}

// checkAt is the agent's self-check at check.at: it heartbeats and acts on
// its deadlines, stopping its instance in its stopped time and
// terminating it otherwise.
func (w *World) checkAt(ctx context.Context, id string, check *pendingCheck) error {
	life := w.life(id)
	life.steps.Lock()
	defer life.steps.Unlock()
	w.mu.Lock()
	ag := life.agent
	current := life.check == check
	if current {
		life.check = nil
	}
	w.mu.Unlock()
	if !current || ag == nil {
		return nil
	}
	if err := ag.Heartbeat(ctx); err != nil {
		return fmt.Errorf("agent of %s: %w", id, err)
	}
	if !w.selfCheck(ctx, id, life, ag) {
		w.scheduleCheck(id, life, ag)
	}
	return nil
}

func (w *World) life(id string) *instanceLife {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.instances[id]
}

func (w *World) agentOf(life *instanceLife) *agent.Agent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return life.agent
}

// fail stops the replay with err, unless it failed already.
func (w *World) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = fmt.Errorf("at %s: %w", protocol.FormatTime(w.clock.Now()), err)
	}
}
