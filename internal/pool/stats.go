package pool

import (
	"context"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Counts is a snapshot of a pool's occupancy.
type Counts struct {
	IdleMessages   map[string]int // visible messages per resource class
	InstanceStates map[string]int // instance records per state, stopped apart from idle
}

// stateStopped counts the idle records in their stopped time apart: an
// operator tells a hot pool from a stopped one at a glance.
const stateStopped = "stopped"

// Count reports the idle messages per class and instance records per state.
func (m *Manager) Count(ctx context.Context, st *Status) (Counts, error) {
	c := Counts{IdleMessages: map[string]int{}}
	for class, url := range st.QueueURLs {
		info, err := m.queueInfo(ctx, url)
		if err != nil {
			return Counts{}, err
		}
		c.IdleMessages[class] = info.visible
	}
	all, err := ListInstances(ctx, m.DynamoDB, st.Config.Name)
	if err != nil {
		return Counts{}, err
	}
	c.InstanceStates = countStates(all, time.Now())
	return c, nil
}

// countStates counts records per state, every state present.
func countStates(all []protocol.Instance, now time.Time) map[string]int {
	counts := map[string]int{}
	for _, s := range []string{protocol.StateCreated, protocol.StateRunning, protocol.StateIdle, stateStopped, protocol.StateClaimed, protocol.StateTerminated} {
		counts[s] = 0
	}
	for _, inst := range all {
		if inst.Stopped(now) {
			counts[stateStopped]++
		} else {
			counts[inst.State]++
		}
	}
	return counts
}
