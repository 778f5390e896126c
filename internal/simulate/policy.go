package simulate

import (
	"fmt"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Policy is how the pool keeps runners warm: today the hot tier alone,
// each released runner idling for IdleTimeout before it terminates itself.
//
// Warm tiers plug in here without changing the driver: targets by class
// and schedule window (hot N, stopped M) become fields; the pool apply
// that fills them is an event the replay schedules at its start and at
// each window's edges (World.At); the agent's keep-or-leave decision at its
// idle deadline replaces World.idleDeadline's terminate; a stopped runner's
// start is one more entry of LatencyBySource.
type Policy struct {
	Name        string
	IdleTimeout time.Duration
}

// SeedsPolicy is the seeds' (and the provider's default): hot only, 7
// minutes.
func SeedsPolicy() Policy { return HotPolicy(7 * time.Minute) }

// HotPolicy keeps released runners hot for idle.
func HotPolicy(idle time.Duration) Policy {
	return Policy{Name: fmt.Sprintf("hot, idle %s", protocol.FormatDuration(idle)), IdleTimeout: idle}
}

// Policies are the guide's: the seeds', then longer idle timeouts.
func Policies() []Policy {
	return []Policy{SeedsPolicy(), HotPolicy(15 * time.Minute), HotPolicy(30 * time.Minute), HotPolicy(time.Hour)}
}
