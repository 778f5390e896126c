package simulate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/await"
)

// A wait on the virtual clock ends when the clock is set past its end,
// not before, and when its context ends.
func TestClockSleepEndsWithVirtualTime(t *testing.T) {
	c := NewClock(day)
	done := make(chan error, 1)
	go func() { done <- c.Sleep(context.Background(), time.Minute) }()
	await.Until(t, "the wait registered", func() bool { return c.Waiting() == 1 })
	c.Set(day.Add(59 * time.Second))
	select {
	case err := <-done:
		t.Fatalf("the wait ended at 59 s: %v", err)
	default:
	}
	c.Set(day.Add(time.Minute))
	if err := <-done; err != nil {
		t.Errorf("Sleep = %v", err)
	}
	c.Set(day) // never back
	if !c.Now().Equal(day.Add(time.Minute)) {
		t.Errorf("the clock went back to %s", c.Now())
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- c.Sleep(ctx, time.Hour) }()
	await.Until(t, "the second wait registered", func() bool { return c.Waiting() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || c.Waiting() != 0 {
		t.Errorf("Sleep after cancel = %v, %d waits left", err, c.Waiting())
	}
}
