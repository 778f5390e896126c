package agent

import (
	"context"
	"time"
)

// SystemClock is the machine's clock.
type SystemClock struct{}

// Now is the time.
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits d, or until ctx ends.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
