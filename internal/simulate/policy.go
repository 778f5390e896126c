package simulate

import (
	"fmt"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Policy is how the pool keeps runners warm: today the hot tier alone,
// each released runner idling for IdleTimeout before it terminates itself.
//
// Warm tiers plug in without changing the driver:
//   - targets by class and schedule window (hot N, stopped M) become fields
//     here, written into the pool config by configure, which is all the
//     claim code reads;
//   - the pool apply that fills them is an event the replay schedules with
//     World.At at its start and at each window's edges;
//   - the agent's keep-or-leave decision at its idle deadline takes the
//     place of World.idleDeadline's TerminateInstances;
//   - a stopped runner's start is one more entry of LatencyBySource, and
//     its stopped hours (EBS only) one more term of instanceCost.
type Policy struct {
	Name        string
	IdleTimeout time.Duration
	// Warm are hot targets by class (the pool's warm attribute): releases
	// keep that many runners hot to the end of their window.
	Warm map[string]protocol.WarmTarget
}

// configure sets what the policy decides in the pool config the claims
// read.
func (p Policy) configure(cfg *protocol.PoolConfig) {
	cfg.IdleTimeout = protocol.Duration(p.IdleTimeout)
	cfg.Warm = p.Warm
}

// SeedsPolicy is the seeds' (and the provider's default): hot only, 7
// minutes.
func SeedsPolicy() Policy {
	p := HotPolicy(7 * time.Minute)
	p.Name += " (seeds')"
	return p
}

// HotPolicy keeps released runners hot for idle.
func HotPolicy(idle time.Duration) Policy {
	return Policy{Name: fmt.Sprintf("hot, idle %s", protocol.FormatDuration(idle)), IdleTimeout: idle}
}

// OfficeHoursPolicy idles for 7 minutes and keeps large and xlarge
// runners hot on weekdays from 08:00 to 19:00 (the weekday trace's time
// zone, UTC), as the pool's warm attribute does.
func OfficeHoursPolicy(large, xlarge int) Policy {
	window := func(hot int) protocol.WarmTarget {
		return protocol.WarmTarget{Schedule: []protocol.WarmWindow{
			{Days: []string{"mon", "tue", "wed", "thu", "fri"}, From: "08:00", To: "19:00", TimeZone: "UTC", Hot: protocol.Count(hot)},
		}}
	}
	return Policy{
		Name:        fmt.Sprintf("idle 7m, hot %d large + %d xlarge 08-19 weekdays", large, xlarge),
		IdleTimeout: 7 * time.Minute,
		Warm:        map[string]protocol.WarmTarget{"large": window(large), "xlarge": window(xlarge)},
	}
}

// Policies are the guide's: the seeds', longer idle timeouts, and hot
// targets in office hours.
func Policies() []Policy {
	return []Policy{SeedsPolicy(), HotPolicy(15 * time.Minute), HotPolicy(30 * time.Minute), HotPolicy(time.Hour),
		OfficeHoursPolicy(8, 2), OfficeHoursPolicy(16, 4)}
}
