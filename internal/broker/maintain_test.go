package broker

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

const largeQueue = "https://sqs.eu-west-1.amazonaws.com/123456789012/ci-runners-large"

// maintenanceWorld is the broker's pool in fakes (table, queue, EC2), its
// class large with a stopped-tier target of one runner, a runner past its
// deadline, and the broker's maintenance of it on a clock of the test's.
type maintenanceWorld struct {
	table   *awsfake.Table
	ec2     *awsfake.EC2
	mu      sync.Mutex
	now     time.Time
	expired string // the runner past its deadline
	m       *Maintenance
}

func newMaintenanceWorld(t *testing.T) *maintenanceWorld {
	w := &maintenanceWorld{table: awsfake.NewTable(testPool), now: time.Now().UTC().Truncate(time.Second), expired: "i-0e0000000000000a1",
		ec2: &awsfake.EC2{Pool: testPool, Images: map[string]ec2types.ArchitectureValues{}}}
	cfg := protocol.PoolConfig{
		Name: testPool, InstanceARNPrefix: arnPrefix,
		ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}},
		IdleTimeout:     protocol.Duration(10 * time.Minute), MaxRuntime: protocol.Duration(time.Hour),
		Fleet: &protocol.FleetConfig{LaunchTemplateID: "lt-0123", LaunchTemplateVersion: "$Latest",
			SubnetIDs: []string{"subnet-a"}, InstanceSelection: protocol.SelectionAttributeBased},
		QueueURLs: map[string]string{"large": largeQueue},
		Warm:      map[string]protocol.WarmTarget{"large": {Stopped: 1}},
	}
	w.table.Put(cfg.Item(protocol.FormatTime(w.now)))
	w.ec2.Launch(w.expired, w.now.Add(-time.Hour))
	w.table.Put(protocol.Instance{ID: w.expired, State: protocol.StateIdle, Threshold: protocol.FormatTime(w.now.Add(-time.Minute)),
		ResourceClass: "large", InstanceType: "m7i.large", UsageClass: protocol.UsageOnDemand, UpdatedAt: protocol.FormatTime(w.now.Add(-time.Hour))}.Item())
	sqs := awsfake.NewSQS(largeQueue)
	w.m = &Maintenance{Pool: testPool, Timings: claim.DefaultTimings(),
		Claimer: func(warn func(string, string)) *claim.Claimer {
			return &claim.Claimer{DynamoDB: w.table, SQS: sqs, EC2: w.ec2, Now: w.clock, Warn: warn,
				Log: func(msg string, kv ...any) { t.Log(append([]any{msg}, kv...)...) }}
		},
		Log: func(msg string, kv ...any) { t.Log(append([]any{msg}, kv...)...) }}
	return w
}

func (w *maintenanceWorld) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *maintenanceWorld) advance(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = w.now.Add(d)
}

// fleets counts the CreateFleet calls EC2 carried out.
func (w *maintenanceWorld) fleets() int {
	w.ec2.Mu.Lock()
	defer w.ec2.Mu.Unlock()
	return len(w.ec2.Fleets)
}

// The broker's maintenance reaps what is due and then fills the warm
// targets, and answers with counts; a second maintenance that comes while
// the first runs (a schedule's second delivery, a workflow's invocation)
// does nothing, nor does one less than a minute after it ended; one after
// that runs again, and finds nothing to do.
func TestMaintenanceReapsThenFillsOnce(t *testing.T) {
	w := newMaintenanceWorld(t)
	var during MaintainResponse
	var once sync.Once
	// As the first one's reap ends the runner past its deadline.
	w.table.AfterInstance = func(_ context.Context, _, cur protocol.Instance, _ bool) {
		if cur.ID == w.expired && cur.State == protocol.StateTerminated {
			once.Do(func() { during = w.m.Serve(context.Background()) })
		}
	}
	first := w.m.Serve(context.Background())
	want := MaintainResponse{Ran: true, Reaped: &ReapCounts{Expired: 1}, Launched: 1,
		Warm: map[string]WarmCounts{"large": {Stopped: 1, StoppedTarget: 1}}}
	if !equalJSON(t, first, want) {
		t.Errorf("the maintenance answered %s, want %s", asJSON(t, first), asJSON(t, want))
	}
	if !slices.Contains(w.ec2.TerminatedIDs(), w.expired) {
		t.Errorf("EC2 terminated %v, want the runner past its deadline %s", w.ec2.TerminatedIDs(), w.expired)
	}
	if !equalJSON(t, during, MaintainResponse{}) {
		t.Errorf("a maintenance while another ran answered %s, want that it did nothing", asJSON(t, during))
	}
	if got := w.fleets(); got != 1 {
		t.Errorf("%d fleets launched, want the first maintenance's one", got)
	}

	w.advance(30 * time.Second)
	if again := w.m.Serve(context.Background()); again.Ran {
		t.Errorf("a maintenance half a minute after another answered %s, want that it did nothing", asJSON(t, again))
	}
	w.advance(31 * time.Second)
	later := w.m.Serve(context.Background())
	want = MaintainResponse{Ran: true, Reaped: &ReapCounts{}, Warm: map[string]WarmCounts{"large": {Stopped: 1, StoppedTarget: 1}}}
	if !equalJSON(t, later, want) {
		t.Errorf("a maintenance a minute later answered %s, want %s", asJSON(t, later), asJSON(t, want))
	}
	if got := w.fleets(); got != 1 {
		t.Errorf("%d fleets launched, want one: the target was met", got)
	}
}

// A maintenance that cannot run says why; one whose fill cannot launch
// says which class it left short, and names no instance.
func TestMaintenanceSaysWhatWentWrong(t *testing.T) {
	w := newMaintenanceWorld(t)
	w.ec2.FleetErr = &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "not authorized to perform ec2:CreateFleet"}
	got := w.m.Serve(context.Background())
	if !got.Ran || got.Reaped == nil || got.Reaped.Expired != 1 || !slices.Contains(got.Errors, "the fill failed in part") ||
		!slices.Contains(got.Errors, "class large was left below its warm targets") {
		t.Errorf("a maintenance whose fill cannot launch answered %s, want the reap's counts and the fill's errors", asJSON(t, got))
	}

	gone := &Maintenance{Pool: "gone", Claimer: w.m.Claimer, Timings: w.m.Timings}
	got = gone.Serve(context.Background())
	if got.Ran || got.Error == nil || got.Error.Kind != ErrorFailed || got.Error.Message != "pool gone does not exist" {
		t.Errorf("the maintenance of a pool that does not exist answered %s", asJSON(t, got))
	}
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	return asJSON(t, a) == asJSON(t, b)
}
