// Package retry is the one way the product calls something again after a
// failure the AWS SDK's own retryer does not cover: a queue name SQS still
// holds, an instance EC2 does not know yet, items a batch left unprocessed,
// a download, GitHub's server errors and rate limits. Do calls an
// operation until it succeeds, fails for good (Permanent), runs out of
// attempts or its context ends, waiting a growing Backoff in between, or as
// long as the operation asks (After): GitHub says how long to wait.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Backoff is how long to wait before each retry: First before the first,
// twice the last wait before each next one, never more than Max.
type Backoff struct {
	First time.Duration
	// Max caps the wait; 0 leaves it uncapped (for a bounded number of
	// attempts).
	Max time.Duration
	// Jitter draws each wait at random from its upper half, [w/2, w], so
	// that callers throttled together do not all retry together.
	Jitter bool
}

// Constant waits d before every retry.
func Constant(d time.Duration) Backoff { return Backoff{First: d, Max: d} }

// Wait is the wait before retry n (1: the first retry).
func (b Backoff) Wait(n int) time.Duration {
	w := b.First
	// Doubling stops at the cap, and before it would overflow.
	for ; n > 1 && w > 0 && (b.Max == 0 || w < b.Max) && w < math.MaxInt64/2; n-- {
		w *= 2
	}
	if b.Max > 0 {
		w = min(w, b.Max)
	}
	if b.Jitter && w > 0 {
		w -= rand.N(w/2 + 1)
	}
	return w
}

// Policy is how Do retries.
type Policy struct {
	Backoff
	// Attempts bounds the calls of the operation; 0 leaves them unbounded:
	// Do then ends only on success, a permanent error or the end of its
	// context.
	Attempts int
	// Sleep waits between attempts, or until ctx ends (its error then); nil
	// is the package's Sleep. Callers on a virtual clock pass their clock's.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Do calls op until it returns nil or an error marked Permanent, or has
// been called Attempts times: it returns nil or op's last error, unmarked.
// Before each next call it waits Backoff.Wait, or what op's error asked
// with After. When ctx ends during a wait, Do returns an *Interrupted.
func Do(ctx context.Context, p Policy, op func() error) error {
	sleep := p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	for n := 1; ; n++ {
		err := op()
		if err == nil {
			return nil
		}
		var stop *permanent
		if errors.As(err, &stop) || n == p.Attempts {
			return unmarked(err)
		}
		wait := p.Wait(n)
		var asked *after
		if errors.As(err, &asked) {
			wait = asked.wait
		}
		if serr := sleep(ctx, wait); serr != nil {
			return &Interrupted{Err: serr, Last: unmarked(err)}
		}
	}
}

// Interrupted is Do's error when its context ended (or its Sleep failed)
// while it waited to call the operation again. It unwraps to the wait's
// error, not the operation's: Do stopped because the caller gave up.
type Interrupted struct {
	Err  error // the wait's error: ctx's
	Last error // the operation's error that the wait was to retry
}

func (e *Interrupted) Error() string { return fmt.Sprintf("%v; gave up retrying: %v", e.Last, e.Err) }

func (e *Interrupted) Unwrap() error { return e.Err }

// Permanent marks err as one no retry can mend: Do returns it at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// After marks err as one to retry after d rather than after the backoff's
// wait: the server said how long.
func After(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &after{d, err}
}

// The marks read and unwrap as the error they mark, so that one wrapped by
// the operation still works; Do takes an outermost mark off.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

type after struct {
	wait time.Duration
	err  error
}

func (a *after) Error() string { return a.err.Error() }
func (a *after) Unwrap() error { return a.err }

func unmarked(err error) error {
	switch m := err.(type) {
	case *permanent:
		return m.err
	case *after:
		return m.err
	}
	return err
}

// Sleep waits d, or until ctx ends (its error then).
func Sleep(ctx context.Context, d time.Duration) error {
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
