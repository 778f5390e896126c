package retry

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// waits records what Do asked its Sleep to wait, and waits nothing.
type waits []time.Duration

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	*w = append(*w, d)
	return ctx.Err()
}

// failing is an operation that fails with err on every call, counting them.
func failing(calls *int, err error) func() error {
	return func() error {
		*calls++
		return err
	}
}

var errFlaky = errors.New("flaky")

func TestWaitDoublesUpToTheCap(t *testing.T) {
	b := Backoff{First: time.Second, Max: 5 * time.Second}
	var got []time.Duration
	for n := 1; n <= 5; n++ {
		got = append(got, b.Wait(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if got := (Backoff{First: time.Second}).Wait(4); got != 8*time.Second {
		t.Errorf("uncapped fourth wait %s, want 8s", got)
	}
	if got := Constant(2 * time.Second).Wait(7); got != 2*time.Second {
		t.Errorf("constant seventh wait %s, want 2s", got)
	}
}

func TestWaitDoesNotOverflow(t *testing.T) {
	if got := (Backoff{First: time.Second}).Wait(1000); got < time.Second {
		t.Errorf("uncapped thousandth wait %s, want a long one", got)
	}
	if got := (Backoff{First: time.Second, Max: time.Duration(math.MaxInt64)}).Wait(1000); got < time.Second {
		t.Errorf("thousandth wait under a huge cap %s, want a long one", got)
	}
	if got := (Backoff{}).Wait(1000); got != 0 {
		t.Errorf("no backoff waits %s", got)
	}
}

// Jittered waits fall in the upper half of the wait, cap included, and
// vary.
func TestJitterStaysInTheUpperHalf(t *testing.T) {
	b := Backoff{First: 50 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: true}
	for n := 1; n <= 6; n++ {
		full := Backoff{First: b.First, Max: b.Max}.Wait(n)
		seen := map[time.Duration]bool{}
		for range 200 {
			w := b.Wait(n)
			if w < full/2 || w > full {
				t.Fatalf("retry %d waits %s, want within [%s, %s]", n, w, full/2, full)
			}
			seen[w] = true
		}
		if len(seen) < 2 {
			t.Errorf("retry %d always waits %v: no jitter", n, seen)
		}
	}
}

func TestDoRetriesUntilSuccess(t *testing.T) {
	var slept waits
	calls := 0
	err := Do(context.Background(), Policy{Backoff: Backoff{First: time.Second}, Sleep: slept.sleep}, func() error {
		calls++
		if calls < 4 {
			return errFlaky
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("Do = %v after %d calls, want success on the fourth", err, calls)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !slices.Equal(slept, want) {
		t.Errorf("waited %v, want %v", slept, want)
	}
}

// Attempts bounds the calls: the last one's error is Do's, and Do does not
// wait after it.
func TestDoStopsAfterItsAttempts(t *testing.T) {
	var slept waits
	calls := 0
	err := Do(context.Background(), Policy{Backoff: Constant(time.Second), Attempts: 3, Sleep: slept.sleep}, failing(&calls, errFlaky))
	if err != errFlaky || calls != 3 {
		t.Errorf("Do = %v after %d calls, want the operation's error after 3", err, calls)
	}
	if len(slept) != 2 {
		t.Errorf("waited %v, want only between the calls", slept)
	}
}

func TestPermanentErrorStopsAtOnce(t *testing.T) {
	var slept waits
	calls := 0
	refused := errors.New("refused")
	err := Do(context.Background(), Policy{Backoff: Constant(time.Second), Sleep: slept.sleep}, failing(&calls, Permanent(refused)))
	if err != refused || calls != 1 || len(slept) != 0 {
		t.Errorf("Do = %v after %d calls and waits %v, want the unmarked error at once", err, calls, slept)
	}
	// A mark the operation wrapped still stops Do.
	calls = 0
	wrapped := errors.Join(errors.New("context"), Permanent(refused))
	if err := Do(context.Background(), Policy{Sleep: slept.sleep}, failing(&calls, wrapped)); !errors.Is(err, refused) || calls != 1 {
		t.Errorf("Do = %v after %d calls, want the wrapped permanent error at once", err, calls)
	}
	if Permanent(nil) != nil || After(time.Second, nil) != nil {
		t.Error("a mark on no error is an error")
	}
}

// An error marked After is retried after the wait it names, whatever the
// backoff; the next unmarked one waits the backoff's wait for its retry.
func TestAfterOverridesTheBackoff(t *testing.T) {
	var slept waits
	calls := 0
	err := Do(context.Background(), Policy{Backoff: Backoff{First: time.Second}, Attempts: 4, Sleep: slept.sleep}, func() error {
		calls++
		if calls == 1 || calls == 3 {
			return After(7*time.Second, errFlaky)
		}
		return errFlaky
	})
	if err != errFlaky {
		t.Errorf("Do = %v, want the unmarked error", err)
	}
	if want := []time.Duration{7 * time.Second, 2 * time.Second, 7 * time.Second}; !slices.Equal(slept, want) {
		t.Errorf("waited %v, want %v", slept, want)
	}
}

// A context that ends during a wait ends Do with an *Interrupted that
// unwraps to the context's error and keeps the operation's last.
func TestDoGivesUpWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan error)
	go func() {
		done <- Do(ctx, Policy{Backoff: Constant(time.Hour)}, failing(&calls, errFlaky))
	}()
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Do still waits after its context ended")
	}
	var cut *Interrupted
	if !errors.As(err, &cut) || cut.Last != errFlaky || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %#v, want an *Interrupted of context.Canceled after %v", err, errFlaky)
	}
	if errors.Is(err, errFlaky) {
		t.Error("an interrupted Do unwraps to the operation's error: callers would take it for the operation's failure")
	}
	if msg := err.Error(); msg != "flaky; gave up retrying: context canceled" {
		t.Errorf("message %q", msg)
	}
	if calls != 1 {
		t.Errorf("%d calls, want 1", calls)
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on an ended context = %v", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep 0 on an ended context = %v", err)
	}
}
