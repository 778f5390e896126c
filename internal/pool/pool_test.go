package pool

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

const (
	testNow       = "2026-06-01T12:00:00Z"
	testARNPrefix = "arn:aws:ec2:eu-west-1:123456789012:instance/"
)

// fixture is an existing pool in the fakes: table, config item, one queue
// per class and the given instance records. EC2 knows every instance.
type fixture struct {
	log *awsfake.Log
	db  *awsfake.Table
	sqs *awsfake.SQS
	ec2 *awsfake.EC2
	sts *awsfake.STS
	m   *Manager
	cfg protocol.PoolConfig
}

func newFixture(t *testing.T, name string, classes map[string]protocol.ResourceClass, insts ...protocol.Instance) *fixture {
	t.Helper()
	f := &fixture{log: &awsfake.Log{}}
	f.db = awsfake.NewTable(protocol.TableName(name))
	f.sqs = awsfake.NewSQS()
	f.ec2 = &awsfake.EC2{Pool: name}
	f.sts = &awsfake.STS{}
	f.db.Log, f.sqs.Log, f.ec2.Log, f.sts.Log = f.log, f.log, f.log, f.log
	f.m = &Manager{DynamoDB: f.db, SQS: f.sqs, EC2: f.ec2, STS: f.sts, Region: awsfake.Region}
	f.cfg = protocol.PoolConfig{
		Name: name, ResourceClasses: classes, QueueURLs: map[string]string{}, InstanceARNPrefix: testARNPrefix,
		IdleTimeout: protocol.Duration(10 * time.Minute), MaxRuntime: protocol.Duration(time.Hour),
	}
	for class := range classes {
		f.cfg.QueueURLs[class] = f.sqs.AddQueue(protocol.QueueName(name, class), nil)
	}
	f.db.Put(f.cfg.Item(testNow))
	for _, inst := range insts {
		f.db.Put(inst.Item())
	}
	return f
}

// queue is the URL of a class's queue; "" when it has none.
func (f *fixture) queue(class string) string {
	return f.sqs.URLOf(protocol.QueueName(f.cfg.Name, class))
}

// state is an instance's state in the table, or as the table held it
// when it was deleted.
func (f *fixture) state(t *testing.T, id string) string {
	t.Helper()
	it := f.db.Get(protocol.TypeInstance, id)
	if f.db.Absent {
		it = f.db.ItemsAtDelete[awsfake.ItemKey(protocol.Key(protocol.TypeInstance, id))]
	}
	inst, err := protocol.InstanceFromItem(it)
	if err != nil {
		t.Fatalf("instance %s: %v", id, err)
	}
	return inst.State
}

// terminateCalls are the ids of each TerminateInstances call, in order.
func terminateCalls(log *awsfake.Log) [][]string {
	var out [][]string
	for _, c := range log.Calls() {
		if in, ok := c.In.(*ec2.TerminateInstancesInput); ok {
			out = append(out, in.InstanceIds)
		}
	}
	return out
}

// queueMessages puts n messages in a queue, each visible at at.
func (f *fixture) queueMessages(url string, n int, at time.Time) {
	for range n {
		f.sqs.AddAt(url, "{}", at)
	}
}

func inst(id, state, runID, class string) protocol.Instance {
	return protocol.Instance{ID: id, State: state, RunID: runID, Threshold: testNow, ResourceClass: class,
		InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, UpdatedAt: testNow}
}

var twoClasses = map[string]protocol.ResourceClass{
	"large":  {CPU: 2, MemoryMiB: 4096},
	"xlarge": {CPU: 4, MemoryMiB: 8192},
}

func TestDeleteRefusesLiveInstances(t *testing.T) {
	f := newFixture(t, "cip", twoClasses,
		inst("i-1", protocol.StateIdle, "", "large"),
		inst("i-2", protocol.StateRunning, "r-7", "xlarge"),
		inst("i-3", protocol.StateTerminated, "", "large"),
	)
	err := f.m.Delete(context.Background(), "cip", false)
	if err == nil {
		t.Fatal("Delete with live instances = nil, want an error")
	}
	for _, want := range []string{"pool cip", "2 live", "i-1 (idle)", "i-2 (running, run r-7)", "force_destroy"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "i-3") {
		t.Errorf("error %q lists the terminated instance i-3", err)
	}
	if m := f.log.Mutating(); len(m) > 0 {
		t.Errorf("refused Delete made mutating calls: %q", m)
	}
	if f.db.Absent || len(f.sqs.QueueNames()) != 2 {
		t.Errorf("refused Delete removed something: table absent %v, queues left %v", f.db.Absent, f.sqs.QueueNames())
	}
}

func TestDeleteWithOnlyTerminatedInstances(t *testing.T) {
	f := newFixture(t, "cip", twoClasses, inst("i-3", protocol.StateTerminated, "", "large"))
	if err := f.m.Delete(context.Background(), "cip", false); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	if calls := terminateCalls(f.log); len(calls) != 0 {
		t.Errorf("Delete called TerminateInstances %q; nothing was live", calls)
	}
	if !f.db.Absent || len(f.sqs.QueueNames()) != 0 {
		t.Errorf("after Delete: table absent %v, queues %v", f.db.Absent, f.sqs.QueueNames())
	}
}

func TestDeleteForce(t *testing.T) {
	f := newFixture(t, "cip", twoClasses,
		inst("i-1", protocol.StateIdle, "", "large"),
		inst("i-2", protocol.StateRunning, "r-7", "xlarge"),
		inst("i-3", protocol.StateTerminated, "", "large"),
		inst("i-4", protocol.StateClaimed, "r-8", "large"),
	)
	f.ec2.Gone = map[string]bool{"i-3": true} // long gone: terminating it again would fail the batch
	if err := f.m.Delete(context.Background(), "cip", true); err != nil {
		t.Fatalf("Delete(force) = %v", err)
	}
	calls := terminateCalls(f.log)
	if len(calls) != 1 {
		t.Fatalf("TerminateInstances calls = %q, want one", calls)
	}
	got := slices.Sorted(slices.Values(calls[0]))
	if want := []string{"i-1", "i-2", "i-4"}; !slices.Equal(got, want) {
		t.Errorf("TerminateInstances ids = %q, want exactly the live ones %q", got, want)
	}
	for _, id := range []string{"i-1", "i-2", "i-3", "i-4"} {
		if s := f.state(t, id); s != protocol.StateTerminated {
			t.Errorf("instance %s is %q after Delete(force), want terminated", id, s)
		}
	}
	if !f.db.Absent {
		t.Error("table still exists")
	}
	if names := f.sqs.QueueNames(); len(names) != 0 {
		t.Errorf("queues left: %v", names)
	}
	// Order: terminate, mark, then delete the queues, the table last.
	var kinds []string
	for _, c := range f.log.Mutating() {
		kind, _, _ := strings.Cut(c, " ")
		if len(kinds) == 0 || kinds[len(kinds)-1] != kind {
			kinds = append(kinds, kind)
		}
	}
	if want := []string{"TerminateInstances", "UpdateItem", "DeleteQueue", "DeleteTable"}; !slices.Equal(kinds, want) {
		t.Errorf("mutating calls in order %q, want %q (full log %q)", kinds, want, f.log.Mutating())
	}
	var marked []string
	for _, c := range f.log.Mutating() {
		if rest, ok := strings.CutPrefix(c, "UpdateItem "); ok {
			marked = append(marked, rest)
		}
	}
	if want := []string{"TYPE#INSTANCE|ID#i-1", "TYPE#INSTANCE|ID#i-2", "TYPE#INSTANCE|ID#i-4"}; !slices.Equal(slices.Sorted(slices.Values(marked)), want) {
		t.Errorf("records marked terminated: %q, want %q", marked, want)
	}
}

func TestDeleteForceTerminateFailureKeepsThePool(t *testing.T) {
	f := newFixture(t, "cip", twoClasses, inst("i-1", protocol.StateIdle, "", "large"))
	f.ec2.TerminateErrs = map[int]error{1: &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "no"}}
	err := f.m.Delete(context.Background(), "cip", true)
	if err == nil || !HasErrorCode(err, "UnauthorizedOperation") {
		t.Fatalf("Delete(force) = %v, want the EC2 error", err)
	}
	if f.db.Absent || len(f.sqs.QueueNames()) != 2 {
		t.Errorf("after a failed termination: table absent %v, queues %v", f.db.Absent, f.sqs.QueueNames())
	}
	if s := f.state(t, "i-1"); s != protocol.StateIdle {
		t.Errorf("i-1 is %q, want still idle", s)
	}
}

func TestDeleteMissingPool(t *testing.T) {
	f := newFixture(t, "cip", twoClasses)
	f.db.Absent = true
	if err := f.m.Delete(context.Background(), "cip", false); err != nil {
		t.Fatalf("Delete of a missing pool = %v, want nil", err)
	}
	if m := f.log.Mutating(); len(m) > 0 {
		t.Errorf("Delete of a missing pool made mutating calls %q", m)
	}
}

func TestDeleteWithQueueAlreadyGone(t *testing.T) {
	f := newFixture(t, "cip", twoClasses)
	delete(f.sqs.Queues, f.queue("xlarge"))
	if err := f.m.Delete(context.Background(), "cip", false); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	if !f.db.Absent || len(f.sqs.QueueNames()) != 0 {
		t.Errorf("after Delete: table absent %v, queues %v", f.db.Absent, f.sqs.QueueNames())
	}
}

func TestUpdateRefusesToRemoveBusyClass(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(f *fixture)
		insts   []protocol.Instance
		wantErr []string
	}{
		{name: "visible messages", setup: func(f *fixture) { f.queueMessages(f.queue("xlarge"), 2, f.sqs.Clock) },
			wantErr: []string{`"xlarge"`, "2 queued runner message(s)", "0 live instance(s)"}},
		{name: "in-flight message", setup: func(f *fixture) { f.sqs.AddInFlight(f.queue("xlarge"), "{}", time.Minute) },
			wantErr: []string{`"xlarge"`, "1 queued runner message(s)"}},
		{name: "delayed message", setup: func(f *fixture) { f.queueMessages(f.queue("xlarge"), 3, f.sqs.Clock.Add(time.Minute)) },
			wantErr: []string{`"xlarge"`, "3 queued runner message(s)"}},
		{name: "live instance, empty queue",
			insts:   []protocol.Instance{inst("i-9", protocol.StateRunning, "r-1", "xlarge")},
			wantErr: []string{`"xlarge"`, "1 live instance(s)", "i-9 (running, run r-1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "cip", twoClasses, append(tt.insts,
				inst("i-1", protocol.StateIdle, "", "large"), // a kept class's runner is no obstacle
				inst("i-8", protocol.StateTerminated, "", "xlarge"))...)
			f.queueMessages(f.queue("large"), 5, f.sqs.Clock)
			if tt.setup != nil {
				tt.setup(f)
			}
			configBefore := f.db.Get(protocol.TypeMetadata, protocol.PoolConfigID)
			spec := Spec{
				Name: "cip",
				ResourceClasses: map[string]protocol.ResourceClass{
					"large":   {CPU: 2, MemoryMiB: 4096},
					"2xlarge": {CPU: 8, MemoryMiB: 16384}, // added: must not be created either
				},
				Tags: map[string]string{"team": "ci"},
			}
			st, err := f.m.Update(context.Background(), spec)
			if err == nil {
				t.Fatalf("Update = %+v, nil; want a refusal", st)
			}
			for _, want := range append(tt.wantErr, "force_destroy") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if strings.Contains(err.Error(), `"large"`) || strings.Contains(err.Error(), "i-8") || strings.Contains(err.Error(), "i-1") {
				t.Errorf("error %q blames a kept class or a terminated instance", err)
			}
			if m := f.log.Mutating(); len(m) > 0 {
				t.Errorf("refused Update made mutating calls: %q", m)
			}
			if f.queue("xlarge") == "" || f.queue("2xlarge") != "" {
				t.Error("refused Update changed the queues")
			}
			if !reflect.DeepEqual(configBefore, f.db.Get(protocol.TypeMetadata, protocol.PoolConfigID)) {
				t.Error("refused Update rewrote the config item")
			}
		})
	}
}

func TestUpdateRefusalNamesEveryBusyClass(t *testing.T) {
	classes := maps.Clone(twoClasses)
	classes["2xlarge"] = protocol.ResourceClass{CPU: 8, MemoryMiB: 16384}
	f := newFixture(t, "cip", classes, inst("i-5", protocol.StateIdle, "", "2xlarge"))
	f.queueMessages(f.queue("xlarge"), 1, f.sqs.Clock)
	_, err := f.m.Update(context.Background(), Spec{Name: "cip", ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}}})
	if err == nil {
		t.Fatal("Update = nil error, want a refusal")
	}
	for _, want := range []string{`"xlarge"`, `"2xlarge"`, "i-5 (idle)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if m := f.log.Mutating(); len(m) > 0 {
		t.Errorf("refused Update made mutating calls: %q", m)
	}
}

func TestUpdateRemovesIdleClass(t *testing.T) {
	// Nothing queued, nothing live: no force needed.
	f := newFixture(t, "cip", twoClasses, inst("i-8", protocol.StateTerminated, "", "xlarge"))
	st, err := f.m.Update(context.Background(), Spec{Name: "cip", ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}}})
	if err != nil {
		t.Fatalf("Update = %v", err)
	}
	if f.queue("xlarge") != "" {
		t.Error("the removed class's queue still exists")
	}
	if _, ok := st.QueueURLs["xlarge"]; ok {
		t.Errorf("status still lists the xlarge queue: %v", st.QueueURLs)
	}
	if calls := terminateCalls(f.log); len(calls) != 0 {
		t.Errorf("TerminateInstances called %q", calls)
	}
}

func TestUpdateForceDestroyRemovesBusyClass(t *testing.T) {
	f := newFixture(t, "cip", twoClasses,
		inst("i-1", protocol.StateIdle, "", "large"),
		inst("i-2", protocol.StateRunning, "r-7", "xlarge"),
		inst("i-3", protocol.StateIdle, "", "xlarge"),
		inst("i-8", protocol.StateTerminated, "", "xlarge"),
	)
	f.ec2.Gone = map[string]bool{"i-8": true}
	f.queueMessages(f.queue("xlarge"), 1, f.sqs.Clock)
	spec := Spec{
		Name: "cip",
		ResourceClasses: map[string]protocol.ResourceClass{
			"large":   {CPU: 2, MemoryMiB: 4096},
			"2xlarge": {CPU: 8, MemoryMiB: 16384},
		},
		IdleTimeout:  7 * time.Minute,
		MaxRuntime:   2 * time.Hour,
		Tags:         map[string]string{"team": "ci"},
		ForceDestroy: true,
	}
	st, err := f.m.Update(context.Background(), spec)
	if err != nil {
		t.Fatalf("Update(force) = %v", err)
	}
	calls := terminateCalls(f.log)
	if len(calls) != 1 {
		t.Fatalf("TerminateInstances calls = %q, want one", calls)
	}
	if got, want := slices.Sorted(slices.Values(calls[0])), []string{"i-2", "i-3"}; !slices.Equal(got, want) {
		t.Errorf("terminated %q, want the removed class's live instances %q", got, want)
	}
	for id, want := range map[string]string{"i-1": protocol.StateIdle, "i-2": protocol.StateTerminated, "i-3": protocol.StateTerminated, "i-8": protocol.StateTerminated} {
		if got := f.state(t, id); got != want {
			t.Errorf("instance %s is %q, want %q", id, got, want)
		}
	}
	if f.queue("xlarge") != "" || f.queue("2xlarge") == "" || f.queue("large") == "" {
		t.Errorf("queues after Update: %v, want cip-large and cip-2xlarge", f.sqs.QueueNames())
	}
	for _, class := range []string{"large", "2xlarge"} {
		want := map[string]string{"team": "ci", protocol.TagPool: "cip", protocol.TagClass: class}
		if got := f.sqs.Tags(f.queue(class)); !maps.Equal(got, want) {
			t.Errorf("queue %s tags = %v, want %v", class, got, want)
		}
	}
	if !maps.Equal(f.db.Tags, spec.Tags) {
		t.Errorf("table tags = %v, want %v", f.db.Tags, spec.Tags)
	}
	stored, err := protocol.PoolConfigFromItem(f.db.Get(protocol.TypeMetadata, protocol.PoolConfigID))
	if err != nil {
		t.Fatalf("stored config: %v", err)
	}
	if got := slices.Sorted(maps.Keys(stored.ResourceClasses)); !slices.Equal(got, []string{"2xlarge", "large"}) {
		t.Errorf("stored classes = %q", got)
	}
	if got := slices.Sorted(maps.Keys(stored.QueueURLs)); !slices.Equal(got, []string{"2xlarge", "large"}) {
		t.Errorf("stored queue URLs = %v", stored.QueueURLs)
	}
	if stored.QueueURLs["2xlarge"] != f.queue("2xlarge") {
		t.Errorf("stored 2xlarge URL %q, queue is %q", stored.QueueURLs["2xlarge"], f.queue("2xlarge"))
	}
	if time.Duration(stored.IdleTimeout) != 7*time.Minute || time.Duration(stored.MaxRuntime) != 2*time.Hour {
		t.Errorf("stored lifetimes %v / %v", time.Duration(stored.IdleTimeout), time.Duration(stored.MaxRuntime))
	}
	if got := slices.Sorted(maps.Keys(st.QueueURLs)); !slices.Equal(got, []string{"2xlarge", "large"}) {
		t.Errorf("returned status queues = %v", st.QueueURLs)
	}
	// Terminate before deleting the queue that advertised them.
	log := f.log.Mutating()
	term := slices.IndexFunc(log, func(c string) bool { return strings.HasPrefix(c, "TerminateInstances ") })
	del := slices.IndexFunc(log, func(c string) bool { return strings.HasPrefix(c, "DeleteQueue ") })
	if term < 0 || del < 0 || term > del {
		t.Errorf("mutating calls %q: want TerminateInstances before DeleteQueue", log)
	}
}

func TestUpdateMissingPool(t *testing.T) {
	f := newFixture(t, "cip", twoClasses)
	f.db.Absent = true
	_, err := f.m.Update(context.Background(), Spec{Name: "cip", ResourceClasses: twoClasses})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("Update of a missing pool = %v, want ErrNotFound", err)
	}
	if m := f.log.Mutating(); len(m) > 0 {
		t.Errorf("mutating calls %q", m)
	}
}

// Pools created before the table had a TTL get one at their next update,
// and only once.
func TestUpdateEnablesTTLOnce(t *testing.T) {
	f := newFixture(t, "cip", twoClasses)
	spec := Spec{Name: "cip", ResourceClasses: twoClasses}
	for i := range 2 {
		if _, err := f.m.Update(context.Background(), spec); err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
	}
	if f.db.TTLAttribute != protocol.AttrExpiresAt {
		t.Errorf("TTL attribute %q, want %q", f.db.TTLAttribute, protocol.AttrExpiresAt)
	}
	n := 0
	for _, c := range f.log.Calls() {
		if c.Action == "UpdateTimeToLive" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("UpdateTimeToLive called %d times, want once", n)
	}
}

// Update writes the runners' ARN prefix from the caller's account and
// partition and the clients' region.
func TestUpdateWritesInstanceARNPrefix(t *testing.T) {
	f := newFixture(t, "cip", twoClasses)
	f.db.Put(func() protocol.PoolConfig {
		c := f.cfg
		c.InstanceARNPrefix = "arn:aws:ec2:us-east-1:000000000000:instance/"
		return c
	}().Item(testNow))
	f.sts.Account, f.sts.Arn = "210987654321", "arn:aws-cn:sts::210987654321:assumed-role/ci/session"
	f.m.Region = "cn-north-1"
	st, err := f.m.Update(context.Background(), Spec{Name: "cip", ResourceClasses: twoClasses})
	if err != nil {
		t.Fatal(err)
	}
	const want = "arn:aws-cn:ec2:cn-north-1:210987654321:instance/"
	if st.Config.InstanceARNPrefix != want {
		t.Errorf("instance ARN prefix %q, want %q", st.Config.InstanceARNPrefix, want)
	}
}

// Without a usable caller identity nothing changes.
func TestUpdateWithoutCallerIdentity(t *testing.T) {
	for name, setup := range map[string]func(f *fixture){
		"STS fails":          func(f *fixture) { f.sts.Err = errors.New("ExpiredToken") },
		"caller not an ARN":  func(f *fixture) { f.sts.Arn = "user/ci" },
		"no region":          func(f *fixture) { f.m.Region = "" },
		"account not digits": func(f *fixture) { f.sts.Account = "local" },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, "cip", twoClasses)
			setup(f)
			_, err := f.m.Update(context.Background(), Spec{Name: "cip", ResourceClasses: map[string]protocol.ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}}})
			if err == nil || !strings.Contains(err.Error(), "runners") {
				t.Fatalf("Update = %v, want an error about the runners' account or ARNs", err)
			}
			if m := f.log.Mutating(); len(m) > 0 {
				t.Errorf("mutating calls %q", m)
			}
		})
	}
}

// A pool with metrics settings gets its log stream at its apply, and the
// settings in its config item; a log group that does not exist fails the
// apply before anything changes.
func TestUpdateCreatesTheMetricsStream(t *testing.T) {
	f := newFixture(t, "cip", twoClasses)
	logs := awsfake.NewLogs("/ec2runners/metrics")
	f.m.Logs = logs
	spec := Spec{Name: "cip", ResourceClasses: twoClasses, Metrics: &protocol.MetricsConfig{Namespace: "EC2Runners", LogGroup: "/ec2runners/metrics"}}
	for i := range 2 {
		st, err := f.m.Update(context.Background(), spec)
		if err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
		if !reflect.DeepEqual(st.Config.Metrics, spec.Metrics) {
			t.Errorf("config's metrics %+v, want %+v", st.Config.Metrics, spec.Metrics)
		}
	}
	if n := logs.Calls("CreateLogStream"); n != 2 {
		t.Errorf("%d CreateLogStream calls, want one per apply", n)
	}
	if streams := logs.Streams("/ec2runners/metrics"); !slices.Equal(streams, []string{"cip"}) {
		t.Errorf("log streams %v, want the pool's, cip", streams)
	}

	g := newFixture(t, "cip", twoClasses)
	g.m.Logs = awsfake.NewLogs()
	_, err := g.m.Update(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "log group /ec2runners/metrics does not exist") {
		t.Fatalf("Update into a missing log group: %v", err)
	}
	if m := g.log.Mutating(); len(m) > 0 {
		t.Errorf("mutating calls %q", m)
	}
}

// The access policy goes into the config item, where the broker reads it.
// A policy the config item could not hold (here, naming the class the same
// update removes) fails the update before anything changes: written, it
// would leave the pool's config unreadable to every claim.
func TestUpdateWritesTheAccessPolicy(t *testing.T) {
	f := newFixture(t, "cip", twoClasses)
	access := &protocol.Access{Repositories: []protocol.RepositoryAccess{
		{Repository: "octo/app", Workflows: []string{"octo/app/.github/workflows/*"}, MaxRunners: 4, MaxRuntime: protocol.Duration(30 * time.Minute), ResourceClasses: []string{"xlarge"}},
	}}
	spec := Spec{Name: "cip", ResourceClasses: twoClasses, MaxRuntime: time.Hour, Access: access}
	st, err := f.m.Update(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.Config.Access, access) {
		t.Errorf("config's access %+v, want %+v", st.Config.Access, access)
	}
	f.log.Reset()
	spec.ResourceClasses = map[string]protocol.ResourceClass{"large": twoClasses["large"]}
	_, err = f.m.Update(context.Background(), spec)
	if want := `access repositories[0]: resource class "xlarge" is not one of the pool's: large`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Update = %v, want an error containing %q", err, want)
	}
	if calls := f.log.Calls(); len(calls) > 0 {
		t.Errorf("calls %v, want none", calls)
	}
}
