package claim

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

// withMetrics gives the env's pool metrics settings, its log stream in a
// fake CloudWatch Logs, and the Claimer a publisher; the warnings the
// Claimer gives are collected.
func (e *env) withMetrics() (*awsfake.Logs, func() []string) {
	e.t.Helper()
	logs := e.w.Metrics(&e.cfg)
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

const testLogGroup = poolworld.MetricsLogGroup

var published, wantPublished = poolworld.Published, poolworld.WantPublished

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
