package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

func without(all []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(id string) bool { return slices.Contains(drop, id) })
}

func TestTerminateInstances(t *testing.T) {
	many := ids("i-", 2500)
	tests := []struct {
		name      string
		ids       []string
		known     []string // what EC2 knows; nil means all of ids
		denied    []string
		err       error
		wantCalls [][]string // nil: not checked, only the batch sizes
		wantSizes []int
		wantTerm  []string
		wantErr   string // substring; "" means success
		wantCode  string // the API error code the error must wrap
	}{
		{name: "nothing to do", ids: nil, wantSizes: []int{}, wantTerm: nil},
		{name: "one call", ids: []string{"i-1", "i-2", "i-3"},
			wantCalls: [][]string{{"i-1", "i-2", "i-3"}}, wantTerm: []string{"i-1", "i-2", "i-3"}},
		{name: "unknown id: one by one for the rest", ids: []string{"i-1", "i-gone", "i-3"}, known: []string{"i-1", "i-3"},
			wantCalls: [][]string{{"i-1", "i-gone", "i-3"}, {"i-1"}, {"i-gone"}, {"i-3"}}, wantTerm: []string{"i-1", "i-3"}},
		{name: "single unknown id counts as terminated", ids: []string{"i-gone"}, known: []string{},
			wantCalls: [][]string{{"i-gone"}}, wantTerm: nil},
		{name: "all unknown", ids: []string{"i-a", "i-b"}, known: []string{},
			wantCalls: [][]string{{"i-a", "i-b"}, {"i-a"}, {"i-b"}}, wantTerm: nil},
		{name: "other error is returned", ids: []string{"i-1", "i-2"},
			err:       &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "no"},
			wantCalls: [][]string{{"i-1", "i-2"}}, wantErr: "i-1, i-2", wantCode: "UnauthorizedOperation"},
		{name: "non-API error is returned", ids: []string{"i-1"}, err: errors.New("connection reset"),
			wantCalls: [][]string{{"i-1"}}, wantErr: "connection reset"},
		{name: "other error during one-by-one stops there", ids: []string{"i-1", "i-gone", "i-denied", "i-4"},
			known: []string{"i-1", "i-denied", "i-4"}, denied: []string{"i-denied"},
			wantCalls: [][]string{{"i-1", "i-gone", "i-denied", "i-4"}, {"i-1"}, {"i-gone"}, {"i-denied"}},
			wantTerm:  []string{"i-1"}, wantErr: "i-denied", wantCode: "UnauthorizedOperation"},
		{name: "batches of at most 1000", ids: many, wantSizes: []int{1000, 1000, 500}, wantTerm: many},
		{name: "exactly 1000 in one call", ids: many[:1000], wantSizes: []int{1000}, wantTerm: many[:1000]},
		{name: "1001 in two calls", ids: many[:1001], wantSizes: []int{1000, 1}, wantTerm: many[:1001]},
		{name: "unknown id in the second batch", ids: many[:2001], known: without(many[:2001], many[1500]),
			wantSizes: append(append([]int{1000, 1000}, slices.Repeat([]int{1}, 1000)...), 1),
			wantTerm:  without(many[:2001], many[1500])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ec := &awsfake.EC2{Log: &awsfake.Log{}, Gone: map[string]bool{}, Denied: map[string]bool{}, TerminateErrs: map[int]error{1: tt.err}}
			for _, id := range tt.ids {
				ec.Gone[id] = tt.known != nil && !slices.Contains(tt.known, id)
			}
			for _, id := range tt.denied {
				ec.Denied[id] = true
			}
			err := TerminateInstances(context.Background(), ec, tt.ids, false)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("TerminateInstances = %v, want nil", err)
			}
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("TerminateInstances = nil, want an error mentioning %q", tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not mention %q", err, tt.wantErr)
				}
				if tt.wantCode != "" && !HasErrorCode(err, tt.wantCode) {
					t.Errorf("error %q does not wrap the API error %s", err, tt.wantCode)
				}
			}
			calls := terminateCalls(ec.Log)
			if tt.wantCalls != nil && !slices.EqualFunc(calls, tt.wantCalls, slices.Equal) {
				t.Errorf("calls = %q, want %q", calls, tt.wantCalls)
			}
			for i, c := range calls {
				if len(c) > 1000 {
					t.Errorf("call %d has %d ids, more than 1000", i, len(c))
				}
			}
			if tt.wantSizes != nil {
				sizes := make([]int, len(calls))
				for i, c := range calls {
					sizes[i] = len(c)
				}
				if !slices.Equal(sizes, tt.wantSizes) {
					t.Errorf("batch sizes = %v, want %v", compact(sizes), compact(tt.wantSizes))
				}
			}
			wantTerm := slices.Clone(tt.wantTerm)
			sort.Strings(wantTerm)
			if got := ec.TerminatedIDs(); !slices.Equal(got, wantTerm) {
				t.Errorf("terminated %d ids %s, want %d ids %s", len(got), abbrev(got), len(wantTerm), abbrev(wantTerm))
			}
		})
	}
}

// A just-launched instance that EC2 does not know yet is terminated once it
// does, not counted as gone; an old one that EC2 does not know is gone.
func TestTerminateInstances_eventualConsistency(t *testing.T) {
	for _, justLaunched := range []bool{true, false} {
		t.Run(fmt.Sprintf("justLaunched=%t", justLaunched), func(t *testing.T) {
			ec := &awsfake.EC2{Log: &awsfake.Log{}, Unseen: map[string]int{"i-new": 2}}
			if err := TerminateInstances(context.Background(), ec, []string{"i-new", "i-old"}, justLaunched); err != nil {
				t.Fatalf("TerminateInstances = %v", err)
			}
			want := []string{"i-old"}
			if justLaunched {
				want = []string{"i-new", "i-old"}
			}
			if got := ec.TerminatedIDs(); !slices.Equal(got, want) {
				t.Errorf("terminated %v, want %v (calls %q)", got, want, terminateCalls(ec.Log))
			}
		})
	}
	t.Run("cancelled while waiting", func(t *testing.T) {
		ec := &awsfake.EC2{Unseen: map[string]int{"i-new": 1 << 30}}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := TerminateInstances(ctx, ec, []string{"i-new"}, true)
		if err == nil || !strings.Contains(err.Error(), "i-new") || !errors.Is(err, context.Canceled) {
			t.Fatalf("TerminateInstances = %v, want the instance named and context.Canceled", err)
		}
	})
}

// compact shortens long size lists for messages.
func compact(sizes []int) string {
	if len(sizes) <= 10 {
		return fmt.Sprint(sizes)
	}
	return fmt.Sprintf("%v ... (%d calls)", sizes[:10], len(sizes))
}

func abbrev(ids []string) string {
	if len(ids) <= 6 {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v ...", ids[:6])
}

func TestLiveInstances(t *testing.T) {
	all := []protocol.Instance{
		{ID: "i-1", State: protocol.StateIdle, ResourceClass: "large"},
		{ID: "i-2", State: protocol.StateTerminated, ResourceClass: "large"},
		{ID: "i-3", State: protocol.StateRunning, ResourceClass: "xlarge", RunID: "r-1"},
		{ID: "i-4", State: protocol.StateClaimed, ResourceClass: "large", RunID: "r-2"},
		{ID: "i-5", State: protocol.StateCreated, ResourceClass: "xlarge", RunID: "r-3"},
		{ID: "i-6", State: protocol.StateTerminated, ResourceClass: "xlarge"},
	}
	tests := []struct {
		class string
		all   []protocol.Instance
		want  []string
	}{
		{class: "", all: all, want: []string{"i-1", "i-3", "i-4", "i-5"}},
		{class: "large", all: all, want: []string{"i-1", "i-4"}},
		{class: "xlarge", all: all, want: []string{"i-3", "i-5"}},
		{class: "2xlarge", all: all, want: nil},
		{class: "", all: nil, want: nil},
		{class: "", all: all[1:2], want: nil},
	}
	for _, tt := range tests {
		var got []string
		for _, inst := range liveInstances(tt.all, tt.class) {
			got = append(got, inst.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("liveInstances(class %q) = %q, want %q", tt.class, got, tt.want)
		}
	}
}

func TestDescribeInstances(t *testing.T) {
	tests := []struct {
		in   []protocol.Instance
		want string
	}{
		{in: nil, want: ""},
		{in: []protocol.Instance{{ID: "i-1", State: "idle"}}, want: "i-1 (idle)"},
		{in: []protocol.Instance{{ID: "i-2", State: "running", RunID: "r-7"}, {ID: "i-1", State: "idle"}},
			want: "i-1 (idle), i-2 (running, run r-7)"},
		{in: []protocol.Instance{{ID: "i-b", State: "claimed", RunID: "run-1"}, {ID: "i-a", State: "created", RunID: "run-2"}, {ID: "i-c", State: "terminated"}},
			want: "i-a (created, run run-2), i-b (claimed, run run-1), i-c (terminated)"},
	}
	for _, tt := range tests {
		if got := describeInstances(tt.in); got != tt.want {
			t.Errorf("describeInstances(%+v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestListInstances(t *testing.T) {
	db := awsfake.NewTable("cip")
	want := []protocol.Instance{
		{ID: "i-1", State: protocol.StateIdle, Threshold: "2026-06-01T12:00:00Z", ResourceClass: "large", UpdatedAt: "2026-06-01T11:00:00Z"},
		{ID: "i-2", State: protocol.StateRunning, RunID: "r-1", Threshold: "2026-06-01T12:00:00Z", ResourceClass: "large", UpdatedAt: "2026-06-01T11:00:00Z"},
	}
	for _, inst := range want {
		db.Put(inst.Item())
	}
	db.Put(protocol.HeartbeatItem(protocol.InstanceARN(testARNPrefix, "i-1"), "2026-06-01T11:00:00Z"))
	db.Put(protocol.PoolConfig{Name: "cip"}.Item("2026-06-01T11:00:00Z"))
	got, err := ListInstances(context.Background(), db, "cip")
	if err != nil {
		t.Fatalf("ListInstances: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("ListInstances = %+v, want %+v", got, want)
	}

	// A broken record is an error, not silently skipped.
	db.Put(map[string]types.AttributeValue{
		protocol.AttrPK: &types.AttributeValueMemberS{Value: protocol.TypeInstance},
		protocol.AttrSK: &types.AttributeValueMemberS{Value: "ID#i-3"},
	})
	if _, err := ListInstances(context.Background(), db, "cip"); err == nil || !strings.Contains(err.Error(), "pool cip") {
		t.Errorf("ListInstances with a record without state = %v, want an error naming the pool", err)
	}

	// The table gone.
	if _, err := ListInstances(context.Background(), db, "other"); err == nil || !isTableMissing(err) {
		t.Errorf("ListInstances of a missing table = %v, want a wrapped ResourceNotFoundException", err)
	}
}
