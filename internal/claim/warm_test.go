package claim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// keptHot counts the outcomes of runners kept hot.
func keptHot(outcomes []string) int {
	n := 0
	for _, o := range outcomes {
		if strings.Contains(o, "kept hot until") {
			n++
		}
	}
	return n
}

// A release keeps as many runners hot as the class's target asks for, each
// until its slot ends (here: the target has no schedule, so MaxHotAge);
// the others go idle for the pool's idle timeout.
func TestReleaseKeepsHotUpToTarget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 2}}
	e.writeConfig()
	e.claimed(t, map[string]behavior{"i-1": healthy, "i-2": healthy, "i-3": healthy})
	start := time.Now()
	outcomes, err := e.release()
	if err != nil {
		t.Fatal(err)
	}
	if n := keptHot(outcomes); n != 2 {
		t.Errorf("%d kept hot, want 2: %q", n, outcomes)
	}
	hot, idle := during(start, protocol.MaxHotAge), during(start, idleTime)
	var long int
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		r := e.db.instance(t, id)
		if r.State != protocol.StateIdle {
			t.Fatalf("%s is %s", id, r.State)
		}
		if th, _ := protocol.ParseTime(r.Threshold); th.After(start.Add(idleTime + time.Minute)) {
			long++
			hot.Check(t, id+" hot threshold", r.Threshold)
		} else {
			idle.Check(t, id+" idle threshold", r.Threshold)
		}
	}
	if long != 2 {
		t.Errorf("%d runners have a hot deadline, want 2", long)
	}
	for _, m := range e.sqs.queued(t, largeURL) {
		if r := e.db.instance(t, m.ID); m.Threshold != r.Threshold {
			t.Errorf("%s's message says %s, its record %s", m.ID, m.Threshold, r.Threshold)
		}
	}
}

// Two releases at once never keep more than the target: the slots are one
// item written on condition that it did not change. A slot whose runner
// was claimed since is free for the next release.
func TestReleaseKeepsHotUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 1}}
	e.writeConfig()
	runs := []string{"run-a", "run-b"}
	for i, run := range runs {
		e.seedIdle([]string{"i-1", "i-2"}[i], healthy)
		if _, err := e.create(1, func(r *Request) { r.RunID = run }); err != nil {
			t.Fatal(err)
		}
	}
	// Both read the slots before either writes them.
	both := &slotReadBarrier{fakeTable: e.db, waiting: 2, met: make(chan struct{})}
	e.c.DynamoDB = both
	var wg sync.WaitGroup
	outcomes := make([][]string, len(runs))
	for i, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if outcomes[i], err = e.c.Release(context.Background(), testPool, run); err != nil {
				t.Errorf("release %s: %v", run, err)
			}
		}()
	}
	wg.Wait()
	if !both.metOK {
		t.Fatal("the two releases did not read the slots at the same time: the race was not tested")
	}
	if n := keptHot(outcomes[0]) + keptHot(outcomes[1]); n != 1 {
		t.Errorf("%d kept hot, want 1: %q", n, outcomes)
	}
	// A run takes both, the hot one included: its slot is free again at
	// once, as the runner's record changed after the slot was taken.
	if _, err := e.create(2, func(r *Request) { r.RunID = "run-c" }); err != nil {
		t.Fatal(err)
	}
	again, err := e.c.Release(context.Background(), testPool, "run-c")
	if err != nil {
		t.Fatal(err)
	}
	if n := keptHot(again); n != 1 {
		t.Errorf("%d kept hot after the hot runner was claimed and released, want 1: %q", n, again)
	}
}

// Outside the windows of its schedule a class keeps its base target (here
// none); inside one, a window's runners are kept until it closes.
func TestReleaseKeepsHotForTheWindow(t *testing.T) {
	t.Parallel()
	// In a time zone where it is about noon now, so that the window (an
	// hour ago to two hours ahead) is within one day.
	now := time.Now().UTC()
	offset := 12 - now.Hour() // -11 ... 12
	zone := "UTC"
	switch {
	case offset > 0:
		zone = fmt.Sprintf("Etc/GMT-%d", offset) // POSIX signs: GMT-3 is 3 hours ahead
	case offset < 0:
		zone = fmt.Sprintf("Etc/GMT+%d", -offset)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	local := now.In(loc)
	window := protocol.WarmWindow{Days: protocol.WeekDays, TimeZone: zone, Hot: protocol.Count(1),
		From: local.Add(-time.Hour).Format("15:04"), To: local.Add(2 * time.Hour).Format("15:04")}
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Schedule: []protocol.WarmWindow{window}}}
	e.writeConfig()
	e.claimed(t, map[string]behavior{"i-1": healthy})
	outcomes, err := e.release()
	if err != nil {
		t.Fatal(err)
	}
	closes, _ := time.ParseInLocation("2006-01-02 15:04", local.Format("2006-01-02 ")+window.To, loc)
	if want := "kept hot until " + protocol.FormatTime(closes); len(outcomes) != 1 || !strings.Contains(outcomes[0], want) {
		t.Errorf("outcomes %q, want %q", outcomes, want)
	}
}

// slotReadBarrier holds the first reads of a hot slots item until waiting
// of them have arrived.
type slotReadBarrier struct {
	*fakeTable
	mu      sync.Mutex
	waiting int
	met     chan struct{}
	metOK   bool
}

func (b *slotReadBarrier) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if strings.HasPrefix(s(in.Key[protocol.AttrSK]), "ID#warm-") {
		b.mu.Lock()
		first := b.waiting > 0
		if first {
			b.waiting--
			if b.waiting == 0 {
				b.metOK = true
				close(b.met)
			}
		}
		b.mu.Unlock()
		if first {
			select {
			case <-b.met:
			case <-time.After(await.Patience): // metOK stays false: the test says so
			}
		}
	}
	return b.fakeTable.GetItem(ctx, in, opts...)
}

// A slot just taken by a release that has not yet made its runner idle is
// held (settling): the runner's record still names the releasing run. Once
// the record changed, what it says decides, whatever the second it
// changed in: records and slots are stamped to the second, and a claim can
// take the runner in the second its release made it idle.
func TestSlotSettlesUntilItsRecordIsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	s := e.c.store(testPool)
	until := protocol.FormatTime(now.Add(2 * time.Hour))
	slot := warmSlot{ID: "i-1", Until: until, Taken: protocol.FormatTime(now), Run: "run-a"}
	e.seedRecord(protocol.Instance{ID: "i-1", State: protocol.StateRunning, RunID: "run-a"}, healthy)
	for _, step := range []struct {
		what   string
		record func(*protocol.Instance)
		at     time.Time
		held   bool
	}{
		{"still running for the releasing run", func(*protocol.Instance) {}, now, true},
		{"made idle with the slot's deadline", func(r *protocol.Instance) { r.State, r.RunID, r.Threshold = protocol.StateIdle, "", until }, now, true},
		{"claimed by another run in the same second", func(r *protocol.Instance) { r.State, r.RunID = protocol.StateClaimed, "run-b" }, now, false},
		{"idle again with another deadline", func(r *protocol.Instance) {
			r.State, r.RunID, r.Threshold = protocol.StateIdle, "", protocol.FormatTime(now.Add(time.Hour))
		}, now, false},
		{"running for the releasing run past the settling time", func(r *protocol.Instance) { r.State, r.RunID = protocol.StateRunning, "run-a" }, now.Add(slotSettling + time.Second), false},
	} {
		e.db.setInstance(t, "i-1", step.record)
		held, err := s.heldSlots(context.Background(), protocol.TierHot, map[string]warmSlot{"0": slot}, step.at)
		if err != nil || held["0"] != step.held {
			t.Errorf("%s: held %v (%v), want %v", step.what, held["0"], err, step.held)
		}
	}
}
