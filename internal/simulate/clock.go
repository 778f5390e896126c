package simulate

import (
	"context"
	"sync"
	"time"
)

// Clock is the virtual clock of a replay. It moves only when the driver
// sets it, between events: the claim code reads it (Claimer.Now), and its
// waits (Claimer.Sleep) end when the clock reaches their end. The agents
// here answer within the call that asks them, so a claim or release never
// waits; one that does is reported as stuck (World.run).
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters map[chan struct{}]time.Time
}

// NewClock starts a clock at start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, waiters: map[chan struct{}]time.Time{}}
}

// Now is the virtual time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock forward to t (never back), waking the waits it ends.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.After(c.now) {
		return
	}
	c.now = t
	for ch, until := range c.waiters {
		if !until.After(t) {
			close(ch)
			delete(c.waiters, ch)
		}
	}
}

// Sleep waits until the clock has moved d on, or ctx ends.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	if d <= 0 {
		c.mu.Unlock()
		return ctx.Err()
	}
	ch := make(chan struct{})
	c.waiters[ch] = c.now.Add(d)
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.waiters, ch)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Waiting is how many waits are under way.
func (c *Clock) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}
