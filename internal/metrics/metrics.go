// Package metrics tells a team how its pool serves it: per pool and
// resource class, the runners claims get by source (hot, stopped, fleet),
// the warm hit rate, the time to runner, what releases do with runners,
// the runners by state, and the checks runners fail, with their reasons.
//
// They are published to CloudWatch as log events in the embedded metric
// format (EMF): CloudWatch Logs turns each event into metric values, and
// keeps the event itself (with the run id) for Logs Insights. One
// PutLogEvents per claim, release or scan, to the pool's log stream (named
// after the pool) in the log group of the pool's settings. EMF rather than
// PutMetricData because it costs less per claim: CloudWatch bills the
// metrics alike either way, and a claim's events (about 1 KB) cost about
// $0.0000005 of log ingestion where a PutMetricData request costs $0.00001
// (docs/guides/metrics.md has the arithmetic).
//
// The package is plain Go behind a small interface of the CloudWatch Logs
// client; internal/claim calls it. Publishing never fails what it reports
// on: its errors are returned for the caller to warn about.
package metrics

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// DefaultNamespace is the CloudWatch namespace of the metrics unless a
// pool names another.
const DefaultNamespace = "EC2Runners"

// Metric names.
const (
	// Claims counts fulfilled claims; ClaimsFailed the claims that failed
	// (every runner given back or terminated).
	Claims       = "Claims"
	ClaimsFailed = "ClaimsFailed"
	// RunnersClaimed counts the runners fulfilled claims got, by Source.
	RunnersClaimed = "RunnersClaimed"
	// WarmHitRate is the share of a claim's runners that came warm (hot
	// or stopped), in percent, one value per claim.
	WarmHitRate = "WarmHitRate"
	// TimeToRunner is the time from a claim's start until every one of
	// its runners was registered for the run, in milliseconds.
	TimeToRunner = "TimeToRunner"
	// RunnersReleased counts the runners releases gave back, by Outcome.
	RunnersReleased = "RunnersReleased"
	// Runners counts a pool's runners by State, as a scan of the pool
	// finds them (a gauge).
	Runners = "Runners"
	// FailedChecks counts runners that failed a check, by Reason.
	FailedChecks = "FailedChecks"
)

// Definition is one metric: its name, its dimensions, its unit.
type Definition struct {
	Name       string
	Dimensions []string
	Unit       string
}

// Definitions are the metrics a pool publishes (the metrics guide's table;
// examples/complete's dashboard shows each).
var Definitions = []Definition{
	{Claims, []string{DimPool, DimClass}, "Count"},
	{ClaimsFailed, []string{DimPool, DimClass}, "Count"},
	{RunnersClaimed, []string{DimPool, DimClass, DimSource}, "Count"},
	{WarmHitRate, []string{DimPool, DimClass}, "Percent"},
	{TimeToRunner, []string{DimPool, DimClass}, "Milliseconds"},
	{RunnersReleased, []string{DimPool, DimClass, DimOutcome}, "Count"},
	{Runners, []string{DimPool, DimClass, DimState}, "Count"},
	{FailedChecks, []string{DimPool, DimClass, DimReason}, "Count"},
}

// Dimension names.
const (
	DimPool    = "Pool"
	DimClass   = "Class"
	DimSource  = "Source"
	DimOutcome = "Outcome"
	DimState   = "State"
	DimReason  = "Reason"
)

// Source is where a claim's runner came from.
type Source string

// Sources of claimed runners.
const (
	SourceHot     Source = "hot"     // an idle runner from the pool's queue
	SourceStopped Source = "stopped" // a runner of the stopped tier, started
	SourceFleet   Source = "fleet"   // launched for the claim
)

// Sources lists every Source.
var Sources = []Source{SourceHot, SourceStopped, SourceFleet}

// sourceProperty names a claim event's count of runners from a source.
var sourceProperty = map[Source]string{SourceHot: "Hot", SourceStopped: "Stopped", SourceFleet: "Fleet"}

// Outcome is what a release did with a runner.
type Outcome string

// Outcomes of released runners.
const (
	OutcomeHot        Outcome = "hot"        // kept hot: a slot of the class's hot target
	OutcomeStopped    Outcome = "stopped"    // kept for the stopped tier: it stops after the idle timeout
	OutcomeIdle       Outcome = "idle"       // back in the pool until the idle timeout, then it terminates
	OutcomeTerminated Outcome = "terminated" // terminated (outdated, too old, or it failed its release)
)

// Outcomes lists every Outcome.
var Outcomes = []Outcome{OutcomeHot, OutcomeStopped, OutcomeIdle, OutcomeTerminated}

// State is a runner's state as a scan of the pool counts it.
type State string

// Runner states.
const (
	StateIdle    State = "idle"    // waiting in the pool, running
	StateStopped State = "stopped" // in the stopped tier
	StateClaimed State = "claimed" // held by a run
)

// States lists every State.
var States = []State{StateIdle, StateStopped, StateClaimed}

// Reason is why a runner failed a check.
type Reason string

// Reasons of failed checks.
const (
	ReasonNoHeartbeat          Reason = "no-heartbeat"          // its agent never heartbeat
	ReasonStaleHeartbeat       Reason = "stale-heartbeat"       // its agent stopped heartbeating
	ReasonRegistrationFailed   Reason = "registration-failed"   // its agent signalled UD_REG_FAILED
	ReasonUserDataFailed       Reason = "user-data-failed"      // its agent signalled UD_FAILED
	ReasonRegistrationTimeout  Reason = "registration-timeout"  // alive, but not registered in time
	ReasonOutdatedRunner       Reason = "outdated-runner"       // its GitHub runner is older than GitHub accepts
	ReasonNotPrepared          Reason = "not-prepared"          // launched for a warm target, not ready in time
	ReasonReleaseUnconfirmed   Reason = "release-unconfirmed"   // it did not confirm its release in time
	ReasonDeregistrationFailed Reason = "deregistration-failed" // its agent signalled UD_REMOVE_REG_FAILED
	ReasonOther                Reason = "other"
)

// Reasons lists every Reason.
var Reasons = []Reason{ReasonNoHeartbeat, ReasonStaleHeartbeat, ReasonRegistrationFailed, ReasonUserDataFailed, ReasonRegistrationTimeout,
	ReasonOutdatedRunner, ReasonNotPrepared, ReasonReleaseUnconfirmed, ReasonDeregistrationFailed, ReasonOther}

// Check is a runner that failed a check.
type Check struct {
	Instance string
	Reason   Reason
}

// Claim is what one claim did.
type Claim struct {
	Pool, Class, RunID string
	// Failed: the claim failed; it has no sources nor time to runner.
	Failed  bool
	Sources map[Source]int
	// TimeToRunner is from the claim's start until its last runner was
	// registered.
	TimeToRunner time.Duration
	Checks       []Check
}

// Release is what one release did.
type Release struct {
	Pool, Class, RunID string
	Outcomes           map[Outcome]int
	Checks             []Check
}

// Scan is a pool's runners by class and state.
type Scan struct {
	Pool    string
	ByClass map[string]map[State]int
}

// Event is one EMF log event: metric values sharing the same dimensions,
// and properties that are no dimensions (kept in the log for Logs
// Insights, never a metric of their own).
type Event struct {
	Time       time.Time
	Dimensions []Dimension // in order
	Values     []Value
	Properties map[string]any
}

// Dimension is one dimension's name and value.
type Dimension struct{ Name, Value string }

// Value is one metric value.
type Value struct {
	Name, Unit string
	Value      float64
}

func dims(pool, class string, more ...Dimension) []Dimension {
	return append([]Dimension{{DimPool, pool}, {DimClass, class}}, more...)
}

// Events of a claim: one with the claim's count (and, when fulfilled, its
// warm hit rate and time to runner), one per source it took runners from,
// and one per reason runners failed their checks.
func (c Claim) Events(now time.Time) []Event {
	main := Event{Time: now, Dimensions: dims(c.Pool, c.Class), Properties: map[string]any{"RunId": c.RunID}}
	if c.Failed {
		main.Values = []Value{{ClaimsFailed, "Count", 1}}
	} else {
		total, warm := 0, 0
		for _, s := range Sources {
			total += c.Sources[s]
			main.Properties[sourceProperty[s]] = c.Sources[s]
		}
		warm = c.Sources[SourceHot] + c.Sources[SourceStopped]
		main.Values = []Value{{Claims, "Count", 1}, {TimeToRunner, "Milliseconds", float64(c.TimeToRunner.Milliseconds())}}
		if total > 0 {
			main.Values = append(main.Values, Value{WarmHitRate, "Percent", 100 * float64(warm) / float64(total)})
		}
	}
	out := []Event{main}
	if !c.Failed {
		for _, s := range Sources {
			if n := c.Sources[s]; n > 0 {
				out = append(out, Event{Time: now, Dimensions: dims(c.Pool, c.Class, Dimension{DimSource, string(s)}),
					Values: []Value{{RunnersClaimed, "Count", float64(n)}}, Properties: map[string]any{"RunId": c.RunID}})
			}
		}
	}
	return append(out, checkEvents(c.Pool, c.Class, c.RunID, c.Checks, now)...)
}

// Events of a release: one per outcome, and one per reason runners failed
// their checks.
func (r Release) Events(now time.Time) []Event {
	var out []Event
	for _, o := range Outcomes {
		if n := r.Outcomes[o]; n > 0 {
			out = append(out, Event{Time: now, Dimensions: dims(r.Pool, r.Class, Dimension{DimOutcome, string(o)}),
				Values: []Value{{RunnersReleased, "Count", float64(n)}}, Properties: map[string]any{"RunId": r.RunID}})
		}
	}
	return append(out, checkEvents(r.Pool, r.Class, r.RunID, r.Checks, now)...)
}

// Events of a scan: every state of every class it counted, zeros included
// (a gauge drawn without its zeros would keep its last value).
func (s Scan) Events(now time.Time) []Event {
	var out []Event
	for _, class := range slices.Sorted(maps.Keys(s.ByClass)) {
		for _, st := range States {
			out = append(out, Event{Time: now, Dimensions: dims(s.Pool, class, Dimension{DimState, string(st)}),
				Values: []Value{{Runners, "Count", float64(s.ByClass[class][st])}}})
		}
	}
	return out
}

// CheckEvents are the events of checks runners of a class failed outside
// a claim or release (a fill of the warm targets).
func CheckEvents(pool, class string, checks []Check, now time.Time) []Event {
	return checkEvents(pool, class, "", checks, now)
}

func checkEvents(pool, class, runID string, checks []Check, now time.Time) []Event {
	byReason := map[Reason][]string{}
	for _, c := range checks {
		byReason[c.Reason] = append(byReason[c.Reason], c.Instance)
	}
	var out []Event
	for _, reason := range Reasons {
		ids := byReason[reason]
		if len(ids) == 0 {
			continue
		}
		props := map[string]any{"Instances": ids}
		if runID != "" {
			props["RunId"] = runID
		}
		out = append(out, Event{Time: now, Dimensions: dims(pool, class, Dimension{DimReason, string(reason)}),
			Values: []Value{{FailedChecks, "Count", float64(len(ids))}}, Properties: props})
	}
	return out
}

// String is an event's short form, for logs and test failures.
func (e Event) String() string {
	s := ""
	for _, d := range e.Dimensions {
		s += d.Name + "=" + d.Value + " "
	}
	for _, v := range e.Values {
		s += fmt.Sprintf("%s:%g ", v.Name, v.Value)
	}
	return s
}
