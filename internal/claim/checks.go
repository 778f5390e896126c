package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// judge decides from what an agent published whether the wait for it is
// over: done with a nil error when it did what was asked, done with the
// reason when it failed or its deadline passed, not done to keep waiting.
type judge func(st agentState, now, deadline time.Time) (done bool, err error)

// registered judges a runner that must register for runID and be healthy:
// UD_REG_OK for the run with a fresh heartbeat, or a failure signal for the
// run. healthyAtOnce: a warm runner must heartbeat from the start; a booting
// one only by the end of the wait.
func registered(runID string, wait time.Duration, healthyAtOnce bool, t Timings) judge {
	return func(st agentState, now, deadline time.Time) (bool, error) {
		age := now.Sub(st.heartbeat)
		healthy := !st.heartbeat.IsZero() && age <= t.HeartbeatMaxAge
		if sig := st.signal; sig.RunID == runID {
			switch sig.State {
			case protocol.SignalRegistrationFailed, protocol.SignalUserDataFailed:
				return true, fmt.Errorf("the agent signalled %s", sig.State)
			case protocol.SignalRegistered:
				if healthy {
					return true, nil
				}
			}
		}
		if !healthy && (healthyAtOnce || now.After(deadline)) {
			if st.heartbeat.IsZero() {
				return true, fmt.Errorf("unhealthy: no heartbeat")
			}
			return true, fmt.Errorf("unhealthy: last heartbeat %s ago (limit %s)", age.Truncate(time.Second), t.HeartbeatMaxAge)
		}
		if now.After(deadline) {
			return true, fmt.Errorf("no %s for run %s within %s (last signal: %s)", protocol.SignalRegistered, runID, wait, describeSignal(st.signal))
		}
		return false, nil
	}
}

// released judges a runner given back by runID: its agent must confirm it
// left the run and is ready for the pool again.
func released(runID string, wait time.Duration) judge {
	return func(st agentState, now, deadline time.Time) (bool, error) {
		if sig := st.signal; sig.RunID == runID {
			switch sig.State {
			case protocol.SignalReleased:
				return true, nil
			case protocol.SignalDeregistrationFailed:
				return true, fmt.Errorf("the agent signalled %s", sig.State)
			}
		}
		if now.After(deadline) {
			return true, fmt.Errorf("no %s for run %s within %s (last signal: %s)", protocol.SignalReleased, runID, wait, describeSignal(st.signal))
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
	pending   map[string]watched
}

type watched struct {
	deadline time.Time
	judge    judge
}

func newAgentWatch(s *store, arnPrefix string) *agentWatch {
	return &agentWatch{s: s, arnPrefix: arnPrefix, pending: map[string]watched{}}
}

// add waits on the agent of id for at most wait.
func (w *agentWatch) add(id string, wait time.Duration, j judge) {
	w.pending[id] = watched{deadline: w.s.now().Add(wait), judge: j}
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
		if done, err := p.judge(states[id], now, p.deadline); done {
			decided[id] = err
			delete(w.pending, id)
		}
	}
	return decided, nil
}

// wait polls every interval until every agent is decided.
func (w *agentWatch) wait(ctx context.Context, interval time.Duration) (map[string]error, error) {
	all := map[string]error{}
	for w.len() > 0 {
		decided, err := w.poll(ctx)
		if err != nil {
			return all, err
		}
		for id, err := range decided {
			all[id] = err
		}
		if w.len() > 0 {
			if err := sleep(ctx, interval); err != nil {
				return all, err
			}
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

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
