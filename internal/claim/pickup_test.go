package claim

import (
	"context"
	"errors"
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

func TestPickupHandsOutAndDeletesAtOnce(t *testing.T) {
	s := newFakeSQS(largeURL)
	m := idleMessage("i-1", "c6i.large", future())
	s.add(largeURL, m.Body())
	p := newTestPickup(t, s)

	got, ok, err := p.Next(context.Background())
	if err != nil || !ok || got != m {
		t.Fatalf("Next = %+v, %v, %v; want %+v", got, ok, err, m)
	}
	rec := s.receiveInputs()
	if len(rec) != 1 || rec[0].MaxNumberOfMessages != 1 || rec[0].WaitTimeSeconds != 0 || rec[0].VisibilityTimeout <= 0 {
		t.Errorf("receives %+v, want one short poll of 1 message hiding it for a while", rec)
	}
	if len(s.deletes) != 1 || len(s.deletes[0].Entries) != 1 || !strings.HasPrefix(aws.ToString(s.deletes[0].Entries[0].ReceiptHandle), "rh-") {
		t.Errorf("deletes %+v, want the received message deleted by its receipt handle", s.deletes)
	}
	if ids := s.queuedIDs(t, largeURL); len(ids) != 0 {
		t.Errorf("queue still holds %v", ids)
	}
	if len(s.sent) != 0 {
		t.Errorf("sent %v, want nothing", s.sent)
	}
	if st := p.Stats(); st != (PickupStats{Received: 1, Accepted: 1}) {
		t.Errorf("stats %+v", st)
	}
}

// Each receive asks for as many messages as workers are waiting in Next, so
// concurrent claims do not hoard each other's runners.
func TestPickupReceivesAsManyAsWorkersWaiting(t *testing.T) {
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
		// Hold the first receive until every worker waits in Next.
		deadline := time.Now().Add(5 * time.Second)
		for p.waiting.Load() < workers {
			if time.Now().After(deadline) {
				t.Error("workers never all waited")
				return
			}
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
	var asked []int32
	for _, in := range s.receiveInputs() {
		asked = append(asked, in.MaxNumberOfMessages)
	}
	// The first worker asked alone; the next saw two waiting (itself and the
	// third), whose runner then came from that batch without a receive.
	if !slices.Equal(asked, []int32{1, 2}) {
		t.Errorf("MaxNumberOfMessages per receive = %v, want [1 2]", asked)
	}
	sort.Strings(got)
	if !slices.Equal(got, []string{"i-1", "i-2", "i-3"}) {
		t.Errorf("handed out %v", got)
	}
	if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-4", "i-5"}) {
		t.Errorf("queue holds %v, want the two nobody asked for", ids)
	}
}

// sqsReceiveInput keeps the hook's signature short.
type sqsReceiveInput = sqs.ReceiveMessageInput

func TestPickupAsksForAtMostTen(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
	p := newTestPickup(t, s)
	p.waiting.Store(40) // as if 40 other workers were waiting
	if _, ok, err := p.Next(context.Background()); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if got := s.receiveInputs()[0].MaxNumberOfMessages; got != 10 {
		t.Errorf("MaxNumberOfMessages = %d, want SQS's maximum 10", got)
	}
}

// Mismatches of one batch go back in one SendMessageBatch, each delayed so
// this claim does not see them again at once; invalid messages are dropped.
func TestPickupRequeuesMismatchesAndDiscardsInvalid(t *testing.T) {
	s := newFakeSQS(largeURL)
	r1 := idleMessage("i-r1", "r6i.large", future())
	r2 := idleMessage("i-r2", "m6i.large", future())
	spot := idleMessage("i-spot", "c6i.large", future())
	spot.UsageClass = protocol.UsageSpot
	stale := idleMessage("i-stale", "c6i.large", time.Now().Add(-time.Minute))
	okMsg := idleMessage("i-ok", "c7i.large", future())
	for _, b := range []string{r1.Body(), "garbage", r2.Body(), stale.Body(), spot.Body(), okMsg.Body()} {
		s.add(largeURL, b)
	}
	p := newTestPickup(t, s)
	p.waiting.Store(5) // six workers waiting: one batch of six

	m, ok, err := p.Next(context.Background())
	if err != nil || !ok || m.ID != "i-ok" {
		t.Fatalf("Next = %+v %v %v, want i-ok", m, ok, err)
	}
	if len(s.receives) != 1 || len(s.sends) != 1 {
		t.Fatalf("%d receives, %d sends; want one of each", len(s.receives), len(s.sends))
	}
	var bodies []string
	for _, e := range s.sends[0].Entries {
		if e.DelaySeconds < 1 || e.DelaySeconds > 3 {
			t.Errorf("requeue delay %d s, want 1-3 s", e.DelaySeconds)
		}
		if e.DelaySeconds != requeueDelay {
			t.Errorf("requeue delay %d, want %d", e.DelaySeconds, requeueDelay)
		}
		bodies = append(bodies, aws.ToString(e.MessageBody))
	}
	want := []string{r1.Body(), r2.Body(), spot.Body()} // byte for byte as received
	if !slices.Equal(bodies, want) {
		t.Errorf("requeued %q, want %q", bodies, want)
	}
	if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-r1", "i-r2", "i-spot"}) {
		t.Errorf("queue holds %v, want only the requeued ones (garbage and stale discarded)", ids)
	}
	if st := p.Stats(); st != (PickupStats{Received: 6, Discarded: 2, Requeued: 3, Accepted: 1}) {
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

// Requeued runners come back only after their delay: an empty queue (not a
// hot loop) ends the claim's pickup.
func TestPickupDoesNotRereceiveDelayedMismatch(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.add(largeURL, idleMessage("i-r", "r6i.large", future()).Body())
	p := newTestPickup(t, s)
	if _, ok, err := p.Next(context.Background()); ok || err != nil {
		t.Fatalf("Next = %v %v, want exhausted", ok, err)
	}
	if n := len(s.received); n != 1 {
		t.Errorf("received %d times, want once", n)
	}
	if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-r"}) {
		t.Errorf("queue holds %v", ids)
	}
}

// When requeued runners keep coming back (their delay has passed), the fifth
// sighting of the same id exhausts the pool for this claim only; the runner
// is still sent back.
func TestPickupExhaustedAfterFiveSightings(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.advancePerReceive = 3 * time.Second // every requeued message is visible again
	r := idleMessage("i-r", "r6i.large", future())
	s.add(largeURL, r.Body())
	p := newTestPickup(t, s)
	if _, ok, err := p.Next(context.Background()); ok || err != nil {
		t.Fatalf("Next = %v %v, want exhausted", ok, err)
	}
	if n := len(s.received); n != 5 {
		t.Errorf("received %d times, want 5", n)
	}
	sent := s.sentEntries()
	if len(sent) != 5 {
		t.Errorf("sent back %d times, want 5 (the fifth too)", len(sent))
	}
	if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-r"}) {
		t.Errorf("queue holds %v, want the runner back", ids)
	}
	if _, ok, _ := p.Next(context.Background()); ok {
		t.Error("Next after exhaustion handed something out")
	}
	if n := len(s.received); n != 5 {
		t.Errorf("received %d times after exhaustion, want no more receives", n)
	}

	// Exhaustion is per claim: another claim that allows r* takes it.
	w := largeWants
	w.AllowedTypes = []string{"r*"}
	other := NewPickup(s, largeURL, w, time.Now, func(string, ...any) {})
	if m, ok, err := other.Next(context.Background()); !ok || err != nil || m != r {
		t.Errorf("other claim's Next = %+v %v %v, want %+v", m, ok, err, r)
	}
}

// Sightings are counted per id: a mix of ids is not exhaustion until one id
// has been seen five times.
func TestPickupSightingsPerID(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.advancePerReceive = 3 * time.Second
	s.add(largeURL, idleMessage("i-r1", "r6i.large", future()).Body())
	s.add(largeURL, idleMessage("i-r2", "r6i.large", future()).Body())
	p := newTestPickup(t, s)
	if _, ok, err := p.Next(context.Background()); ok || err != nil {
		t.Fatalf("Next = %v %v, want exhausted", ok, err)
	}
	counts := map[string]int{}
	for _, b := range s.received {
		counts[bodyID(b)]++
	}
	if counts["i-r1"] != 5 || counts["i-r2"] < 4 || counts["i-r2"] > 5 {
		t.Errorf("sightings %v, want i-r1 five times and i-r2 four or five", counts)
	}
}

// Close sends the runners received but not handed out back at once, without
// delay; Return does the same for a runner a worker could not try.
func TestPickupCloseAndReturn(t *testing.T) {
	s := newFakeSQS(largeURL)
	msgs := []protocol.Message{idleMessage("i-1", "c6i.large", future()), idleMessage("i-2", "c6i.large", future()), idleMessage("i-3", "c6i.large", future())}
	for _, m := range msgs {
		s.add(largeURL, m.Body())
	}
	p := newTestPickup(t, s)
	p.waiting.Store(2) // three workers waiting: one batch of three
	m, ok, err := p.Next(context.Background())
	if err != nil || !ok || m != msgs[0] {
		t.Fatalf("Next = %+v %v %v", m, ok, err)
	}
	if err := p.Return(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	sent := s.sentEntries()
	var ids []string
	for _, e := range sent {
		if e.delay != 0 {
			t.Errorf("%s sent back with delay %d, want 0", bodyID(e.body), e.delay)
		}
		ids = append(ids, bodyID(e.body))
	}
	sort.Strings(ids)
	if !slices.Equal(ids, []string{"i-1", "i-2", "i-3"}) {
		t.Errorf("sent back %v, want all three", ids)
	}
	if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-1", "i-2", "i-3"}) {
		t.Errorf("queue holds %v", ids)
	}
	if st := p.Stats(); st.Returned != 3 || st.Accepted != 3 {
		t.Errorf("stats %+v, want 3 accepted, 3 returned", st)
	}
	// Closed: nothing more is handed out, nothing more received.
	before := len(s.receiveInputs())
	if _, ok, _ := p.Next(context.Background()); ok {
		t.Error("Next after Close handed something out")
	}
	if len(s.receiveInputs()) != before {
		t.Error("Next after Close received")
	}
	if err := p.Close(context.Background()); err != nil || len(s.sentEntries()) != 3 {
		t.Errorf("second Close: %v, %d sent; want nothing more", err, len(s.sentEntries()))
	}
}

// Every message received is handed out, sent back or discarded; one whose
// delete failed stays in the queue for others and is not used.
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
	s.failDelete["i-b"] = true // a mismatch whose delete fails
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
			for { // each worker takes runners until the pool is exhausted
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
		if !slices.Contains(valid, id) || id == "i-c" {
			t.Errorf("%s handed out but is not a usable runner", id)
		}
	}
	sentBack := map[string]int{}
	for _, e := range s.sentEntries() {
		sentBack[bodyID(e.body)]++
	}
	for _, b := range s.received {
		id := bodyID(b)
		_, v, _ := Classify(b, largeWants, time.Now())
		switch {
		case id == "i-b" || id == "i-c":
			if handedSet[id] || sentBack[id] > 0 {
				t.Errorf("%s was not deleted but was used", id)
			}
		case v == Discard:
			if sentBack[id] > 0 || handedSet[id] {
				t.Errorf("invalid message %q was used", b)
			}
		default:
			if n := sentBack[id]; (n == 1) == handedSet[id] || n > 1 {
				t.Errorf("%s: handed out %v, sent back %d times; want exactly one of the two", id, handedSet[id], n)
			}
		}
	}
	// Nothing was lost: the queue holds every runner not handed out.
	queued := s.queuedIDs(t, largeURL)
	for _, id := range append(append([]string{}, valid...), mismatch...) {
		if handedSet[id] == slices.Contains(queued, id) {
			t.Errorf("%s: handed out %v, in queue %v; want exactly one", id, handedSet[id], !handedSet[id])
		}
	}
	st := p.Stats()
	if st.Received != st.Discarded+st.Requeued+st.Accepted || st.Accepted != len(handed)+st.Returned {
		t.Errorf("stats %+v do not add up (%d handed out)", st, len(handed))
	}
	if len(handed) != 6 {
		t.Errorf("handed out %d, want 6", len(handed))
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
		// The next call tries again and gets the runner.
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
	t.Run("requeue entry fails once", func(t *testing.T) {
		s := newFakeSQS(largeURL)
		s.add(largeURL, idleMessage("i-r", "r6i.large", future()).Body())
		s.failSendEntries = 1
		p := newTestPickup(t, s)
		if _, ok, err := p.Next(context.Background()); ok || err != nil {
			t.Fatalf("Next = %v %v, want exhausted", ok, err)
		}
		if len(s.sends) != 2 {
			t.Errorf("%d sends, want the failed entry retried once", len(s.sends))
		}
		if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-r"}) {
			t.Errorf("queue holds %v", ids)
		}
	})
	t.Run("requeue keeps failing", func(t *testing.T) {
		t.Parallel() // sendAll backs off for about 2 s
		s := newFakeSQS(largeURL)
		s.add(largeURL, idleMessage("i-r", "r6i.large", future()).Body())
		s.failSendEntries = 100
		p := newTestPickup(t, s)
		_, ok, err := p.Next(context.Background())
		if ok || err == nil || !strings.Contains(err.Error(), "injected entry failure") {
			t.Fatalf("Next = %v %v, want the send failure reported", ok, err)
		}
		if len(s.sends) != sendRetries {
			t.Errorf("%d sends, want %d", len(s.sends), sendRetries)
		}
	})
}
