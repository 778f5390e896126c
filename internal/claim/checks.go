package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// readyCheck waits for an instance to be registered for a run and healthy.
type readyCheck struct {
	runID string
	wait  time.Duration
	// healthyAtOnce: a warm runner must have a fresh heartbeat from the
	// start; a booting one only by the end of the wait.
	healthyAtOnce bool
}

// waitReady polls the agent's heartbeat and signal from the first moment, at
// short intervals, until UD_REG_OK for the run with a fresh heartbeat, a
// failure signal for the run, or the deadline.
func (c *Claimer) waitReady(ctx context.Context, s *store, id string, rc readyCheck, t Timings) error {
	deadline := c.now().Add(rc.wait)
	for {
		st, err := s.agent(ctx, id)
		if err != nil {
			return err
		}
		now := c.now()
		age := now.Sub(st.heartbeat)
		healthy := !st.heartbeat.IsZero() && age <= t.HeartbeatMaxAge
		sig := st.signal
		if sig.RunID == rc.runID {
			switch sig.State {
			case protocol.SignalRegistrationFailed, protocol.SignalUserDataFailed:
				return fmt.Errorf("the agent signalled %s", sig.State)
			case protocol.SignalRegistered:
				if healthy {
					return nil
				}
			}
		}
		if !healthy && (rc.healthyAtOnce || now.After(deadline)) {
			if st.heartbeat.IsZero() {
				return fmt.Errorf("unhealthy: no heartbeat")
			}
			return fmt.Errorf("unhealthy: last heartbeat %s ago (limit %s)", age.Truncate(time.Second), t.HeartbeatMaxAge)
		}
		if now.After(deadline) {
			return fmt.Errorf("no %s for run %s within %s (last signal: %s)", protocol.SignalRegistered, rc.runID, rc.wait, describeSignal(sig))
		}
		if err := sleep(ctx, t.PollInterval); err != nil {
			return err
		}
	}
}

// waitReleased waits for the agent to confirm it left the run and is ready
// for the pool again.
func (c *Claimer) waitReleased(ctx context.Context, s *store, id, runID string, t Timings) error {
	deadline := c.now().Add(t.ReleaseWait)
	for {
		st, err := s.agent(ctx, id)
		if err != nil {
			return err
		}
		if sig := st.signal; sig.RunID == runID {
			switch sig.State {
			case protocol.SignalReleased:
				return nil
			case protocol.SignalDeregistrationFailed:
				return fmt.Errorf("the agent signalled %s", sig.State)
			}
		}
		if c.now().After(deadline) {
			return fmt.Errorf("no %s for run %s within %s (last signal: %s)", protocol.SignalReleased, runID, t.ReleaseWait, describeSignal(st.signal))
		}
		if err := sleep(ctx, t.PollInterval); err != nil {
			return err
		}
	}
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
