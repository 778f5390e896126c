package agent

import (
	"context"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

// SystemClock is the machine's clock.
type SystemClock struct{}

// Now is the time.
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits d, or until ctx ends.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error { return retry.Sleep(ctx, d) }
