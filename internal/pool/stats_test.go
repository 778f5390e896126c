package pool

import (
	"maps"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// A runner in its stopped time counts as stopped, not idle; one whose
// stopped time is over counts by its state again.
func TestCountStatesTellsStoppedFromIdle(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	past, future := protocol.FormatTime(now.Add(-time.Minute)), protocol.FormatTime(now.Add(time.Hour))
	all := []protocol.Instance{
		{ID: "i-hot", State: protocol.StateIdle, Threshold: future},
		{ID: "i-stopped", State: protocol.StateIdle, Threshold: past, StopUntil: future},
		{ID: "i-stopped-over", State: protocol.StateIdle, Threshold: past, StopUntil: past},
		{ID: "i-claimed", State: protocol.StateClaimed, RunID: "run-1", Threshold: future},
	}
	want := map[string]int{"created": 0, "running": 0, "idle": 2, "stopped": 1, "claimed": 1, "terminated": 0}
	if got := countStates(all, now); !maps.Equal(got, want) {
		t.Errorf("countStates = %v, want %v", got, want)
	}
}
