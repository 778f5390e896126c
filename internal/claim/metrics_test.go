package claim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

const testLogGroup = "/ec2runners/metrics"

// withMetrics gives the env's pool metrics settings, its log stream in a
// fake CloudWatch Logs, and the Claimer a publisher; the warnings the
// Claimer gives are collected.
func (e *env) withMetrics() (*awsfake.Logs, func() []string) {
	e.t.Helper()
	logs := awsfake.NewLogs(testLogGroup)
	e.cfg.Metrics = &protocol.MetricsConfig{Namespace: "CI/Runners", LogGroup: testLogGroup}
	e.writeConfig()
	if err := metrics.EnsureStream(e.t.Context(), logs, metricsTarget(e.cfg)); err != nil {
		e.t.Fatal(err)
	}
	e.c.Metrics = &metrics.Publisher{Logs: logs}
	var mu sync.Mutex
	var warnings []string
	e.c.Warn = func(summary, detail string) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, summary+": "+detail)
	}
	return logs, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(warnings)
	}
}

// published are the metric values of the pool's events, one line per
// event ("Dim=value ... Metric=value"), sorted; every event must be EMF
// CloudWatch extracts metrics from.
func published(t *testing.T, logs *awsfake.Logs) []string {
	t.Helper()
	var out []string
	for _, msg := range logs.Messages(testLogGroup, testPool) {
		if problem := awslimits.EMFProblem(msg); problem != "" {
			t.Fatalf("not EMF (%s): %s", problem, msg)
		}
		var doc map[string]any
		_ = json.Unmarshal([]byte(msg), &doc)
		dir := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		if dir["Namespace"] != "CI/Runners" {
			t.Errorf("namespace %v", dir["Namespace"])
		}
		var parts []string
		for _, k := range dir["Dimensions"].([]any)[0].([]any) {
			if k != metrics.DimPool {
				parts = append(parts, fmt.Sprintf("%s=%v", k, doc[k.(string)]))
			}
		}
		for _, m := range dir["Metrics"].([]any) {
			name := m.(map[string]any)["Name"].(string)
			if name == metrics.TimeToRunner {
				parts = append(parts, name+">0="+fmt.Sprint(doc[name].(float64) > 0))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s=%v", name, doc[name]))
		}
		out = append(out, strings.Join(parts, " "))
	}
	slices.Sort(out)
	return out
}

func wantPublished(t *testing.T, logs *awsfake.Logs, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := published(t, logs); !slices.Equal(got, want) {
		t.Errorf("published:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// A claim of one hot runner and one launched publishes its count, the
// runners by source, the warm hit rate and the time to runner, in one
// PutLogEvents; a runner that failed its checks on the way is counted by
// reason.
func TestCreatePublishesMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs, warnings := e.withMetrics()
	e.seedIdle("i-0", noHeartbeat)
	e.seedIdle("i-1", healthy)
	if _, err := e.create(2); err != nil {
		t.Fatal(err)
	}
	wantPublished(t, logs,
		"Class=large Claims=1 TimeToRunner>0=true WarmHitRate=50",
		"Class=large Source=hot RunnersClaimed=1",
		"Class=large Source=fleet RunnersClaimed=1",
		"Class=large Reason=no-heartbeat FailedChecks=1",
	)
	if n := logs.Calls("PutLogEvents"); n != 1 {
		t.Errorf("%d PutLogEvents, want 1", n)
	}
	if w := warnings(); len(w) > 0 {
		t.Errorf("warnings %v", w)
	}
}

// A failed claim counts as such, with the checks that failed.
func TestCreatePublishesFailedClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs, _ := e.withMetrics()
	e.seedIdle("i-1", registrationFails)
	if _, err := e.create(1, func(r *Request) { r.FleetFallback = false }); err == nil {
		t.Fatal("the claim succeeded")
	}
	wantPublished(t, logs, "Class=large ClaimsFailed=1", "Class=large Reason=registration-failed FailedChecks=1")
}

// Metrics never fail a claim nor a release: a refused PutLogEvents is a
// warning, and the claim holds its runners.
func TestMetricsFailureIsOnlyAWarning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs, warnings := e.withMetrics()
	logs.Fail("PutLogEvents", &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: logs:PutLogEvents"})
	e.seedIdle("i-1", healthy)
	res, err := e.create(1)
	if err != nil || res.Reused != 1 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateRunning {
		t.Errorf("i-1 is %s, want running", r.State)
	}
	if _, err := e.release(); err != nil {
		t.Fatal(err)
	}
	w := warnings()
	if len(w) != 2 || !strings.Contains(w[0], "Metrics of pool testpool not published") || !strings.Contains(w[0], "AccessDeniedException") {
		t.Errorf("warnings %q, want one for the claim and one for the release", w)
	}
}

// A release counts its runners by outcome: kept hot for the class's hot
// target, back in the pool until the idle timeout, terminated when it does
// not confirm its release (a failed check).
func TestReleasePublishesOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 1}}
	logs, _ := e.withMetrics()
	e.seedIdle("i-1", healthy)
	e.seedIdle("i-2", healthy)
	e.seedIdle("i-3", neverConfirmsRelease)
	if _, err := e.create(3); err != nil {
		t.Fatal(err)
	}
	before := len(logs.Messages(testLogGroup, testPool))
	if _, err := e.release(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range published(t, logs) {
		if strings.Contains(line, "RunnersReleased") || strings.Contains(line, "FailedChecks") {
			got = append(got, line)
		}
	}
	want := []string{"Class=large Outcome=hot RunnersReleased=1", "Class=large Outcome=idle RunnersReleased=1",
		"Class=large Outcome=terminated RunnersReleased=1", "Class=large Reason=release-unconfirmed FailedChecks=1"}
	if !slices.Equal(got, want) {
		t.Errorf("release published %v, want %v", got, want)
	}
	if n := len(logs.Messages(testLogGroup, testPool)) - before; n != 4 {
		t.Errorf("%d events of the release, want 4", n)
	}
}

// A reap counts the pool's runners by class and state as it leaves them,
// zeros included, and the classes with warm targets even when empty.
func TestReapPublishesRunnerStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"xlarge": {Stopped: 1}}
	logs, _ := e.withMetrics()
	now := time.Now()
	for _, r := range []protocol.Instance{
		{ID: "i-1", State: protocol.StateIdle, Threshold: protocol.FormatTime(now.Add(time.Hour))},
		{ID: "i-2", State: protocol.StateRunning, RunID: "run-9", Threshold: protocol.FormatTime(now.Add(time.Hour))},
		{ID: "i-3", State: protocol.StateIdle, Threshold: protocol.FormatTime(now.Add(-time.Hour))}, // past its deadline: reaped
		{ID: "i-4", State: protocol.StateIdle, Threshold: protocol.FormatTime(now.Add(-time.Hour)), StopUntil: protocol.FormatTime(now.Add(time.Hour))},
	} {
		e.ec2.Launch(r.ID, now)
		e.seedRecord(r, healthy)
	}
	if _, err := e.c.Reap(t.Context(), testPool); err != nil {
		t.Fatal(err)
	}
	wantPublished(t, logs,
		"Class=large State=idle Runners=1", "Class=large State=stopped Runners=1", "Class=large State=claimed Runners=1",
		"Class=xlarge State=idle Runners=0", "Class=xlarge State=stopped Runners=0", "Class=xlarge State=claimed Runners=0",
	)
}

// Without metrics settings nothing is published, and no call is made.
func TestNoMetricsWithoutSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs := awsfake.NewLogs(testLogGroup)
	e.c.Metrics = &metrics.Publisher{Logs: logs}
	e.seedIdle("i-1", healthy)
	if _, err := e.create(1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.release(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Reap(t.Context(), testPool); err != nil {
		t.Fatal(err)
	}
	if n := logs.Calls("PutLogEvents"); n != 0 {
		t.Errorf("%d PutLogEvents for a pool without metrics settings", n)
	}
}

// Every failed check has its reason.
func TestCheckReasons(t *testing.T) {
	for err, want := range map[error]metrics.Reason{
		failCheck(metrics.ReasonNoHeartbeat, "x"):                                 metrics.ReasonNoHeartbeat,
		lateError{failCheck(metrics.ReasonRegistrationTimeout, "x")}:              metrics.ReasonRegistrationTimeout,
		fmt.Errorf("new instance: %w", failCheck(metrics.ReasonNotPrepared, "x")): metrics.ReasonNotPrepared,
		fmt.Errorf("something else"):                                              metrics.ReasonOther,
	} {
		if got := checkReason(err); got != want {
			t.Errorf("checkReason(%v) = %s, want %s", err, got, want)
		}
	}
}
