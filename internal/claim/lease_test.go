package claim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// takeOverOnClaim makes another attempt of the run take the claim record
// over (a new nonce, what the record lists) the moment the attempt under
// test claims instance id (before its claim write returns): its lease
// lapsed while it stalled.
func (e *env) takeOverOnClaim(id, successor string) {
	agents := e.db.AfterInstance
	e.db.AfterInstance = func(ctx context.Context, old, cur protocol.Instance, existed bool) {
		if cur.ID == id && cur.State == protocol.StateClaimed && old.State == protocol.StateIdle {
			e.db.Mu.Lock()
			k := awsfake.ItemKey(protocol.Key(protocol.TypeClaim, testRun))
			it := e.db.Items[k]
			rec, err := recordFromItem(testPool, it)
			if err != nil {
				panic(err)
			}
			rec.Nonce = successor
			e.db.Items[k] = rec.Item(protocol.StringAttr(it, protocol.AttrUpdatedAt))
			e.db.Mu.Unlock()
		}
		agents(ctx, old, cur, existed)
	}
}

// A stalled attempt whose record another attempt took over stops: it does
// not complete the claim over its successor's record, hand the runners to
// the run, or release them (they are listed in the record the successor
// settles).
func TestCreateStopsWhenItsRecordIsTakenOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	e.takeOverOnClaim("i-1", "successor")
	_, err := e.create(1)
	if !errors.Is(err, errLeaseLost) {
		t.Fatalf("Create: %v, want the lease lost", err)
	}
	rec, ok := e.claimRecord()
	if !ok || rec.Nonce != "successor" || rec.State != recordPending || !slices.Equal(rec.OwnedIDs, []string{"i-1"}) {
		t.Errorf("claim record %+v (exists %v): want the successor's, pending, listing i-1", rec, ok)
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateClaimed || r.RunID != testRun {
		t.Errorf("i-1 is %s for %q: the stalled attempt touched it after losing the record", r.State, r.RunID)
	}
	if q := e.sqs.queuedIDs(t, largeURL); len(q) != 0 {
		t.Errorf("queue %v: the stalled attempt gave i-1 back", q)
	}
}

// A new attempt takes over a crashed attempt's record only as it read it:
// when that attempt refreshes the record between the read and the takeover
// (it was stalled, not dead), it keeps the record and its runners.
func TestCreateLeavesARecordRefreshedMeanwhile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-2", healthy)
	e.seedRecord(protocol.Instance{ID: "i-1", State: protocol.StateClaimed, RunID: testRun, Threshold: protocol.FormatTime(time.Now().Add(claimedLifetime))}, healthy)
	stalled := Record{Request: e.request(1), State: recordPending, Nonce: "stalled", OwnedIDs: []string{"i-1"}}
	e.db.Put(stalled.Item(protocol.FormatTime(time.Now().Add(-2 * leaseTimeout))))
	var reads int
	e.db.FailIf = func(op string, in any) error {
		if op == "GetItem" && protocol.IdentifierOf(in.(*dynamodb.GetItemInput).Key) == testRun {
			reads++
		}
		if reads == 1 && (op == "PutItem" || op == "BatchGetItem") { // the first thing after reading it
			it := e.db.Items[awsfake.ItemKey(protocol.Key(protocol.TypeClaim, testRun))]
			it[protocol.AttrUpdatedAt] = str(protocol.FormatTime(time.Now()))
			reads++
		}
		return nil
	}
	// The deadline falls in the middle of the second wait (leaseInterval/4
	// each), never at the end of one, where a loaded machine could be
	// reading the record instead.
	ctx, cancel := context.WithTimeout(context.Background(), leaseInterval*3/8)
	defer cancel()
	if _, err := e.c.Create(ctx, e.request(1)); err == nil || !strings.Contains(err.Error(), "another apply is claiming runners") {
		t.Fatalf("Create: %v, want it to wait for the live attempt", err)
	}
	if rec, ok := e.claimRecord(); !ok || rec.Nonce != "stalled" || !slices.Equal(rec.OwnedIDs, []string{"i-1"}) {
		t.Errorf("claim record %+v (exists %v): want the stalled attempt's, listing i-1", rec, ok)
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateClaimed || r.RunID != testRun {
		t.Errorf("i-1 is %s for %q: the live attempt's runner was released under it", r.State, r.RunID)
	}
}

// The lease keeper tells the attempt when its record changed hands, instead
// of logging and going on.
func TestKeepLeaseReportsARecordTakenOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	theirs := Record{Request: e.request(1), State: recordPending, Nonce: "theirs"}
	e.db.Put(theirs.Item(protocol.FormatTime(time.Now())))
	a := &attempt{c: e.c, s: e.c.store(testPool), req: e.request(1), rec: Record{Nonce: "ours"}}
	awaitLeaseLost(t, a)
	if rec, _ := e.claimRecord(); rec.Nonce != "theirs" {
		t.Errorf("the record's nonce is %q: the keeper wrote over theirs", rec.Nonce)
	}
}

// Refreshes that keep failing (DynamoDB unreachable from this attempt)
// stop the attempt before its lease can lapse: by the time another attempt
// may take the record over, this one has stopped touching what it holds.
func TestKeepLeaseStopsTheAttemptWhenRefreshesFail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ours := Record{Request: e.request(1), State: recordPending, Nonce: "ours"}
	e.db.Put(ours.Item(protocol.FormatTime(time.Now())))
	refreshes := 0
	e.db.FailIf = func(op string, in any) error {
		if op == "UpdateItem" && protocol.IdentifierOf(in.(*dynamodb.UpdateItemInput).Key) == testRun {
			refreshes++
			return errTransient
		}
		return nil
	}
	// A virtual clock: each wait moves it on at once.
	var mu sync.Mutex
	start := time.Now()
	now := start
	c := *e.c
	c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c.Sleep = func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
		return nil
	}
	a := &attempt{c: &c, s: c.store(testPool), req: e.request(1), rec: ours}
	awaitLeaseLost(t, a)
	if elapsed := c.Now().Sub(start); elapsed >= leaseTimeout || refreshes < 2 {
		t.Errorf("stopped %s after the last refresh, after %d failed refreshes: want more than one try, and stopped within the lease of %s", elapsed, refreshes, leaseTimeout)
	}
}

// The lease keeper refreshes the record only as often as its takeover
// window needs, half a lease, and sooner again after a failed refresh:
// each refresh is a write, and a burst's claims wait long.
func TestKeepLeaseRefreshesOncePerHalfLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ours := Record{Request: e.request(1), State: recordPending, Nonce: "ours"}
	e.db.Put(ours.Item(protocol.FormatTime(time.Now())))
	var (
		mu        sync.Mutex
		now       = time.Now()
		start     = now
		refreshes []time.Duration // since start, on the virtual clock
	)
	e.db.FailIf = func(op string, in any) error {
		if op != "UpdateItem" || protocol.IdentifierOf(in.(*dynamodb.UpdateItemInput).Key) != testRun {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		refreshes = append(refreshes, now.Sub(start))
		if len(refreshes) == 2 {
			return errTransient
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := *e.c
	c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c.Sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		if len(refreshes) == 4 {
			cancel()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		now = now.Add(d)
		return nil
	}
	a := &attempt{c: &c, s: c.store(testPool), req: e.request(1), rec: ours}
	stop := a.keepLease(ctx, func(err error) { t.Errorf("lease lost: %v", err) })
	await.Done(t, "four refreshes", ctx.Done())
	stop()
	want := []time.Duration{leaseTimeout / 2, leaseTimeout, leaseTimeout + leaseRetry, leaseTimeout*3/2 + leaseRetry}
	if !slices.Equal(refreshes, want) {
		t.Errorf("refreshes at %v, want %v: every half lease, and sooner after the failed second", refreshes, want)
	}
}

// awaitLeaseLost runs the attempt's lease keeper until it reports the
// lease lost, and checks that it says so.
func awaitLeaseLost(t *testing.T, a *attempt) {
	t.Helper()
	ctx, lost := context.WithCancelCause(context.Background())
	stop := a.keepLease(context.Background(), lost)
	defer stop()
	await.Done(t, "the lease reported lost", ctx.Done())
	if cause := context.Cause(ctx); !errors.Is(cause, errLeaseLost) {
		t.Errorf("cause %v, want errLeaseLost", cause)
	}
}
