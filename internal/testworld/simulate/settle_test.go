package simulate

import (
	"sync/atomic"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// settled reads Go's tracebacks: a goroutine of this module that runs is
// not settled, one blocked on a channel is (a check that Go still writes
// them as settled reads them).
func TestSettledTellsBlockedFromRunning(t *testing.T) {
	var stop atomic.Bool
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		for !stop.Load() {
		}
	}()
	if settled() {
		t.Error("settled while a goroutine spins")
	}
	stop.Store(true)
	<-spun
	release := make(chan struct{})
	defer close(release)
	go func() { <-release }()
	await.Until(t, "a goroutine blocked on a channel counts as settled", settled)
}
