package claim

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Agents' clocks are not the provider's: a warm runner whose clock runs a
// minute behind (its heartbeats look a minute old) or ahead is alive while
// its heartbeat keeps changing, and is claimed, not terminated and
// replaced by a new instance.
func TestCreateJudgesHeartbeatsOnTheProvidersClock(t *testing.T) {
	for _, skew := range []time.Duration{-time.Minute, time.Minute} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.agents.SetClockSkew(skew) // its heartbeats say so
			e.seedIdle("i-1", healthy)
			res, err := e.create(1, func(r *Request) { r.Timings.RegistrationWait = 10 * time.Second })
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(res.Instances); res.Reused != 1 || !slices.Equal(got, []string{"i-1"}) {
				t.Errorf("instances %v, reused %d: want the warm i-1", got, res.Reused)
			}
			if got := e.ec2.TerminatedIDs(); len(got) != 0 {
				t.Errorf("terminated %v", got)
			}
		})
	}
}
