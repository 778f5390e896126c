// Package await is how tests wait for what another goroutine, a process, the
// emulator or Terraform will make true.
//
// Every wait has one deadline, Patience, long enough for work that crosses a
// process on a machine four times oversubscribed, and returns as soon as its
// condition holds, so a fast machine stays fast. A test asserts that a thing
// happens, never how fast: speed belongs in benchmarks.
package await

import (
	"errors"
	"os"
	"testing"
	"time"
)

// PatienceEnv overrides Patience (a Go duration) for a slower machine.
const PatienceEnv = "EC2RUNNERS_TEST_PATIENCE"

// Patience is the deadline of every wait: 90 s, or PatienceEnv.
var Patience = patience()

func patience() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(PatienceEnv)); err == nil && d > 0 {
		return d
	}
	return 90 * time.Second
}

// Polling starts fast and slows down, so a quick condition is seen at once
// and a slow one does not load the emulator it polls.
const (
	firstPoll = 10 * time.Millisecond
	maxPoll   = 250 * time.Millisecond
)

// Poll calls cond until it returns nil or limit passes, and returns nil or
// cond's last error.
func Poll(limit time.Duration, cond func() error) error {
	deadline := time.Now().Add(limit)
	interval := firstPoll
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
		interval = min(2*interval, maxPoll)
	}
}

// True waits up to Patience for cond to return nil, and otherwise fails the
// test with what it waited for and cond's last error (the state it saw).
func True(t testing.TB, what string, cond func() error) {
	t.Helper()
	if err := Poll(Patience, cond); err != nil {
		t.Fatalf("not within %s: %s: %v", Patience, what, err)
	}
}

// Until is True for a condition with nothing to report.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	True(t, what, func() error { return Bool(cond()) })
}

// Bool is nil for true and an error for false, to write a condition that
// has nothing to report.
func Bool(ok bool) error {
	if ok {
		return nil
	}
	return errNotYet
}

var errNotYet = errors.New("not yet")

// Done waits up to Patience for ch to be closed, and otherwise fails the test.
func Done(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(Patience):
		t.Fatalf("not within %s: %s", Patience, what)
	}
}
