package simulate

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// Clock is the virtual clock of a replay. It moves only when the driver
// moves it (World.Run): the claim code reads it (Claimer.Now), and its
// waits (Claimer.Sleep) end when the driver wakes them, one at a time, in
// the order they end; waits that end at the same instant in the order of
// the events that made them (withEventKey), whichever goroutine asked
// first, so that a replay does not depend on how they were scheduled.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	seq     int
	waiters []*waiter // by end, then by arrival
}

// waiter is one Sleep under way.
type waiter struct {
	until time.Time
	key   string // its event's
	seq   int
	wake  chan struct{}
}

// eventKey is the context key of the event a goroutine works for.
type eventKey struct{}

// withEventKey tells the clock which event the waits under ctx are for.
func withEventKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, eventKey{}, key)
}

// NewClock starts a clock at start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now is the virtual time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward to t (never back) without ending any
// wait: the driver wakes them with WakeNext.
func (c *Clock) Advance(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = later(c.now, t)
}

// NextWake is the end of the earliest wait under way.
func (c *Clock) NextWake() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiters) == 0 {
		return time.Time{}, false
	}
	return c.waiters[0].until, true
}

// WakeNext moves the clock to the end of the earliest wait and ends that
// wait alone; it tells whether there was one.
func (c *Clock) WakeNext() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiters) == 0 {
		return false
	}
	w := c.waiters[0]
	c.waiters = c.waiters[1:]
	c.now = later(c.now, w.until)
	close(w.wake)
	return true
}

// Sleep waits until the driver ends the wait, once the clock has moved d
// on, or ctx ends.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	c.mu.Lock()
	c.seq++
	key, _ := ctx.Value(eventKey{}).(string)
	w := &waiter{until: c.now.Add(d), key: key, seq: c.seq, wake: make(chan struct{})}
	i, _ := slices.BinarySearchFunc(c.waiters, w, func(a, b *waiter) int {
		return cmp.Or(a.until.Compare(b.until), strings.Compare(a.key, b.key), a.seq-b.seq)
	})
	c.waiters = slices.Insert(c.waiters, i, w)
	c.mu.Unlock()
	select {
	case <-w.wake:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		c.waiters = slices.DeleteFunc(c.waiters, func(x *waiter) bool { return x == w })
		c.mu.Unlock()
		return ctx.Err()
	}
}
