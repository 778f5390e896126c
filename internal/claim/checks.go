package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

// judge decides from what an agent published whether the wait for it is
// over: done with a nil error when it did what was asked, done with the
// reason when it failed or its deadline passed, not done to keep waiting.
type judge func(st agentState, v view) (done bool, err error)

// view is what the watch knows of an agent beyond its latest items, all on
// the provider's clock.
type view struct {
	now, deadline time.Time
	since         time.Time // when the watch began
	// beating: its heartbeat changed between two reads, so the agent is
	// alive whatever its clock says.
	beating bool
}

// healthy tells whether the agent heartbeats: its heartbeat changed, or
// its own timestamp is within maxAge.
func (v view) healthy(st agentState, maxAge time.Duration) bool {
	return v.beating || (!st.heartbeat.IsZero() && v.now.Sub(st.heartbeat) <= maxAge)
}

// registration is what a runner must register for: the run, and the label
// the claim handed it with its registration token ("" when it handed none,
// in a pool without a GitHub target: the runner registers nowhere).
type registration struct {
	runID, label string
}

// registration is what the attempt's runners must register for.
func (a *attempt) registration() registration {
	r := registration{runID: a.req.RunID}
	switch {
	case a.regToken != nil:
		r.label = a.regToken.label
	case a.grant != nil:
		r.label = a.grant.label
	}
	return r
}

// registered judges a runner that must register for the run and be healthy:
// UD_REG_OK for the run, with the claim's label, and a fresh heartbeat, or
// a failure signal for the run. healthyAtOnce: a warm runner must heartbeat
// from the start; a booting one only by the end of the wait.
//
// A runner that registered with another label fails at once: no job that
// asks for the claim's label would reach it. An agent that names no label
// is older than labels with a secret, and registered with the run id alone,
// the label every job can guess.
//
// The agent's clock is not the provider's: a heartbeat that changed between
// two reads is fresh, and one whose own timestamp is recent enough is taken
// as fresh too (the registration, which a dead agent cannot make, confirms
// it). An agent is judged dead only on the provider's clock: no heartbeat
// change in HeartbeatMaxAge since the watch began.
//
// A runner GitHub would send no job to (policy, when known: its version as
// its heartbeat tells it is older than GitHub accepts) fails at once: its
// agent keeps it on the newest release while it waits in the pool, and one
// that could not is retired rather than handed out.
func registered(reg registration, wait time.Duration, healthyAtOnce bool, t Timings, policy *protocol.RunnerPolicy) judge {
	runID := reg.runID
	return func(st agentState, v view) (bool, error) {
		now, deadline := v.now, v.deadline
		if policy != nil && st.runnerVersion != "" && !policy.Accepts(st.runnerVersion) {
			return true, failCheck(metrics.ReasonOutdatedRunner, "its runner %s is older than GitHub accepts (%s and later): GitHub would send it no job", st.runnerVersion, policy.Minimum)
		}
		healthy := v.healthy(st, t.HeartbeatMaxAge)
		if sig := st.signal; sig.RunID == runID {
			switch sig.State {
			case protocol.SignalRegistrationFailed:
				return true, failCheck(metrics.ReasonRegistrationFailed, "the agent signalled %s", sig.State)
			case protocol.SignalUserDataFailed:
				return true, failCheck(metrics.ReasonUserDataFailed, "the agent signalled %s", sig.State)
			case protocol.SignalRegistered:
				switch {
				case reg.label != "" && sig.Label == "":
					return true, errors.New("its agent registered the runner with the run id alone, not the claim's label: " +
						"the agent is older than this provider; render the pool's user data with this provider's ec2runners_runner_script")
				case reg.label != "" && sig.Label != reg.label:
					return true, errors.New("its agent registered the runner with another label than the claim's")
				case healthy:
					return true, nil
				}
			}
		}
		silent := now.Sub(v.since) > t.HeartbeatMaxAge
		if !healthy && ((healthyAtOnce && silent) || now.After(deadline)) {
			if st.heartbeat.IsZero() {
				return true, failCheck(metrics.ReasonNoHeartbeat, "unhealthy: no heartbeat")
			}
			return true, failCheck(metrics.ReasonStaleHeartbeat, "unhealthy: no new heartbeat in %s (the last one stamped %s by its clock)", now.Sub(v.since).Truncate(time.Second), protocol.FormatTime(st.heartbeat))
		}
		if now.After(deadline) {
			return true, lateError{failCheck(metrics.ReasonRegistrationTimeout, "no %s for run %s within %s (last signal: %s)", protocol.SignalRegistered, runID, wait, describeSignal(st.signal))}
		}
		return false, nil
	}
}

// prepared judges a runner a fill launched: UD_OK for the fill (its
// InitialRunId) with a fresh heartbeat, before the wait ends.
func prepared(fill string, wait time.Duration, t Timings) judge {
	return func(st agentState, v view) (bool, error) {
		healthy := v.healthy(st, t.HeartbeatMaxAge)
		if sig := st.signal; sig.RunID == fill {
			switch sig.State {
			case protocol.SignalUserDataFailed:
				return true, failCheck(metrics.ReasonUserDataFailed, "the agent signalled %s", sig.State)
			case protocol.SignalUserDataOK:
				if healthy {
					return true, nil
				}
			}
		}
		if v.now.After(v.deadline) {
			return true, failCheck(metrics.ReasonNotPrepared, "no %s with a fresh heartbeat within %s (last signal: %s)", protocol.SignalUserDataOK, wait, describeSignal(st.signal))
		}
		return false, nil
	}
}

// lateError is a failure of timing alone: the agent is alive, but did not
// do what was asked in time (a slow GitHub, a wait set too short). Such a
// runner is given back to the pool, not terminated.
type lateError struct{ error }

func (e lateError) Unwrap() error { return e.error }

func isLate(err error) bool {
	var late lateError
	return errors.As(err, &late)
}

// released judges a runner given back by runID: its agent must confirm it
// left the run and is ready for the pool again.
func released(runID string, wait time.Duration) judge {
	return func(st agentState, v view) (bool, error) {
		now, deadline := v.now, v.deadline
		if sig := st.signal; sig.RunID == runID {
			switch sig.State {
			case protocol.SignalReleased:
				return true, nil
			case protocol.SignalDeregistrationFailed:
				return true, failCheck(metrics.ReasonDeregistrationFailed, "the agent signalled %s", sig.State)
			}
		}
		if now.After(deadline) {
			return true, failCheck(metrics.ReasonReleaseUnconfirmed, "no %s for run %s within %s (last signal: %s)", protocol.SignalReleased, runID, wait, describeSignal(st.signal))
		}
		return false, nil
	}
}

// agentWatch waits on the agents of many runners at once: every round reads
// all the heartbeats and signals it still waits on in one BatchGetItem (50
// runners per call), from the first moment.
type agentWatch struct {
	s         *store
	arnPrefix string // the pool config's: where the agents' partitions are
	pending   map[string]*watched
}

type watched struct {
	since, deadline time.Time
	judge           judge
	read            bool      // its heartbeat was read once
	heartbeat       time.Time // as first read
	beating         bool      // it changed since
}

func newAgentWatch(s *store, arnPrefix string) *agentWatch {
	return &agentWatch{s: s, arnPrefix: arnPrefix, pending: map[string]*watched{}}
}

// add waits on the agent of id for at most wait.
func (w *agentWatch) add(id string, wait time.Duration, j judge) {
	now := w.s.now()
	w.pending[id] = &watched{since: now, deadline: now.Add(wait), judge: j}
}

func (w *agentWatch) len() int { return len(w.pending) }

// poll reads every agent still waited on once and returns those decided:
// nil for the ones that did what was asked, the reason for the others.
func (w *agentWatch) poll(ctx context.Context) (map[string]error, error) {
	ids := make([]string, 0, len(w.pending))
	for id := range w.pending {
		ids = append(ids, id)
	}
	states, err := w.s.agents(ctx, w.arnPrefix, ids)
	if err != nil {
		return nil, err
	}
	now := w.s.now()
	decided := map[string]error{}
	for id, p := range w.pending {
		st := states[id]
		if !p.read {
			p.read, p.heartbeat = true, st.heartbeat
		} else if !st.heartbeat.Equal(p.heartbeat) {
			p.beating = true
		}
		if done, err := p.judge(st, view{now: now, deadline: p.deadline, since: p.since, beating: p.beating}); done {
			decided[id] = err
			delete(w.pending, id)
		}
	}
	return decided, nil
}

// wait polls every interval until every agent is decided. The first read
// waits an interval too: an agent answers what the claim just wrote at its
// next read of its record, never at once.
func (w *agentWatch) wait(ctx context.Context, interval time.Duration) (map[string]error, error) {
	all := map[string]error{}
	for w.len() > 0 {
		if err := w.s.pause(ctx, interval); err != nil {
			return all, err
		}
		decided, err := w.poll(ctx)
		if err != nil {
			return all, err
		}
		for id, err := range decided {
			all[id] = err
		}
	}
	return all, nil
}

func describeSignal(s protocol.Signal) string {
	if s.State == "" {
		return "none"
	}
	return fmt.Sprintf("%s for run %q", s.State, s.RunID)
}

// sleepOn waits d with sleeper, a virtual clock's, or with a timer when
// sleeper is nil.
func sleepOn(sleeper func(context.Context, time.Duration) error, ctx context.Context, d time.Duration) error {
	if sleeper != nil {
		return sleeper(ctx, d)
	}
	return retry.Sleep(ctx, d)
}
