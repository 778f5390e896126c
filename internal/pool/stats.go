package pool

import (
	"context"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Counts is a snapshot of a pool's occupancy.
type Counts struct {
	IdleMessages   map[string]int // visible messages per resource class
	InstanceStates map[string]int // instance records per state
}

// Count reports the idle messages per class and instance records per state.
func (m *Manager) Count(ctx context.Context, st *Status) (Counts, error) {
	c := Counts{IdleMessages: map[string]int{}, InstanceStates: map[string]int{}}
	for _, s := range []string{protocol.StateCreated, protocol.StateRunning, protocol.StateIdle, protocol.StateClaimed, protocol.StateTerminated} {
		c.InstanceStates[s] = 0
	}
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
	for _, inst := range all {
		c.InstanceStates[inst.State]++
	}
	return c, nil
}
