package claim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// seedMany seeds n healthy idle runners i-00, i-01, ...
func (e *env) seedMany(n int) {
	for i := range n {
		e.seedIdle(fmt.Sprintf("i-%02d", i), healthy)
	}
}

// updateItems counts the UpdateItem calls (not transactions) match accepts.
func (f *fakeTable) updateItems(match func(*dynamodb.UpdateItemInput) bool) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	n := 0
	for _, c := range f.Calls {
		if in, ok := c.In.(*dynamodb.UpdateItemInput); ok && match(in) {
			n++
		}
	}
	return n
}

// updateCount counts the UpdateItem calls whose update expression is expr.
func (f *fakeTable) updateCount(expr string) int {
	return f.updateItems(func(in *dynamodb.UpdateItemInput) bool { return aws.ToString(in.UpdateExpression) == expr })
}

// singleWritesTo counts the UpdateItem calls (not transactions) moving a
// record to state.
func (f *fakeTable) singleWritesTo(state string) int {
	return f.updateItems(func(in *dynamodb.UpdateItemInput) bool {
		return protocol.StringAttr(in.ExpressionAttributeValues, ":toState") == state
	})
}

// assertComplete checks that the claim holds n running runners and its
// record is complete.
func (e *env) assertComplete(t *testing.T, res *Result, n int) {
	t.Helper()
	if len(res.Instances) != n {
		t.Fatalf("%d instances, want %d", len(res.Instances), n)
	}
	for _, inst := range res.Instances {
		if r := e.db.instance(t, inst.ID); r.State != protocol.StateRunning || r.RunID != testRun {
			t.Errorf("%s is %s for %q, want running", inst.ID, r.State, r.RunID)
		}
	}
	rec, ok := e.claimRecord()
	if !ok || rec.State != recordComplete || len(rec.OwnedIDs) != n {
		t.Errorf("claim record %+v (exists %v), want complete with %d instances", rec, ok, n)
	}
}

// A claim of warm runners batches what can be batched: a receive and a
// delete per ten runners, one write listing them in the claim record, one
// read of all their agents per round, and one transaction per 25 runners
// for the claims and one for the transitions to running, which also
// completes the claim record up to 24 runners (past that, one more update
// makes sure the record is still the claim's before the runners run).
func TestCreateBatchesCalls(t *testing.T) {
	for _, tc := range []struct{ runners, batches, transactions, updates, puts int }{
		{1, 1, 1, 2, 1}, // a lone claim goes alone; running and complete still share a transaction
		{10, 1, 2, 1, 1}, {24, 3, 2, 1, 1}, {25, 3, 2, 2, 2}, {30, 3, 4, 2, 2},
	} {
		t.Run(fmt.Sprint(tc.runners), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.seedMany(tc.runners)
			res, err := e.create(tc.runners)
			if err != nil {
				t.Fatal(err)
			}
			e.assertComplete(t, res, tc.runners)
			got := map[string]int{
				"ReceiveMessage": e.sqs.Count("ReceiveMessage"), "DeleteMessageBatch": e.sqs.Count("DeleteMessageBatch"),
				"ADD #ids": e.db.updateCount("ADD #ids :ids"), "BatchGetItem": e.db.Count("BatchGetItem"),
				"TransactWriteItems": e.db.Count("TransactWriteItems"), "UpdateItem": e.db.Count("UpdateItem"), "PutItem": e.db.Count("PutItem"),
			}
			want := map[string]int{
				"ReceiveMessage": tc.batches, "DeleteMessageBatch": tc.batches, "ADD #ids": 1, "BatchGetItem": 1,
				"TransactWriteItems": tc.transactions, "UpdateItem": tc.updates, "PutItem": tc.puts, // the pending claim record, and the complete one past 24 runners
			}
			for op, n := range want {
				if got[op] != n {
					t.Errorf("%s: %d calls, want %d (all: %v)", op, got[op], n, got)
				}
			}
		})
	}
}

// A transaction that fails, or whose answer is lost after it committed, is
// made again one write at a time, with the same result.
func TestCreateFallsBackToSingleWrites(t *testing.T) {
	for _, lost := range []bool{false, true} {
		for _, state := range []string{protocol.StateClaimed, protocol.StateRunning} {
			t.Run(fmt.Sprintf("to %s, answer lost %v", state, lost), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				e.seedMany(3)
				hit := func(op string, in any) bool { return op == "TransactWriteItems" && writesState(in, "i-00", state) }
				if lost {
					e.db.LoseAnswer = hit
				} else {
					e.db.FailIf = func(op string, in any) error {
						if hit(op, in) {
							return errTransient
						}
						return nil
					}
				}
				res, err := e.create(3)
				if err != nil {
					t.Fatal(err)
				}
				e.assertComplete(t, res, 3)
				if alone := e.db.singleWritesTo(state); !lost && alone != 3 {
					t.Errorf("%d single writes to %s, want 3", alone, state)
				}
			})
		}
	}
}

// A transaction cancelled because some runners are no longer idle (stale
// messages) is made again without them: one more call, not one per runner.
func TestCreateRetriesTransactionWithoutLostRaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedMany(4)
	e.db.setInstance(t, "i-01", func(r *protocol.Instance) { r.State, r.RunID = protocol.StateRunning, "another-run" })
	e.seedIdle("i-04", healthy)
	res, err := e.create(4)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(res.Instances); !slices.Equal(got, []string{"i-00", "i-02", "i-03", "i-04"}) {
		t.Errorf("instances %v, want all but i-01", got)
	}
	if r := e.db.instance(t, "i-01"); r.RunID != "another-run" {
		t.Errorf("i-01 is %s for %q, want untouched", r.State, r.RunID)
	}
	// Claims: 4 cancelled, the 3 others again, then i-04's alone; running: 1.
	if n := e.db.Count("TransactWriteItems"); n != 3 {
		t.Errorf("%d transactions, want 3", n)
	}
	if n := e.db.Count("UpdateItem"); n != 3 {
		t.Errorf("%d UpdateItem calls, want the two claim record additions and i-04's claim", n)
	}
}

// The last writes to running fail (the runner's deadline passed): the
// claim fails naming it, and rolls back everything.
func TestCreateFinishNamesTheRunnerAtFault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedMany(2)
	e.db.FailIf = func(op string, in any) error {
		if writesState(in, "i-01", protocol.StateRunning) {
			return awsfake.ConditionFailed() // as when its deadline passed
		}
		return nil
	}
	_, err := e.create(2)
	if err == nil || !strings.Contains(err.Error(), "instance i-01") {
		t.Fatalf("error %v, want one naming i-01", err)
	}
	e.assertNothingHeld(t)
}

// A release batches too: the transitions to idle in one transaction per 25
// runners, one read of all agents per round, their messages in batches of
// ten, and one write taking them off the claim record.
func TestReleaseBatchesCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedMany(12)
	if _, err := e.create(12); err != nil {
		t.Fatal(err)
	}
	sends, reads, transactions := e.sqs.Count("SendMessageBatch"), e.db.Count("BatchGetItem"), e.db.Count("TransactWriteItems")
	outcomes, err := e.release()
	if err != nil {
		t.Fatal(err)
	}
	released := slices.DeleteFunc(outcomes, func(o string) bool { return !strings.HasSuffix(o, ": released to the pool") })
	if len(released) != 12 {
		t.Fatalf("outcomes %q, want 12 released", outcomes)
	}
	if n := e.db.Count("TransactWriteItems") - transactions; n != 1 || e.db.singleWritesTo(protocol.StateIdle) != 0 {
		t.Errorf("%d transactions and %d single writes to idle, want 1 and 0", n, e.db.singleWritesTo(protocol.StateIdle))
	}
	if n := e.sqs.Count("SendMessageBatch") - sends; n != 2 {
		t.Errorf("%d SendMessageBatch calls, want 2", n)
	}
	if n := e.db.updateCount("DELETE #ids :ids"); n != 1 {
		t.Errorf("%d writes taking runners off the claim record, want 1", n)
	}
	// The instance records, then the agents (healthy ones confirm at once).
	if n := e.db.Count("BatchGetItem") - reads; n != 2 {
		t.Errorf("%d BatchGetItem calls, want 2", n)
	}
	if q := e.sqs.queuedIDs(t, largeURL); len(q) != 12 {
		t.Errorf("queue holds %v, want all 12", q)
	}
}

// In a pool with a GitHub target, a claim mints one registration token and
// hands it to its runners in one BatchWriteItem per 25 (per batch of
// runners taken from the queue); its release mints one removal token and
// hands it over the same way. Nothing else changes.
func TestTokensBatched(t *testing.T) {
	for _, tc := range []struct{ runners, createWrites, releaseWrites int }{
		{1, 1, 1}, {10, 1, 1}, {25, 1, 1}, {30, 2, 2},
	} {
		t.Run(fmt.Sprint(tc.runners), func(t *testing.T) {
			t.Parallel()
			src := &fakeTokens{}
			e := tokenEnv(t, src)
			e.seedMany(tc.runners)
			res, err := e.create(tc.runners)
			if err != nil {
				t.Fatal(err)
			}
			e.assertComplete(t, res, tc.runners)
			if n := e.db.Count("BatchWriteItem"); n != tc.createWrites {
				t.Errorf("claim: %d BatchWriteItem calls, want %d", n, tc.createWrites)
			}
			if _, err := e.release(); err != nil {
				t.Fatal(err)
			}
			if n := e.db.Count("BatchWriteItem") - tc.createWrites; n != tc.releaseWrites {
				t.Errorf("release: %d BatchWriteItem calls, want %d", n, tc.releaseWrites)
			}
			if got := src.Issued(); !slices.Equal(got, []string{"registration octo/app", "remove octo/app"}) {
				t.Errorf("GitHub calls %q, want one token each for the claim and the release", got)
			}
			if q := e.sqs.queuedIDs(t, largeURL); len(q) != tc.runners {
				t.Errorf("%d runners back in the queue, want %d", len(q), tc.runners)
			}
		})
	}
}

// conflictOn cancels a transaction as DynamoDB does when another write is
// under way on its item at: TransactionConflict there, None elsewhere.
func conflictOn(in any, at int) error {
	items := in.(*dynamodb.TransactWriteItemsInput).TransactItems
	reasons := make([]types.CancellationReason, len(items))
	for i := range reasons {
		reasons[i].Code = aws.String("None")
	}
	reasons[at].Code = aws.String("TransactionConflict")
	return &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
}

// A transaction DynamoDB cancels for a conflict (another write under way
// on one of its items) changed nothing and is made again: the claim's
// writes cancelled only because of the conflict in a transaction again,
// the conflicting one alone (the SDK client retries a single write's
// TransactionConflictException, see awsconfig), and the completing
// transaction, cancelled for the claim record, as the runners' writes
// first and the record after. The claim completes with every runner.
func TestCreateRetriesTransactionConflicts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedMany(3)
	conflicts := map[string]bool{}
	e.db.FailIf = func(op string, in any) error {
		switch {
		case op != "TransactWriteItems":
			return nil
		case writesState(in, "i-01", protocol.StateClaimed) && !conflicts["claim"]:
			conflicts["claim"] = true
			return conflictOn(in, 1)
		case writesState(in, "i-00", protocol.StateRunning) && !conflicts["finish"]:
			conflicts["finish"] = true
			return conflictOn(in, len(in.(*dynamodb.TransactWriteItemsInput).TransactItems)-1) // the record's put
		}
		return nil
	}
	res, err := e.create(3)
	if err != nil {
		t.Fatal(err)
	}
	e.assertComplete(t, res, 3)
	if !conflicts["claim"] || !conflicts["finish"] {
		t.Fatalf("conflicts injected %v: the scenario tested less than it says", conflicts)
	}
	if n := e.db.singleWritesTo(protocol.StateClaimed); n != 1 {
		t.Errorf("%d single claim writes, want i-01's alone", n)
	}
}
