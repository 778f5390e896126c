package simulate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// Waits on the virtual clock end one at a time, the earliest first, when
// the driver wakes them, the clock moving to their end; moving the clock
// past a wait does not end it, and its context does.
func TestClockSleepEndsWithVirtualTime(t *testing.T) {
	c := NewClock(day)
	done := make(chan error, 1)
	later := make(chan error, 1)
	go func() { later <- c.Sleep(context.Background(), time.Hour) }()
	await.Until(t, "the hour's wait registered", func() bool { return c.Waiting() == 1 })
	go func() { done <- c.Sleep(context.Background(), time.Minute) }()
	await.Until(t, "the minute's wait registered", func() bool { return c.Waiting() == 2 })
	c.Advance(day.Add(2 * time.Minute))
	select {
	case err := <-done:
		t.Fatalf("the wait ended when the clock moved past it: %v", err)
	default:
	}
	if next, ok := c.NextWake(); !ok || !next.Equal(day.Add(time.Minute)) {
		t.Errorf("NextWake = %s, %v; want the minute's", next, ok)
	}
	if !c.WakeNext() {
		t.Fatal("WakeNext found no wait")
	}
	if err := <-done; err != nil {
		t.Errorf("Sleep = %v", err)
	}
	if !c.Now().Equal(day.Add(2 * time.Minute)) {
		t.Errorf("the clock went back to %s", c.Now())
	}
	if !c.WakeNext() || <-later != nil || !c.Now().Equal(day.Add(time.Hour)) {
		t.Errorf("the hour's wait: clock at %s", c.Now())
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- c.Sleep(ctx, time.Hour) }()
	await.Until(t, "the second wait registered", func() bool { return c.Waiting() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || c.Waiting() != 0 {
		t.Errorf("Sleep after cancel = %v, %d waits left", err, c.Waiting())
	}
}

// Waiting is how many waits are under way.
func (c *Clock) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}
