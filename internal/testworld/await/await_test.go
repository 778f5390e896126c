package await

import (
	"errors"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := Poll(time.Hour, func() error {
		calls++
		return Bool(calls == 3)
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestPollReportsTheLastStateWhenTimeRunsOut(t *testing.T) {
	calls := 0
	err := Poll(30*time.Millisecond, func() error {
		calls++
		return errors.New("state " + string(rune('0'+calls)))
	})
	if err == nil || err.Error() != "state "+string(rune('0'+calls)) || calls < 2 {
		t.Fatalf("Poll = %v after %d calls, want the last call's error", err, calls)
	}
}
