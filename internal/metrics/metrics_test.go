package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

var now = time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.UTC)

var target = metrics.Target{Namespace: metrics.DefaultNamespace, LogGroup: "/ec2runners/metrics", Stream: "ci"}

// decoded is an event's EMF document as CloudWatch reads it.
func decoded(t *testing.T, msg string) map[string]any {
	t.Helper()
	if problem := awslimits.EMFProblem(msg); problem != "" {
		t.Fatalf("not an EMF document CloudWatch extracts metrics from (%s): %s", problem, msg)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(msg), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// metricOf is an EMF document's value of metric, with its dimensions.
func metricOf(t *testing.T, msg string) (dims map[string]string, values map[string]float64, units map[string]string) {
	t.Helper()
	doc := decoded(t, msg)
	dir := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if dir["Namespace"] != metrics.DefaultNamespace {
		t.Errorf("namespace %v", dir["Namespace"])
	}
	dims, values, units = map[string]string{}, map[string]float64{}, map[string]string{}
	for _, k := range dir["Dimensions"].([]any)[0].([]any) {
		dims[k.(string)] = doc[k.(string)].(string)
	}
	for _, m := range dir["Metrics"].([]any) {
		def := m.(map[string]any)
		values[def["Name"].(string)] = doc[def["Name"].(string)].(float64)
		units[def["Name"].(string)], _ = def["Unit"].(string)
	}
	return dims, values, units
}

func TestClaimEvents(t *testing.T) {
	c := metrics.Claim{Pool: "ci", Class: "large", RunID: "run-1",
		Sources:      map[metrics.Source]int{metrics.SourceHot: 2, metrics.SourceFleet: 1},
		TimeToRunner: 1500 * time.Millisecond,
		Checks:       []metrics.Check{{Instance: "i-1", Reason: metrics.ReasonNoHeartbeat}, {Instance: "i-2", Reason: metrics.ReasonRegistrationTimeout}, {Instance: "i-3", Reason: metrics.ReasonNoHeartbeat}},
	}
	events := c.Events(now)
	var got []string
	for _, e := range events {
		got = append(got, e.String())
	}
	want := []string{
		"Pool=ci Class=large Claims:1 TimeToRunner:1500 WarmHitRate:66.66666666666667 ",
		"Pool=ci Class=large Source=hot RunnersClaimed:2 ",
		"Pool=ci Class=large Source=fleet RunnersClaimed:1 ",
		"Pool=ci Class=large Reason=no-heartbeat FailedChecks:2 ",
		"Pool=ci Class=large Reason=registration-timeout FailedChecks:1 ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	msg, err := metrics.Encode(metrics.DefaultNamespace, events[0])
	if err != nil {
		t.Fatal(err)
	}
	dims, values, units := metricOf(t, msg)
	if dims["Pool"] != "ci" || dims["Class"] != "large" || len(dims) != 2 || units["TimeToRunner"] != "Milliseconds" || units["WarmHitRate"] != "Percent" || values["Claims"] != 1 {
		t.Errorf("claim event %s", msg)
	}
	doc := decoded(t, msg)
	if doc["RunId"] != "run-1" || doc["Hot"] != 2.0 || doc["Stopped"] != 0.0 || doc["Fleet"] != 1.0 {
		t.Errorf("claim event's properties: %s", msg)
	}
	if ts := doc["_aws"].(map[string]any)["Timestamp"]; ts != float64(now.UnixMilli()) {
		t.Errorf("timestamp %v, want %d", ts, now.UnixMilli())
	}
	checks, _ := metrics.Encode(metrics.DefaultNamespace, events[3])
	if doc := decoded(t, checks); strings.Join(toStrings(doc["Instances"]), ",") != "i-1,i-3" {
		t.Errorf("failed checks event names the instances %v, want i-1,i-3", doc["Instances"])
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// A failed claim counts as such, with its failed checks: no sources, no
// time to runner, no hit rate.
func TestClaimEvents_failed(t *testing.T) {
	events := metrics.Claim{Pool: "ci", Class: "large", RunID: "run-1", Failed: true, Sources: map[metrics.Source]int{metrics.SourceHot: 1},
		Checks: []metrics.Check{{Instance: "i-1", Reason: metrics.ReasonRegistrationFailed}}}.Events(now)
	if len(events) != 2 || events[0].String() != "Pool=ci Class=large ClaimsFailed:1 " || events[1].String() != "Pool=ci Class=large Reason=registration-failed FailedChecks:1 " {
		t.Errorf("events %v", events)
	}
}

func TestReleaseAndScanEvents(t *testing.T) {
	rel := metrics.Release{Pool: "ci", Class: "large", RunID: "run-1", Outcomes: map[metrics.Outcome]int{metrics.OutcomeHot: 1, metrics.OutcomeTerminated: 2},
		Checks: []metrics.Check{{Instance: "i-9", Reason: metrics.ReasonReleaseUnconfirmed}}}.Events(now)
	var got []string
	for _, e := range rel {
		got = append(got, e.String())
	}
	if strings.Join(got, "|") != "Pool=ci Class=large Outcome=hot RunnersReleased:1 |Pool=ci Class=large Outcome=terminated RunnersReleased:2 |Pool=ci Class=large Reason=release-unconfirmed FailedChecks:1 " {
		t.Errorf("release events %v", got)
	}
	// Every state of every class counted, zeros included: a gauge.
	scan := metrics.Scan{Pool: "ci", ByClass: map[string]map[metrics.State]int{"xlarge": {metrics.StateIdle: 3}, "large": {}}}.Events(now)
	got = nil
	for _, e := range scan {
		got = append(got, e.String())
	}
	want := "Pool=ci Class=large State=idle Runners:0 |Pool=ci Class=large State=stopped Runners:0 |Pool=ci Class=large State=claimed Runners:0 |" +
		"Pool=ci Class=xlarge State=idle Runners:3 |Pool=ci Class=xlarge State=stopped Runners:0 |Pool=ci Class=xlarge State=claimed Runners:0 "
	if strings.Join(got, "|") != want {
		t.Errorf("scan events\n%v\nwant\n%v", strings.Join(got, "|"), want)
	}
}

// A claim's events are one PutLogEvents to the pool's stream, every one an
// EMF document; nothing is sent when the pool publishes no metrics.
func TestPublish(t *testing.T) {
	ctx := context.Background()
	logs := awsfake.NewLogs(target.LogGroup)
	if err := metrics.EnsureStream(ctx, logs, target); err != nil {
		t.Fatal(err)
	}
	if err := metrics.EnsureStream(ctx, logs, target); err != nil {
		t.Fatalf("ensuring an existing stream: %v", err)
	}
	p := &metrics.Publisher{Logs: logs}
	events := metrics.Claim{Pool: "ci", Class: "large", RunID: "run-1", Sources: map[metrics.Source]int{metrics.SourceStopped: 1}}.Events(now)
	if err := p.Publish(ctx, target, events); err != nil {
		t.Fatal(err)
	}
	if n := logs.Calls("PutLogEvents"); n != 1 {
		t.Errorf("%d PutLogEvents calls, want 1", n)
	}
	msgs := logs.Messages(target.LogGroup, target.Stream)
	if len(msgs) != len(events) {
		t.Fatalf("%d events in the stream, want %d", len(msgs), len(events))
	}
	for _, m := range msgs {
		decoded(t, m)
	}
	if err := p.Publish(ctx, metrics.Target{Stream: "ci"}, events); err != nil || logs.Calls("PutLogEvents") != 1 {
		t.Errorf("a pool without metrics published: %v, %d calls", err, logs.Calls("PutLogEvents"))
	}
	if err := p.Publish(ctx, target, nil); err != nil || logs.Calls("PutLogEvents") != 1 {
		t.Errorf("no events published: %v, %d calls", err, logs.Calls("PutLogEvents"))
	}
}

// Publishing reports what went wrong and the way out, and never hangs on
// the caller's context: what it reports on has happened.
func TestPublish_errors(t *testing.T) {
	ctx := context.Background()
	events := metrics.Scan{Pool: "ci", ByClass: map[string]map[metrics.State]int{"large": {}}}.Events(now)
	logs := awsfake.NewLogs(target.LogGroup)
	err := (&metrics.Publisher{Logs: logs}).Publish(ctx, target, events)
	if err == nil || !strings.Contains(err.Error(), "its log stream ci does not exist (the pool's apply creates it)") {
		t.Errorf("publishing to a missing stream: %v", err)
	}
	if err := metrics.EnsureStream(ctx, awsfake.NewLogs(), target); err == nil || !strings.Contains(err.Error(), "log group /ec2runners/metrics does not exist") {
		t.Errorf("a stream in a missing log group: %v", err)
	}
	if err := metrics.EnsureStream(ctx, logs, target); err != nil {
		t.Fatal(err)
	}
	denied := &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: logs:PutLogEvents"}
	logs.Fail("PutLogEvents", denied)
	if err := (&metrics.Publisher{Logs: logs}).Publish(ctx, target, events); !errors.Is(err, denied) {
		t.Errorf("a refused PutLogEvents: %v", err)
	}
	if err := (*metrics.Publisher)(nil).Publish(ctx, target, events); err == nil {
		t.Error("publishing without a client succeeded")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	logs.Fail("PutLogEvents", nil)
	if err := (&metrics.Publisher{Logs: logs}).Publish(cancelled, target, events); err != nil {
		t.Errorf("publishing after the caller's context ended: %v", err)
	}
}

// Batches keep to PutLogEvents' limits: at most 10,000 events and 1 MB a
// batch, in chronological order, spanning at most 24 hours.
func TestBatches(t *testing.T) {
	var events []metrics.Event
	for i := range 10001 {
		events = append(events, metrics.Event{Time: now.Add(-time.Duration(i) * time.Millisecond), Dimensions: []metrics.Dimension{{"Pool", "ci"}},
			Values: []metrics.Value{{Name: "Runners", Unit: "Count", Value: 1}}})
	}
	batches, err := metrics.Batches(metrics.DefaultNamespace, events)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, b := range batches {
		total += len(b)
		size := 0
		for _, e := range b {
			size += len(aws.ToString(e.Message)) + awslimits.LogEventOverhead
		}
		if len(b) > awslimits.MaxLogEvents || size > awslimits.MaxLogBatchBytes {
			t.Errorf("a batch of %d events, %d bytes", len(b), size)
		}
		for i := 1; i < len(b); i++ {
			if aws.ToInt64(b[i].Timestamp) < aws.ToInt64(b[i-1].Timestamp) {
				t.Fatal("a batch out of chronological order")
			}
		}
	}
	if total != len(events) {
		t.Errorf("%d events batched, want %d", total, len(events))
	}
	small := events[:20]
	if batches, err := metrics.Batches(metrics.DefaultNamespace, small); err != nil || len(batches) != 1 {
		t.Errorf("20 small events in %d batches (%v), want one", len(batches), err)
	}
	big := strings.Repeat("x", 400_000)
	large := []metrics.Event{
		{Time: now, Values: []metrics.Value{{Name: "a", Value: 1}}, Properties: map[string]any{"p": big}},
		{Time: now, Values: []metrics.Value{{Name: "a", Value: 1}}, Properties: map[string]any{"p": big}},
		{Time: now, Values: []metrics.Value{{Name: "a", Value: 1}}, Properties: map[string]any{"p": big}},
		{Time: now.Add(25 * time.Hour), Values: []metrics.Value{{Name: "a", Value: 1}}},
	}
	if batches, err = metrics.Batches(metrics.DefaultNamespace, large); err != nil || len(batches) != 3 || len(batches[0]) != 2 || len(batches[2]) != 1 {
		t.Errorf("large events in %d batches (%v), want 2 + 1 by size, and 1 by span", len(batches), err)
	}
	if _, err := metrics.Batches(metrics.DefaultNamespace, []metrics.Event{{Time: now, Properties: map[string]any{"p": strings.Repeat("x", 1<<20)}}}); err == nil {
		t.Error("an event over 1 MB was batched")
	}
}

func TestEncode_refusesWhatEMFDoesNotTake(t *testing.T) {
	var values []metrics.Value
	for i := range awslimits.MaxEMFMetrics + 1 {
		values = append(values, metrics.Value{Name: strings.Repeat("m", i+1), Value: 1})
	}
	if _, err := metrics.Encode("ns", metrics.Event{Time: now, Values: values}); err == nil {
		t.Error("101 metrics in one event encoded")
	}
	if _, err := metrics.Encode("ns", metrics.Event{Time: now, Dimensions: []metrics.Dimension{{"Pool", "a"}}, Properties: map[string]any{"Pool": "b"}}); err == nil {
		t.Error("a member named twice encoded")
	}
}

// Every event a claim, a release or a scan makes is a metric of the
// Definitions (the guide's table, the dashboard's graphs), with its
// dimensions and unit.
func TestEventsAreDefined(t *testing.T) {
	defs := map[string]metrics.Definition{}
	for _, d := range metrics.Definitions {
		defs[d.Name] = d
	}
	var events []metrics.Event
	for _, failed := range []bool{false, true} {
		events = append(events, metrics.Claim{Pool: "p", Class: "c", Failed: failed, TimeToRunner: time.Second,
			Sources: map[metrics.Source]int{metrics.SourceHot: 1, metrics.SourceStopped: 1, metrics.SourceFleet: 1},
			Checks:  []metrics.Check{{Instance: "i", Reason: metrics.ReasonOther}}}.Events(now)...)
	}
	events = append(events, metrics.Release{Pool: "p", Class: "c", Outcomes: map[metrics.Outcome]int{metrics.OutcomeHot: 1, metrics.OutcomeStopped: 1, metrics.OutcomeIdle: 1, metrics.OutcomeTerminated: 1}}.Events(now)...)
	events = append(events, metrics.Scan{Pool: "p", ByClass: map[string]map[metrics.State]int{"c": {}}}.Events(now)...)
	seen := map[string]bool{}
	for _, e := range events {
		var dims []string
		for _, d := range e.Dimensions {
			dims = append(dims, d.Name)
		}
		for _, v := range e.Values {
			d, ok := defs[v.Name]
			if !ok || strings.Join(d.Dimensions, ",") != strings.Join(dims, ",") || d.Unit != v.Unit {
				t.Errorf("%s with dimensions %v and unit %s: not as Definitions has it (%+v)", v.Name, dims, v.Unit, d)
			}
			seen[v.Name] = true
		}
	}
	for name := range defs {
		if !seen[name] {
			t.Errorf("%s: defined, never published", name)
		}
	}
}
