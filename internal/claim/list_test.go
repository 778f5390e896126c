package claim

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

func TestList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clock := time.Now().Truncate(time.Second)
	e.c.Now = func() time.Time { return clock }
	future := protocol.FormatTime(clock.Add(time.Hour))
	claimRecord := func(runID, state string, age time.Duration, ids ...string) Record {
		q := e.request(max(len(ids), 1))
		q.RunID = runID
		var insts []Instance
		for _, id := range ids {
			insts = append(insts, Instance{ID: id, InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, Source: SourcePool})
		}
		r := Record{Request: q, State: state, Nonce: "n-" + runID, Instances: insts, OwnedIDs: ids}
		e.db.Put(r.Item(protocol.FormatTime(clock.Add(-age))))
		return r
	}
	e.seedRecord(protocol.Instance{ID: "i-a1", State: protocol.StateRunning, RunID: "run-a", Threshold: future}, healthy)
	e.seedRecord(protocol.Instance{ID: "i-a2", State: protocol.StateTerminated, RunID: "run-a", Threshold: future}, healthy)
	e.seedRecord(protocol.Instance{ID: "i-c1", State: protocol.StateRunning, RunID: "run-c", Threshold: future}, healthy)
	claimRecord("run-a", StateComplete, 2*time.Hour, "i-a1", "i-a2")
	claimRecord("run-b", StatePending, time.Minute)
	claimRecord("run-c", StateComplete, 5*time.Minute, "i-c1")
	claimRecord("job-x", StateComplete, 3*time.Hour)
	broken := claimRecord("run-broken", StateComplete, time.Hour).Item(protocol.FormatTime(clock))
	broken[protocol.AttrValue] = str("{")
	e.db.Put(broken)

	for _, tc := range []struct {
		name   string
		filter ListFilter
		want   []string
	}{
		{"all", ListFilter{}, []string{"job-x", "run-a", "run-b", "run-c"}},
		{"state", ListFilter{State: StateComplete}, []string{"job-x", "run-a", "run-c"}},
		{"pending", ListFilter{State: StatePending}, []string{"run-b"}},
		{"age", ListFilter{MinAge: time.Hour}, []string{"job-x", "run-a"}},
		{"prefix", ListFilter{RunIDPrefix: "run-"}, []string{"run-a", "run-b", "run-c"}},
		{"all filters", ListFilter{State: StateComplete, MinAge: 3 * time.Minute, RunIDPrefix: "run-"}, []string{"run-a", "run-c"}},
	} {
		got, corrupt, err := e.c.List(context.Background(), testPool, tc.filter)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var runs []string
		for _, l := range got {
			runs = append(runs, l.Request.RunID)
		}
		if !slices.Equal(runs, tc.want) {
			t.Errorf("%s: listed %v, want %v", tc.name, runs, tc.want)
		}
		if len(corrupt) != 1 {
			t.Errorf("%s: corrupt records %v, want run-broken's", tc.name, corrupt)
		}
	}

	got, _, err := e.c.List(context.Background(), testPool, ListFilter{RunIDPrefix: "run-a"})
	if err != nil || len(got) != 1 {
		t.Fatalf("List run-a = %v, %v", got, err)
	}
	a := got[0]
	if a.State != StateComplete || a.Age != 2*time.Hour || a.Request.Pool != testPool || len(a.Instances) != 2 {
		t.Errorf("run-a listed as %+v", a)
	}
	if ids := instanceIDs(a.Live); !slices.Equal(ids, []string{"i-a1"}) {
		t.Errorf("run-a holds %v, want i-a1 (i-a2 is terminated)", ids)
	}
	if e.db.Count("UpdateItem")+e.db.Count("PutItem")+e.db.Count("DeleteItem") != 0 {
		t.Error("List wrote something")
	}
}

func TestListErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, _, err := e.c.List(context.Background(), "nopool", ListFilter{}); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("List of a missing pool: %v, want pool.ErrNotFound", err)
	}
	e.db.Fail("Query", e.db.Count("Query")+1, errTransient)
	if _, _, err := e.c.List(context.Background(), testPool, ListFilter{}); err == nil {
		t.Error("a query error was swallowed")
	}
}
