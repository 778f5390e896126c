package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var largeWants = Wants{
	ResourceClass: "large", Class: protocol.ResourceClass{CPU: 2, MemoryMiB: 4096},
	AllowedTypes: []string{"c*"}, UsageClass: protocol.UsageOnDemand,
}

func newTestPickup(t *testing.T, s *fakeSQS) *Pickup {
	return NewPickup(s, largeURL, largeWants, time.Now, func(msg string, kv ...any) { t.Log(append([]any{msg}, kv...)...) })
}

func future() time.Time { return time.Now().Add(time.Hour) }

// visibleIDs are the ids of the messages a receive could return now.
func (s *fakeSQS) visibleIDs(url string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, m := range s.queues[url].messages {
		if !m.visibleAt.After(s.clock) {
			ids = append(ids, bodyID(m.body))
		}
	}
	sort.Strings(ids)
	return ids
}

func (s *fakeSQS) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.counts {
		n += c
	}
	return n
}

func TestPickupHandsOutAndDeletesOnHandout(t *testing.T) {
	s := newFakeSQS(largeURL)
	m := idleMessage("i-1", "c6i.large", future())
	s.add(largeURL, m.Body())
	p := newTestPickup(t, s)

	got, ok, err := p.Next(context.Background())
	if err != nil || !ok || got != m {
		t.Fatalf("Next = %+v, %v, %v; want %+v", got, ok, err, m)
	}
	rec := s.receiveInputs()
	if len(rec) != 1 || rec[0].MaxNumberOfMessages != 1 || rec[0].WaitTimeSeconds != 0 || rec[0].VisibilityTimeout < 60 {
		t.Errorf("receives %+v, want one short poll of 1 (one worker, runners fit so far) hiding it for a while", rec)
	}
	if len(s.deletes) != 1 || len(s.deletes[0].Entries) != 1 || !strings.HasPrefix(aws.ToString(s.deletes[0].Entries[0].ReceiptHandle), "rh-") {
		t.Errorf("deletes %+v, want the handed-out message deleted by its receipt handle", s.deletes)
	}
	if ids := s.queuedIDs(t, largeURL); len(ids) != 0 {
		t.Errorf("queue still holds %v", ids)
	}
	if st := p.Stats(); st != (PickupStats{Received: 1, Accepted: 1}) {
		t.Errorf("stats %+v", st)
	}
}

// Workers waiting together are served from one receive and their runners
// deleted in one call; a receive asks for no more than they need while the
// runners fit, so concurrent claims find the rest.
func TestPickupServesWaitingWorkersTogether(t *testing.T) {
	s := newFakeSQS(largeURL)
	for _, id := range []string{"i-1", "i-2", "i-3", "i-4", "i-5"} {
		s.add(largeURL, idleMessage(id, "c6i.large", future()).Body())
	}
	p := newTestPickup(t, s)
	const workers = 3
	s.receiveHook = func(n int, _ *sqsReceiveInput) {
		if n != 1 {
			return
		}
		deadline := time.Now().Add(5 * time.Second) // hold the first receive until every worker waits
		for p.waiting.Load() < workers && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got []string
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, ok, err := p.Next(context.Background())
			if err != nil || !ok {
				t.Errorf("Next: %v %v", ok, err)
				return
			}
			mu.Lock()
			got = append(got, m.ID)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Strings(got)
	if !slices.Equal(got, []string{"i-1", "i-2", "i-3"}) {
		t.Errorf("handed out %v", got)
	}
	// The first worker asked alone; the next saw two waiting (itself and the
	// third), whose runner then came from that batch without a receive, and
	// both were deleted in one call.
	var asked, deleted []int
	for _, in := range s.receiveInputs() {
		asked = append(asked, int(in.MaxNumberOfMessages))
	}
	for _, d := range s.deletes {
		deleted = append(deleted, len(d.Entries))
	}
	if !slices.Equal(asked, []int{1, 2}) || !slices.Equal(deleted, []int{1, 2}) {
		t.Errorf("receives asked for %v and deletes took %v, want [1 2] and [1 2]", asked, deleted)
	}
	if ids := s.visibleIDs(largeURL); !slices.Equal(ids, []string{"i-4", "i-5"}) {
		t.Errorf("visible %v, want the two nobody asked for", ids)
	}
}

// Mismatches are neither deleted nor sent again: they stay invisible while
// the claim picks, then Close makes them visible; invalid messages are
// deleted.
func TestPickupHoldsMismatchesUntilClose(t *testing.T) {
	s := newFakeSQS(largeURL)
	r1 := idleMessage("i-r1", "r6i.large", future())
	spot := idleMessage("i-spot", "c6i.large", future())
	spot.UsageClass = protocol.UsageSpot
	stale := idleMessage("i-stale", "c6i.large", time.Now().Add(-time.Minute))
	okMsg := idleMessage("i-ok", "c7i.large", future())
	for _, b := range []string{r1.Body(), "garbage", stale.Body(), spot.Body(), okMsg.Body()} {
		s.add(largeURL, b)
	}
	p := newTestPickup(t, s)
	m, ok, err := p.Next(context.Background())
	if err != nil || !ok || m.ID != "i-ok" {
		t.Fatalf("Next = %+v %v %v, want i-ok", m, ok, err)
	}
	if len(s.sends) != 0 {
		t.Errorf("%d sends, want none: mismatches are not sent again", len(s.sends))
	}
	if ids := s.visibleIDs(largeURL); len(ids) != 0 {
		t.Errorf("visible while picking: %v, want the mismatches hidden", ids)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ids := s.visibleIDs(largeURL); !slices.Equal(ids, []string{"i-r1", "i-spot"}) {
		t.Errorf("visible after Close: %v, want the mismatches (garbage and stale deleted)", ids)
	}
	if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-r1", "i-spot"}) {
		t.Errorf("queue holds %v", ids)
	}
	if st := p.Stats(); st != (PickupStats{Received: 5, Discarded: 2, Requeued: 2, Accepted: 1}) {
		t.Errorf("stats %+v", st)
	}
}

func TestPickupExhaustedWhenQueueEmpty(t *testing.T) {
	s := newFakeSQS(largeURL)
	p := newTestPickup(t, s)
	for i := range 2 {
		m, ok, err := p.Next(context.Background())
		if err != nil || ok {
			t.Fatalf("Next #%d = %+v %v %v, want exhausted", i, m, ok, err)
		}
	}
	rec := s.receiveInputs()
	// A short poll, then a long poll to confirm; then nothing more.
	if len(rec) != 2 || rec[0].WaitTimeSeconds != 0 || rec[1].WaitTimeSeconds < 1 {
		t.Errorf("receives %+v, want a short then a long poll, once", rec)
	}
}

// A short poll may miss a message; the confirming long poll finds it.
func TestPickupLongPollFindsMessageShortPollMissed(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
	s.queues[largeURL].messages[0].visibleAt = s.clock.Add(500 * time.Millisecond) // not yet visible
	p := newTestPickup(t, s)
	m, ok, err := p.Next(context.Background())
	if err != nil || !ok || m.ID != "i-1" {
		t.Fatalf("Next = %+v %v %v, want i-1", m, ok, err)
	}
}

// Running a queue of mismatches to exhaustion looks at each message once,
// however slow the receives, in about 0.2 SQS calls per message.
func TestPickupExaminesEachMessageOnceCheaply(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.advancePerReceive = 3 * time.Second // what once made requeued messages come back
	const n = 60
	for i := range n {
		s.add(largeURL, idleMessage(fmt.Sprintf("i-r%02d", i), "r6i.large", future()).Body())
	}
	p := newTestPickup(t, s)
	if _, ok, err := p.Next(context.Background()); ok || err != nil {
		t.Fatalf("Next = %v %v, want exhausted", ok, err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(s.received); got != n {
		t.Errorf("received %d messages, want each of the %d once", got, n)
	}
	if perMsg := float64(s.calls()) / n; perMsg > 0.35 {
		t.Errorf("%d SQS calls for %d messages (%.2f per message), want at most 0.35", s.calls(), n, perMsg)
	}
	if ids := s.visibleIDs(largeURL); len(ids) != n {
		t.Errorf("%d visible after Close, want all %d", len(ids), n)
	}
}

// Duplicate messages of one runner: the fifth sighting ends the pickup.
func TestPickupExhaustedAfterFiveSightings(t *testing.T) {
	s := newFakeSQS(largeURL)
	r := idleMessage("i-r", "r6i.large", future())
	for range 7 {
		s.add(largeURL, r.Body())
	}
	p := newTestPickup(t, s)
	if _, ok, err := p.Next(context.Background()); ok || err != nil {
		t.Fatalf("Next = %v %v, want exhausted", ok, err)
	}
	before := len(s.receiveInputs())
	if n := len(s.received); n < 5 || n > 7 {
		t.Errorf("received %d, want the pickup to stop at the batch with the fifth sighting", n)
	}
	if _, ok, _ := p.Next(context.Background()); ok || len(s.receiveInputs()) != before {
		t.Error("the pickup went on after exhaustion")
	}
}

// Return sends a runner a worker could not try back at once; Close makes
// the candidates not handed out visible again.
func TestPickupCloseAndReturn(t *testing.T) {
	s := newFakeSQS(largeURL)
	msgs := []protocol.Message{idleMessage("i-1", "c6i.large", future()), idleMessage("i-2", "c6i.large", future()), idleMessage("i-3", "c6i.large", future())}
	for _, m := range msgs {
		s.add(largeURL, m.Body())
	}
	p := newTestPickup(t, s)
	p.waiting.Store(2) // three workers waiting: all three kept
	m, ok, err := p.Next(context.Background())
	if err != nil || !ok || m != msgs[0] {
		t.Fatalf("Next = %+v %v %v", m, ok, err)
	}
	p.waiting.Store(0)
	if err := p.Return(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// i-1 was returned; i-2 and i-3, deleted for the other waiting workers
	// but never taken, are sent again by Close.
	var sentIDs []string
	for _, e := range s.sentEntries() {
		if e.delay != 0 {
			t.Errorf("%s sent back with delay %d", bodyID(e.body), e.delay)
		}
		sentIDs = append(sentIDs, bodyID(e.body))
	}
	sort.Strings(sentIDs)
	if !slices.Equal(sentIDs, []string{"i-1", "i-2", "i-3"}) {
		t.Errorf("sent %v, want all three back", sentIDs)
	}
	if ids := s.visibleIDs(largeURL); !slices.Equal(ids, []string{"i-1", "i-2", "i-3"}) {
		t.Errorf("visible %v, want all three", ids)
	}
	if st := p.Stats(); st.Returned != 3 || st.Accepted != 3 {
		t.Errorf("stats %+v, want 3 accepted, 3 returned", st)
	}
	before := len(s.receiveInputs())
	if _, ok, _ := p.Next(context.Background()); ok || len(s.receiveInputs()) != before {
		t.Error("Next after Close handed something out or received")
	}
}

// Every message received is handed out, made visible again or deleted as
// invalid; one whose delete SQS did not confirm is handed out all the same
// (its message, if left, is stale: the claim decides who owns the runner).
func TestPickupAccountsForEveryMessage(t *testing.T) {
	s := newFakeSQS(largeURL)
	var valid, mismatch []string
	for i, typ := range []string{"c6i.large", "r6i.large", "c7g.large", "m6i.large", "c6a.large", "x2.large", "c5.large", "c6i.large", "r7i.large", "c6in.large", "c6i.large", "z1d.large"} {
		m := idleMessage("i-"+string(rune('a'+i)), typ, future())
		s.add(largeURL, m.Body())
		if MatchInstanceType(largeWants.AllowedTypes, typ) {
			valid = append(valid, m.ID)
		} else {
			mismatch = append(mismatch, m.ID)
		}
	}
	for _, b := range []string{"{}", `{"id":"i-bad"}`, "not json"} {
		s.add(largeURL, b)
	}
	s.failDelete["i-c"] = true // a valid one whose delete fails
	p := newTestPickup(t, s)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		handed []string
	)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, ok, err := p.Next(context.Background())
				if err != nil {
					t.Error(err)
				}
				if !ok {
					return
				}
				mu.Lock()
				handed = append(handed, m.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	handedSet := map[string]bool{}
	for _, id := range handed {
		if handedSet[id] {
			t.Errorf("%s handed out twice", id)
		}
		handedSet[id] = true
		if !slices.Contains(valid, id) {
			t.Errorf("%s handed out but is not a usable runner", id)
		}
	}
	queued := slices.DeleteFunc(s.queuedIDs(t, largeURL), func(id string) bool { return id == "i-c" }) // its undeleted message
	for _, id := range append(append([]string{}, valid...), mismatch...) {
		if id != "i-c" && handedSet[id] == slices.Contains(queued, id) {
			t.Errorf("%s: handed out %v, in queue %v; want exactly one", id, handedSet[id], !handedSet[id])
		}
	}
	if len(queued) != len(valid)+len(mismatch)-len(handed) {
		t.Errorf("queue holds %v: invalid messages were not deleted", queued)
	}
	st := p.Stats()
	if st.Received != st.Discarded+st.Requeued+st.Accepted {
		t.Errorf("stats %+v do not add up", st)
	}
	if len(handed) != 7 || !handedSet["i-c"] {
		t.Errorf("handed out %d (%v), want all 7 usable runners", len(handed), handed)
	}
}

func TestPickupErrors(t *testing.T) {
	t.Run("receive fails", func(t *testing.T) {
		s := newFakeSQS(largeURL)
		s.add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
		s.fail("ReceiveMessage", 1, errTransient)
		p := newTestPickup(t, s)
		if _, ok, err := p.Next(context.Background()); ok || !errors.Is(err, errTransient) {
			t.Fatalf("Next = %v %v, want the receive error", ok, err)
		}
		if m, ok, err := p.Next(context.Background()); !ok || err != nil || m.ID != "i-1" {
			t.Errorf("retry = %+v %v %v", m, ok, err)
		}
	})
	t.Run("delete fails", func(t *testing.T) {
		s := newFakeSQS(largeURL)
		s.add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
		s.fail("DeleteMessageBatch", 1, errTransient)
		p := newTestPickup(t, s)
		if _, ok, err := p.Next(context.Background()); ok || !errors.Is(err, errTransient) {
			t.Fatalf("Next = %v %v, want the delete error", ok, err)
		}
		if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-1"}) {
			t.Errorf("queue holds %v, want the undeleted runner", ids)
		}
	})
	t.Run("making visible fails", func(t *testing.T) {
		s := newFakeSQS(largeURL)
		s.add(largeURL, idleMessage("i-r", "r6i.large", future()).Body())
		s.fail("ChangeMessageVisibilityBatch", 1, errTransient)
		p := newTestPickup(t, s)
		if _, ok, err := p.Next(context.Background()); ok || err != nil {
			t.Fatalf("Next = %v %v, want exhausted", ok, err)
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatalf("Close = %v: a runner hidden a little longer is no failure", err)
		}
		if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-r"}) {
			t.Errorf("queue holds %v, want the runner (visible again after its timeout)", ids)
		}
	})
}

// sqsReceiveInput keeps the hook's signature short.
type sqsReceiveInput = sqs.ReceiveMessageInput
