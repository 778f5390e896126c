package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var largeWants = Wants{
	ResourceClass: "large", Class: protocol.ResourceClass{CPU: 2, MemoryMiB: 4096},
	AllowedTypes: []string{"c*"}, UsageClass: protocol.UsageOnDemand,
}

// newTestPickup is a pickup of large c* runners whose pauses move the
// queue's clock on.
func newTestPickup(t *testing.T, s *fakeSQS) *Pickup {
	p := NewPickup(s, largeURL, largeWants, time.Now, func(msg string, kv ...any) { t.Log(append([]any{msg}, kv...)...) })
	p.Sleep = func(_ context.Context, d time.Duration) error {
		s.Mu.Lock()
		defer s.Mu.Unlock()
		s.Clock = s.Clock.Add(d)
		return nil
	}
	return p
}

func future() time.Time { return time.Now().Add(time.Hour) }

// take calls Take and fails the test on an error.
func take(t *testing.T, p *Pickup, n int) []string {
	t.Helper()
	msgs, err := p.Take(context.Background(), n)
	if err != nil {
		t.Fatalf("Take(%d): %v", n, err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// A runner taken keeps its message in flight until the claim consumes it:
// nothing is deleted before the runner is claimed.
func TestPickupDeletesOnlyWhatIsConsumed(t *testing.T) {
	s := newFakeSQS(largeURL)
	m := idleMessage("i-1", "c6i.large", future())
	s.Add(largeURL, m.Body())
	p := newTestPickup(t, s)

	got, err := p.Take(context.Background(), 1)
	if err != nil || len(got) != 1 || got[0] != m {
		t.Fatalf("Take = %+v, %v; want %+v", got, err, m)
	}
	rec := s.ReceiveInputs()
	if len(rec) != 1 || rec[0].MaxNumberOfMessages != 1 || rec[0].WaitTimeSeconds != 0 || rec[0].VisibilityTimeout < 60 {
		t.Errorf("receives %+v, want one short poll of 1 (one runner needed, runners fit so far) hiding it for a while", rec)
	}
	if len(s.Deletes) != 0 || len(s.VisibleIDs(largeURL)) != 0 {
		t.Errorf("deletes %+v, visible %v: want the message in flight, not deleted", s.Deletes, s.VisibleIDs(largeURL))
	}
	p.Consume(context.Background(), []string{"i-1"})
	p.consuming.Wait()
	if len(s.Deletes) != 1 || len(s.Deletes[0].Entries) != 1 || !strings.HasPrefix(aws.ToString(s.Deletes[0].Entries[0].ReceiptHandle), "rh-") {
		t.Errorf("deletes %+v, want the consumed message deleted by its receipt handle", s.Deletes)
	}
	if ids := s.queuedIDs(t, largeURL); len(ids) != 0 {
		t.Errorf("queue still holds %v", ids)
	}
	if st := p.Stats(); st != (PickupStats{Received: 1, Accepted: 1}) {
		t.Errorf("stats %+v", st)
	}
}

// Take asks for no more than it needs while the runners fit, so concurrent
// claims find the rest; the runners of one batch are consumed in one call;
// Close makes the ones taken but not consumed visible again, without
// sending anything.
func TestPickupTakesWhatIsNeededAndClosesTheRest(t *testing.T) {
	s := newFakeSQS(largeURL)
	for _, id := range []string{"i-1", "i-2", "i-3", "i-4", "i-5"} {
		s.Add(largeURL, idleMessage(id, "c6i.large", future()).Body())
	}
	p := newTestPickup(t, s)
	if got := take(t, p, 3); !slices.Equal(got, []string{"i-1", "i-2", "i-3"}) {
		t.Fatalf("Take(3) = %v", got)
	}
	p.Consume(context.Background(), []string{"i-1", "i-3"})
	p.consuming.Wait()
	var asked, deleted []int
	for _, in := range s.ReceiveInputs() {
		asked = append(asked, int(in.MaxNumberOfMessages))
	}
	for _, d := range s.Deletes {
		deleted = append(deleted, len(d.Entries))
	}
	if !slices.Equal(asked, []int{3}) || !slices.Equal(deleted, []int{2}) {
		t.Errorf("receives asked for %v and deletes took %v, want [3] and [2]", asked, deleted)
	}
	if ids := s.VisibleIDs(largeURL); !slices.Equal(ids, []string{"i-4", "i-5"}) {
		t.Errorf("visible %v, want the two nobody asked for", ids)
	}
	p.Close(context.Background())
	if ids := s.VisibleIDs(largeURL); !slices.Equal(ids, []string{"i-2", "i-4", "i-5"}) {
		t.Errorf("visible after Close %v, want the one taken but not consumed back", ids)
	}
	if len(s.Sends) != 0 {
		t.Errorf("%d sends, want none", len(s.Sends))
	}
	if st := p.Stats(); st.Returned != 1 || st.Accepted != 3 {
		t.Errorf("stats %+v, want 3 accepted, 1 returned", st)
	}
	before := len(s.ReceiveInputs())
	if got := take(t, p, 1); len(got) != 0 || len(s.ReceiveInputs()) != before {
		t.Errorf("Take after Close = %v, with %d receives; want nothing", got, len(s.ReceiveInputs())-before)
	}
}

// The messages of runners claimed are deleted even when the claim is
// cancelled meanwhile: a runner it gives back gets a new message.
func TestPickupConsumesDespiteCancellation(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.Add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
	p := newTestPickup(t, s)
	take(t, p, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Consume(ctx, []string{"i-1"})
	p.Close(context.Background())
	if ids := s.queuedIDs(t, largeURL); len(ids) != 0 {
		t.Errorf("queue holds %v, want i-1's message deleted", ids)
	}
}

// A second message for a runner this claim holds and has not claimed yet
// is not handed out twice, nor deleted: whether the runner is claimed or
// given back, the claim cannot tell yet which message is stale, so it
// gives the second one back, for the pool to judge.
func TestPickupHoldsASecondMessageOfARunnerItHolds(t *testing.T) {
	s := newFakeSQS(largeURL)
	m := idleMessage("i-1", "c6i.large", future())
	s.Add(largeURL, m.Body())
	s.Add(largeURL, m.Body())
	s.Add(largeURL, idleMessage("i-2", "c6i.large", future()).Body())
	p := newTestPickup(t, s)
	if got := take(t, p, 3); !slices.Equal(got, []string{"i-1", "i-2"}) {
		t.Fatalf("Take(3) = %v, want each runner once", got)
	}
	// Held, handed back when the queue looked empty, and held again when
	// the claim looked once more.
	if st := p.Stats(); st.Discarded != 0 || st.Requeued != 2 || st.Accepted != 2 || len(s.Deletes) != 0 {
		t.Errorf("stats %+v, deletes %+v: want the second message held (twice), nothing deleted", st, s.Deletes)
	}
	p.Close(context.Background())
	if ids := s.VisibleIDs(largeURL); !slices.Equal(ids, []string{"i-1", "i-1", "i-2"}) {
		t.Errorf("visible after Close %v, want every message back", ids)
	}
}

// A runner whose message the claim consumed without claiming it (someone
// else owned it then) is judged afresh by a later message: it may have
// been given back to the pool meanwhile.
func TestPickupJudgesALaterMessageAfresh(t *testing.T) {
	s := newFakeSQS(largeURL)
	m := idleMessage("i-1", "c6i.large", future())
	s.Add(largeURL, m.Body())
	p := newTestPickup(t, s)
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-1"}) {
		t.Fatalf("Take(1) = %v", got)
	}
	p.Consume(context.Background(), []string{"i-1"}) // owned by another claim: stale
	p.consuming.Wait()
	s.Add(largeURL, m.Body()) // that claim gave it back
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-1"}) {
		t.Errorf("Take(1) = %v, want i-1 again", got)
	}
	if st := p.Stats(); st.Discarded != 0 {
		t.Errorf("stats %+v: the runner given back was discarded", st)
	}
}

// Mismatches are neither deleted nor sent again: they stay invisible while
// Take picks, and are visible again when it returns; invalid messages are
// deleted.
func TestPickupHoldsMismatchesWhileItPicks(t *testing.T) {
	s := newFakeSQS(largeURL)
	r1 := idleMessage("i-r1", "r6i.large", future())
	spot := idleMessage("i-spot", "c6i.large", future())
	spot.UsageClass = protocol.UsageSpot
	stale := idleMessage("i-stale", "c6i.large", time.Now().Add(-time.Minute))
	okMsg := idleMessage("i-ok", "c7i.large", future())
	for _, b := range []string{r1.Body(), "garbage", stale.Body(), spot.Body(), okMsg.Body()} {
		s.Add(largeURL, b)
	}
	p := newTestPickup(t, s)
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-ok"}) {
		t.Fatalf("Take = %v, want i-ok", got)
	}
	if n := len(s.Received); n != 5 {
		t.Errorf("received %d messages, want all 5 before i-ok: the mismatches stayed hidden while Take picked", n)
	}
	if len(s.Sends) != 0 {
		t.Errorf("%d sends, want none: mismatches are not sent again", len(s.Sends))
	}
	if ids := s.VisibleIDs(largeURL); len(ids) != 0 {
		t.Errorf("visible after Take: %v, want none: the mismatches stay hidden until the claim stops taking", ids)
	}
	p.HandBack(context.Background())
	if ids := s.VisibleIDs(largeURL); !slices.Equal(ids, []string{"i-r1", "i-spot"}) {
		t.Errorf("visible after HandBack: %v, want the mismatches (garbage and stale deleted)", ids)
	}
	p.Consume(context.Background(), []string{"i-ok"})
	p.consuming.Wait()
	p.Close(context.Background())
	if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-r1", "i-spot"}) {
		t.Errorf("queue holds %v", ids)
	}
	if st := p.Stats(); st != (PickupStats{Received: 5, Discarded: 2, Requeued: 2, Accepted: 1}) {
		t.Errorf("stats %+v", st)
	}
}

// Claims started together share a queue: a mismatch one of them received
// is visible to the others as soon as it stops taking runners (HandBack,
// before it waits for its agents), not when it closes (after its runners
// registered), so a claim the runner fits finds it instead of launching.
func TestPickupHandsBackMismatchesToConcurrentClaims(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.Add(largeURL, idleMessage("i-r", "r6i.large", future()).Body())
	s.Add(largeURL, idleMessage("i-c", "c6i.large", future()).Body())
	wantsR := largeWants
	wantsR.AllowedTypes = []string{"r*"}
	first := newTestPickup(t, s) // allows c*
	second := NewPickup(s, largeURL, wantsR, time.Now, nil)
	if got := take(t, first, 1); !slices.Equal(got, []string{"i-c"}) {
		t.Fatalf("first claim took %v, want i-c (after i-r, a mismatch for it)", got)
	}
	first.HandBack(context.Background())
	if got := take(t, second, 1); !slices.Equal(got, []string{"i-r"}) {
		t.Errorf("second claim took %v while the first still holds its runner, want i-r", got)
	}
}

// A long poll asks for no more runners than the claim needs: one of a
// burst that found nothing on its short poll does not hide a batch of
// runners from the others.
func TestPickupLongPollTakesOnlyWhatItNeeds(t *testing.T) {
	s := newFakeSQS(largeURL)
	later := s.Clock.Add(500 * time.Millisecond) // missed by the short polls
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		s.AddAt(largeURL, idleMessage(id, "c6i.large", future()).Body(), later)
	}
	first, second := newTestPickup(t, s), newTestPickup(t, s)
	if got := take(t, first, 1); len(got) != 1 {
		t.Fatalf("first claim took %v, want one runner", got)
	}
	if got := take(t, second, 1); len(got) != 1 {
		t.Errorf("second claim took %v while the first still holds its runner, want one of the others", got)
	}
	for _, in := range s.ReceiveInputs() {
		if in.WaitTimeSeconds > 0 && in.MaxNumberOfMessages != 1 {
			t.Errorf("a long poll asked for %d messages, want 1 (one runner needed, runners fit so far)", in.MaxNumberOfMessages)
		}
	}
}

func TestPickupExhaustedWhenQueueEmpty(t *testing.T) {
	s := newFakeSQS(largeURL)
	p := newTestPickup(t, s)
	for i := range 2 {
		if got := take(t, p, 1); len(got) != 0 {
			t.Fatalf("Take #%d = %v, want exhausted", i, got)
		}
	}
	rec := s.ReceiveInputs()
	// A short poll, then a long poll to confirm, and one more (SQS's
	// in-flight count may lag); then nothing more.
	if len(rec) != 3 || rec[0].WaitTimeSeconds != 0 || rec[1].WaitTimeSeconds < 1 || rec[2].WaitTimeSeconds < 1 {
		t.Errorf("receives %+v, want a short then two long polls, once", rec)
	}
}

// A claim that has seen runners in the queue looks once more before it
// gives up, even when nobody else holds a message: one may become visible
// just after its confirming poll (handed back, or its visibility run out).
// Here the first runner failed its checks, and i-2 shows up 1.5 s later.
func TestPickupLooksOnceMoreAfterSeeingRunners(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.Add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
	p := newTestPickup(t, s)
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-1"}) {
		t.Fatalf("first Take = %v, want i-1", got)
	}
	s.AddAt(largeURL, idleMessage("i-2", "c6i.large", future()).Body(), s.Clock.Add(1500*time.Millisecond))
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-2"}) {
		t.Fatalf("second Take = %v, want i-2, visible after the confirming poll", got)
	}
}

// A claim that finds the queue empty while another claim holds messages
// (sorting them, in a burst) waits for them rather than launch: here the
// other claim hands its runner back during the wait.
func TestPickupWaitsForMessagesOtherClaimsHold(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.Add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
	other := newElsewhere(t, s)
	other.receive()
	s.ReceiveHook = func(n int, _ *sqs.ReceiveMessageInput) {
		if n == 4 { // the other claim's receive, the pickup's short poll and confirming long poll, then one more
			other.handBack("i-1")
		}
	}
	p := newTestPickup(t, s)
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-1"}) {
		t.Fatalf("Take = %v, want i-1, given back while the claim waited", got)
	}
	if n := s.Count("GetQueueAttributes"); n != 1 {
		t.Errorf("%d in-flight counts read, want 1 (after the one empty long poll)", n)
	}
	if st := p.Stats(); st.InFlightWaits != 1 {
		t.Errorf("stats %+v, want one long poll waited for the message held elsewhere", st)
	}
}

// The wait is bounded: a message held elsewhere for good (a claim that
// crashed holding it) leaves the pickup exhausted after inFlightPolls long
// polls past the confirming one. The claim's own mismatches are not waited
// for.
func TestPickupWaitForHeldMessagesIsBounded(t *testing.T) {
	t.Run("held elsewhere", func(t *testing.T) {
		s := newFakeSQS(largeURL)
		s.Add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
		newElsewhere(t, s).receive()
		p := newTestPickup(t, s)
		if got := take(t, p, 1); len(got) != 0 {
			t.Fatalf("Take = %v, want none", got)
		}
		if got := len(s.ReceiveInputs()) - 1; got != 2+inFlightPolls {
			t.Errorf("%d receives, want a short poll, a confirming long poll and %d more", got, inFlightPolls)
		}
	})
	t.Run("held by another claim after the visibility ran out", func(t *testing.T) {
		// The claim's mismatch became visible again while it held it, and
		// another claim received it: it is that claim's message in flight
		// now, and worth waiting for.
		s := newFakeSQS(largeURL)
		s.Add(largeURL, idleMessage("i-r", "r6i.large", future()).Body()) // a mismatch for c*
		p := newTestPickup(t, s)
		ranOut := false
		s.ReceiveHook = func(n int, _ *sqs.ReceiveMessageInput) {
			if n == 2 && !ranOut { // after the pickup's first receive: its visibility runs out, another claim receives it
				ranOut = true
				s.Mu.Lock()
				s.Clock = s.Clock.Add((receiveVisibility + 1) * time.Second)
				s.Mu.Unlock()
				newElsewhere(t, s).receive()
			}
		}
		if got := take(t, p, 1); len(got) != 0 {
			t.Fatalf("Take = %v, want none", got)
		}
		if st := p.Stats(); st.InFlightWaits != inFlightPolls {
			t.Errorf("stats %+v, want %d in-flight waits for the message the other claim holds", st, inFlightPolls)
		}
		if len(p.held) != 0 {
			t.Errorf("the pickup still holds %d messages, want none: the one it held is the other claim's", len(p.held))
		}
	})
	t.Run("held by the claim itself", func(t *testing.T) {
		s := newFakeSQS(largeURL)
		s.Add(largeURL, idleMessage("i-r", "r6i.large", future()).Body()) // a mismatch for c*
		p := newTestPickup(t, s)
		if got := take(t, p, 1); len(got) != 0 {
			t.Fatalf("Take = %v, want none", got)
		}
		if got := len(s.ReceiveInputs()); got != 4 {
			t.Errorf("%d receives, want 4: the mismatch, a short and a long poll, then one more long poll after handing the mismatch back, which finds nothing new", got)
		}
	})
}

// elsewhere is another claim on the same queue, played by a test: it
// receives what is visible and hands back what it chooses.
type elsewhere struct {
	t       *testing.T
	s       *fakeSQS
	handles map[string]*string // by runner
}

func newElsewhere(t *testing.T, s *fakeSQS) *elsewhere {
	return &elsewhere{t: t, s: s, handles: map[string]*string{}}
}

// receive receives every visible message, hiding each for two minutes, and
// returns their runners; it finds at least one.
func (e *elsewhere) receive() []string {
	e.t.Helper()
	out, err := e.s.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(largeURL), MaxNumberOfMessages: 10, VisibilityTimeout: 120})
	if err != nil || len(out.Messages) == 0 {
		e.t.Fatalf("the other claim's receive: %v, %d messages", err, len(out.Messages))
	}
	var ids []string
	for _, msg := range out.Messages {
		m, err := protocol.ParseMessage(aws.ToString(msg.Body))
		if err != nil {
			e.t.Fatalf("the other claim received %q: %v", aws.ToString(msg.Body), err)
		}
		e.handles[m.ID] = msg.ReceiptHandle
		ids = append(ids, m.ID)
	}
	return ids
}

// handBack makes a runner's message it holds visible again.
func (e *elsewhere) handBack(id string) {
	e.t.Helper()
	out, err := e.s.ChangeMessageVisibilityBatch(context.Background(), &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(largeURL),
		Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: e.handles[id]}}})
	if err != nil || len(out.Failed) > 0 {
		e.t.Fatalf("the other claim handing %s back: %v %+v", id, err, out)
	}
}

// fitHeldElsewhere is a queue whose runner that fits the pickup (i-c) another
// claim holds, and a mismatch for the pickup (i-r) visible.
func fitHeldElsewhere(t *testing.T) (*fakeSQS, *elsewhere) {
	s := newFakeSQS(largeURL)
	s.Add(largeURL, idleMessage("i-c", "c6i.large", future()).Body())
	other := newElsewhere(t, s)
	other.receive()
	s.Add(largeURL, idleMessage("i-r", "r6i.large", future()).Body())
	return s, other
}

// Two claims of a burst that each hold the other's runner as a mismatch:
// each hands its mismatches back before it waits, so each finds its own.
// Here the pickup (c*) holds i-r; the other claim (r*) holds i-c, finds
// i-r once the pickup waits, and hands i-c back.
func TestPickupHandsBackItsMismatchesBeforeWaiting(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.Add(largeURL, idleMessage("i-r", "r6i.large", future()).Body())
	s.Add(largeURL, idleMessage("i-c", "c6i.large", future()).Body())
	other := newElsewhere(t, s)
	step := 0
	s.ReceiveHook = func(_ int, in *sqs.ReceiveMessageInput) {
		if in.WaitTimeSeconds == 0 {
			return // the pickup's short polls, and the other claim's receives
		}
		step++
		switch step {
		case 1: // the pickup's confirming long poll: it holds i-r
			if got := other.receive(); !slices.Equal(got, []string{"i-c"}) {
				t.Errorf("the other claim received %v, want i-c", got)
			}
		case 2: // the pickup waits for the message the other claim holds
			if got := other.receive(); !slices.Equal(got, []string{"i-r"}) {
				t.Errorf("the other claim received %v while the pickup waited, want i-r, handed back", got)
			}
			other.handBack("i-c")
		}
	}
	p := newTestPickup(t, s)
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-c"}) {
		t.Fatalf("Take = %v, want i-c, handed back by the other claim", got)
	}
}

// A claim that receives only runners it has judged before (its own
// mismatches, handed back) while other claims hold messages steps aside:
// it hands them back and pauses before it receives again, since the
// runners it keeps receiving are those the others wait for. Here the other
// claim (r*) holds i-c and waits for i-r: it finds i-r during the pause,
// and hands i-c back.
func TestPickupStepsAsideWhileOthersHoldMessages(t *testing.T) {
	s, other := fitHeldElsewhere(t)
	p := newTestPickup(t, s)
	advance, pauses := p.Sleep, 0
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		if pauses++; pauses == 1 {
			if got := other.receive(); !slices.Equal(got, []string{"i-r"}) {
				t.Errorf("the other claim received %v during the pause, want i-r", got)
			}
			other.handBack("i-c")
		}
		return advance(ctx, d)
	}
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-c"}) {
		t.Fatalf("Take = %v, want i-c, handed back by the other claim", got)
	}
	if pauses != 1 {
		t.Errorf("%d pauses, want 1", pauses)
	}
}

// A claim that receives again, while it waits, a runner it handed back is
// not cycling: the runner's sightings start again. Here the pickup hands
// i-r back and receives it again more than sightingLimit times before the
// other claim hands i-c back.
func TestPickupRunnerHandedBackIsNotCycling(t *testing.T) {
	s, other := fitHeldElsewhere(t)
	mismatch := idleMessage("i-r", "r6i.large", future()).Body()
	handedBack := false
	s.ReceiveHook = func(int, *sqs.ReceiveMessageInput) {
		s.Mu.Lock()
		n := strings.Count(strings.Join(s.Received, "\n"), mismatch)
		s.Mu.Unlock()
		if n > sightingLimit && !handedBack {
			handedBack = true
			other.handBack("i-c")
		}
	}
	p := newTestPickup(t, s)
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-c"}) {
		t.Fatalf("Take = %v, want i-c, handed back by the other claim", got)
	}
}

// The wait for messages other claims hold restarts when the claim accepts
// a runner it had not seen: a claim whose first runner failed its checks
// waits as long again for a second one.
func TestPickupWaitRestartsWithANewRunner(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.Add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
	s.Add(largeURL, idleMessage("i-2", "c6i.large", future()).Body())
	other := newElsewhere(t, s)
	other.receive()
	longPolls := 0
	s.ReceiveHook = func(_ int, in *sqs.ReceiveMessageInput) {
		if in.WaitTimeSeconds == 0 {
			return
		}
		switch longPolls++; longPolls {
		case inFlightPolls: // the pickup's last wait but one
			other.handBack("i-1")
		case inFlightPolls + inFlightPolls/2:
			other.handBack("i-2")
		}
	}
	p := newTestPickup(t, s)
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-1"}) {
		t.Fatalf("first Take = %v, want i-1", got)
	}
	// i-1 failed its checks: the claim takes another.
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-2"}) {
		t.Fatalf("second Take = %v, want i-2, handed back %d long polls after the first Take", got, inFlightPolls/2)
	}
}

// SQS's in-flight count is approximate and may lag: a claim counts the
// messages others hold before it hands its own back, while its own are
// still left out. Here the count lags half a second: counted after the
// hand-back, it would still include the claim's own mismatch, and the claim
// would wait for it 10 long polls before it launches.
func TestPickupCountsBeforeHandingBack(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.CountLag = 500 * time.Millisecond
	s.Add(largeURL, idleMessage("i-r", "r6i.large", future()).Body()) // a mismatch for c*
	p := newTestPickup(t, s)
	if got := take(t, p, 1); len(got) != 0 {
		t.Fatalf("Take = %v, want none", got)
	}
	if st := p.Stats(); st.InFlightWaits > 1 {
		t.Errorf("stats %+v: want at most the one look once more, no wait for the claim's own message", st)
	}
}

// A short poll may miss a message; the confirming long poll finds it.
func TestPickupLongPollFindsMessageShortPollMissed(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.AddAt(largeURL, idleMessage("i-1", "c6i.large", future()).Body(), s.Clock.Add(500*time.Millisecond)) // not yet visible
	p := newTestPickup(t, s)
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-1"}) {
		t.Fatalf("Take = %v, want i-1", got)
	}
}

// Running a queue of mismatches to exhaustion looks at each message once,
// however slow the receives, and at one batch again after handing them
// back (see TestPickupHandsBackItsMismatchesBeforeWaiting), in about 0.3
// SQS calls per message.
func TestPickupExaminesEachMessageOnceCheaply(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.AdvancePerReceive = 3 * time.Second // what once made requeued messages come back
	const n = 60
	for i := range n {
		s.Add(largeURL, idleMessage(fmt.Sprintf("i-r%02d", i), "r6i.large", future()).Body())
	}
	p := newTestPickup(t, s)
	if got := take(t, p, 10); len(got) != 0 {
		t.Fatalf("Take = %v, want exhausted", got)
	}
	p.Close(context.Background())
	if got := len(s.Received); got != n+batchSize {
		t.Errorf("received %d messages, want each of the %d once and one batch again", got, n)
	}
	if perMsg := float64(s.CallCount()) / n; perMsg > 0.35 {
		t.Errorf("%d SQS calls for %d messages (%.2f per message), want at most 0.35", s.CallCount(), n, perMsg)
	}
	if ids := s.VisibleIDs(largeURL); len(ids) != n {
		t.Errorf("%d visible after Close, want all %d", len(ids), n)
	}
}

// Takes that follow each other (a claim that replaces runners lost to
// other claims, or takes in rounds) look at each message once: what one
// Take did not hand over stays hidden from the next until HandBack.
func TestPickupTakesInTurnExamineEachMessageOnce(t *testing.T) {
	s := newFakeSQS(largeURL)
	const fits, mismatches = 3, 30
	for i := range fits + mismatches {
		typ := "r6i.large"
		if i%11 == 10 {
			typ = "c6i.large"
		}
		s.Add(largeURL, idleMessage(fmt.Sprintf("i-%02d", i), typ, future()).Body())
	}
	p := newTestPickup(t, s)
	var got []string
	for range fits {
		got = append(got, take(t, p, 1)...)
	}
	if len(got) != fits {
		t.Fatalf("took %v, want the %d that fit", got, fits)
	}
	if n := len(s.Received); n != fits+mismatches {
		t.Errorf("received %d messages, want each of the %d once", n, fits+mismatches)
	}
}

// Duplicate messages of one runner: the fifth sighting ends the pickup.
func TestPickupExhaustedAfterFiveSightings(t *testing.T) {
	s := newFakeSQS(largeURL)
	r := idleMessage("i-r", "r6i.large", future())
	for range 7 {
		s.Add(largeURL, r.Body())
	}
	p := newTestPickup(t, s)
	if got := take(t, p, 1); len(got) != 0 {
		t.Fatalf("Take = %v, want exhausted", got)
	}
	before := len(s.ReceiveInputs())
	if n := len(s.Received); n < 5 || n > 7 {
		t.Errorf("received %d, want the pickup to stop at the batch with the fifth sighting", n)
	}
	if got := take(t, p, 1); len(got) != 0 || len(s.ReceiveInputs()) != before {
		t.Error("the pickup went on after exhaustion")
	}
}

// A message delivered again while the claim holds it (SQS's duplicates, in
// a burst) is a sighting of the message, not of its runner: four
// redeliveries of a mismatch do not end the search, which finds the
// runner that comes later. The fifth ends it (after its batch is sorted),
// so a message that keeps coming back cannot keep the claim looping.
func TestPickupDuplicateDeliveryIsNotASighting(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.Add(largeURL, idleMessage("i-r", "r6i.large", future()).Body()) // a mismatch for c*
	s.AddAt(largeURL, idleMessage("i-c", "c6i.large", future()).Body(), s.Clock.Add(700*time.Second))
	// Past the 120 s visibility at every receive: the held mismatch comes
	// again each time, and i-c with the sixth receive.
	s.AdvancePerReceive = 121 * time.Second
	p := newTestPickup(t, s)
	if got := take(t, p, 1); !slices.Equal(got, []string{"i-c"}) {
		t.Fatalf("Take = %v, want i-c, found after the mismatch came 5 more times", got)
	}
	if n := len(s.ReceiveInputs()); n != 6 {
		t.Errorf("%d receives, want 6", n)
	}
	if got := take(t, p, 1); len(got) != 0 {
		t.Errorf("second Take = %v, want none: the fifth redelivery ended the search", got)
	}
}

// Every message received is consumed, made visible again or deleted as
// invalid; a consumed one whose delete SQS did not confirm is no error (its
// message, if left, is stale: the claim decides who owns the runner).
func TestPickupAccountsForEveryMessage(t *testing.T) {
	s := newFakeSQS(largeURL)
	var valid, mismatch []string
	for i, typ := range []string{"c6i.large", "r6i.large", "c7g.large", "m6i.large", "c6a.large", "x2.large", "c5.large", "c6i.large", "r7i.large", "c6in.large", "c6i.large", "z1d.large"} {
		m := idleMessage("i-"+string(rune('a'+i)), typ, future())
		s.Add(largeURL, m.Body())
		if MatchInstanceType(largeWants.AllowedTypes, typ) {
			valid = append(valid, m.ID)
		} else {
			mismatch = append(mismatch, m.ID)
		}
	}
	for _, b := range []string{"{}", `{"id":"i-bad"}`, "not json"} {
		s.Add(largeURL, b)
	}
	s.FailDelete["i-c"] = true // a valid one whose delete fails
	p := newTestPickup(t, s)
	var taken []string
	for {
		got := take(t, p, 3)
		taken = append(taken, got...)
		if len(got) < 3 {
			break
		}
	}
	// The claim consumes all but the last runner taken.
	consumed := taken[:len(taken)-1]
	p.Consume(context.Background(), consumed)
	p.consuming.Wait()
	p.Close(context.Background())
	takenSet := map[string]bool{}
	for _, id := range taken {
		if takenSet[id] {
			t.Errorf("%s taken twice", id)
		}
		takenSet[id] = true
		if !slices.Contains(valid, id) {
			t.Errorf("%s taken but is not a usable runner", id)
		}
	}
	if len(taken) != len(valid) || !takenSet["i-c"] {
		t.Errorf("took %v, want all %d usable runners", taken, len(valid))
	}
	queued := slices.DeleteFunc(s.queuedIDs(t, largeURL), func(id string) bool { return id == "i-c" }) // its undeleted message
	for _, id := range append(append([]string{}, valid...), mismatch...) {
		if id != "i-c" && slices.Contains(consumed, id) == slices.Contains(queued, id) {
			t.Errorf("%s: consumed %v, in queue %v; want exactly one", id, slices.Contains(consumed, id), slices.Contains(queued, id))
		}
	}
	if len(queued) != len(valid)+len(mismatch)-len(consumed) {
		t.Errorf("queue holds %v: invalid messages were not deleted", queued)
	}
	if ids := s.VisibleIDs(largeURL); !slices.Equal(ids, queued) {
		t.Errorf("visible after Close: %v, want every queued message but i-c's (consumed)", ids)
	}
	st := p.Stats()
	if st.Received != st.Discarded+st.Requeued+st.Accepted || st.Returned != 1 {
		t.Errorf("stats %+v do not add up", st)
	}
}

func TestPickupErrors(t *testing.T) {
	t.Run("receive fails", func(t *testing.T) {
		s := newFakeSQS(largeURL)
		s.Add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
		s.Fail("ReceiveMessage", 1, errTransient)
		p := newTestPickup(t, s)
		if _, err := p.Take(context.Background(), 1); !errors.Is(err, errTransient) {
			t.Fatalf("Take = %v, want the receive error", err)
		}
		if got := take(t, p, 1); !slices.Equal(got, []string{"i-1"}) {
			t.Errorf("retry = %v", got)
		}
	})
	t.Run("delete of a claimed runner's message fails", func(t *testing.T) {
		s := newFakeSQS(largeURL)
		s.Add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
		s.Fail("DeleteMessageBatch", 1, errTransient)
		p := newTestPickup(t, s)
		take(t, p, 1)
		p.Consume(context.Background(), []string{"i-1"}) // only logs: the message is stale now
		p.Close(context.Background())
		if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-1"}) {
			t.Errorf("queue holds %v, want the undeleted runner", ids)
		}
	})
	t.Run("making visible fails", func(t *testing.T) {
		s := newFakeSQS(largeURL)
		s.Add(largeURL, idleMessage("i-r", "r6i.large", future()).Body())
		s.Fail("ChangeMessageVisibilityBatch", 1, errTransient)
		p := newTestPickup(t, s)
		if got := take(t, p, 1); len(got) != 0 {
			t.Fatalf("Take = %v, want exhausted", got)
		}
		p.Close(context.Background()) // a runner hidden a little longer is no failure
		if ids := s.queuedIDs(t, largeURL); !slices.Equal(ids, []string{"i-r"}) {
			t.Errorf("queue holds %v, want the runner (visible again after its timeout)", ids)
		}
	})
}

// SQS delivers at least once: a message this claim holds can come again
// (its visibility ran out in a long claim, or a duplicate delivery), with a
// new receipt handle. It is the same message, not a second one for the
// runner: it is not deleted, and giving it back uses the new handle, so
// the runner stays visible in the pool.
func TestPickupKeepsARedeliveredMessage(t *testing.T) {
	s := newFakeSQS(largeURL)
	s.Add(largeURL, idleMessage("i-1", "c6i.large", future()).Body())
	s.Add(largeURL, idleMessage("i-2", "m6i.large", future()).Body()) // held back: not c*
	p := newTestPickup(t, s)
	// Every receive after the first finds both messages visible again.
	s.AdvancePerReceive = (receiveVisibility + 1) * time.Second
	if got := take(t, p, 2); !slices.Equal(got, []string{"i-1"}) {
		t.Fatalf("Take(2) = %v, want i-1 alone", got)
	}
	if st := p.Stats(); st.Discarded != 0 || st.Received != 2 {
		t.Errorf("stats %+v: the redeliveries were counted or discarded as messages of their own", st)
	}
	p.Close(context.Background())
	if got := s.VisibleIDs(largeURL); !slices.Equal(got, []string{"i-1", "i-2"}) {
		t.Errorf("after Close the queue shows %v, want both runners back", got)
	}
}

// A later message for a runner the claim already claimed (stale: SQS
// delivered the runner's old message again) is dropped without claiming
// the runner twice, even when the claim write it would make fails in a way
// only the record can settle: the record says the runner is this claim's,
// as it has been since the first message.
func TestCreateDropsALaterMessageOfARunnerItClaimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.seedIdle("i-1", healthy)
	e.seedIdle("i-2", registrationFails) // replaced: the claim takes again
	e.sqs.ReceiveHook = func(n int, _ *sqs.ReceiveMessageInput) {
		if n == 2 {
			e.sqs.Add(largeURL, m.Body())
			e.seedIdle("i-3", healthy)
		}
	}
	writes := 0
	e.db.FailIf = func(op string, in any) error {
		if op == "UpdateItem" && writesState(in, "i-1", protocol.StateClaimed) {
			if writes++; writes > 1 {
				return errTransient
			}
		}
		return nil
	}
	res, err := e.create(2)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(res.Instances); !slices.Equal(got, []string{"i-1", "i-3"}) {
		t.Errorf("instances %v, want i-1 and i-3 once each", got)
	}
	if q := e.sqs.queuedIDs(t, largeURL); len(q) != 0 {
		t.Errorf("queue holds %v, want the stale message dropped", q)
	}
}
