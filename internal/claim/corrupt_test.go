package claim

// Corrupt data from AWS: queue messages, instance records, heartbeats,
// signals, claim records, the pool config item and the token item that
// nobody in this project would write. A claim must skip (and log) what it
// cannot use, fail clearly when it cannot go on, and never panic.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

// corruptLogs records what the Claimer logs.
type corruptLogs struct {
	mu    sync.Mutex
	lines []string
}

func captureLogs(e *env) *corruptLogs {
	l := &corruptLogs{}
	e.c.Log = func(msg string, kv ...any) {
		parts := []string{msg}
		for _, v := range kv {
			parts = append(parts, fmt.Sprint(v))
		}
		line := strings.Join(parts, " ")
		if len(line) > 300 {
			e.t.Log(line[:300] + "...")
		} else {
			e.t.Log(line)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, line)
	}
	return l
}

// count is the number of log lines holding every one of parts.
func (l *corruptLogs) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

func sAttr(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func nAttr(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// idleRecordItem is the record of an idle large runner, to be corrupted.
func idleRecordItem(id string, until time.Time) item {
	return protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: protocol.FormatTime(until), ResourceClass: "large",
		InstanceType: "c6i.large", UsageClass: protocol.UsageOnDemand, UpdatedAt: protocol.FormatTime(time.Now())}.Item()
}

// Malformed and unsuitable messages among healthy ones: each is discarded
// (deleted, not sent back) and logged with its reason; the claim is served
// by the healthy runners without launching anything.
func TestCorruptMessagesAreDiscardedAndLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs := captureLogs(e)
	until := time.Now().Add(time.Hour)
	good := idleMessage("i-x", "c6i.large", until).Body()
	swap := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("%s not in %s", old, good)
		}
		return strings.Replace(good, old, new, 1)
	}
	huge := strings.Repeat("x", 250*1024) // SQS takes bodies up to 256 KiB
	corrupt := map[string]string{         // body -> what its discard reason says
		"":                                "not a runner message",
		"not json":                        "not a runner message",
		"\xff\xfe\x00":                    "not a runner message",
		"[]":                              "not a runner message",
		"null":                            "runner message lacks",
		`{"id":"i-x"}`:                    "runner message lacks cpu, instanceType, mmem, resourceClass, threshold, usageClass",
		`{"id":"` + huge + `"}`:           "runner message lacks",
		good + "trailing":                 "not a runner message",
		swap(`"cpu":2`, `"cpu":"2"`):      "not a runner message",
		swap(`"cpu":2`, `"cpu":-2`):       "runner message lacks cpu",
		swap(`"mmem":4096`, `"mmem":1e3`): "not a runner message",
		swap(`"id":"i-x"`, `"id":{"nested":true}`):                    "not a runner message",
		swap(protocol.FormatTime(until), "tomorrow"):                  `threshold "tomorrow" is not`,
		swap(protocol.FormatTime(until), "2030-01-01T00:00:00+01:00"): "threshold",
		swap(protocol.FormatTime(until), "2020-01-01T00:00:00Z"):      "has passed",
		swap(`"resourceClass":"large"`, `"resourceClass":"xlarge"`):   `resource class "xlarge" in the queue of "large"`,
		swap(`"resourceClass":"large"`, `"resourceClass":"`+huge+`"`): "in the queue of",
		swap(`"cpu":2`, `"cpu":64`):                                   "cpu 64",
		swap(`"mmem":4096`, `"mmem":1`):                               "memory 1 MiB",
	}
	e.seedIdle("i-1", healthy)
	for body := range corrupt {
		e.sqs.Add(largeURL, body)
	}
	e.seedIdle("i-2", healthy)

	res, err := e.create(2, func(r *Request) { r.FleetFallback = false })
	if err != nil {
		t.Fatalf("claim failed because of corrupt messages: %v", err)
	}
	if got := ids(res.Instances); !slices.Equal(got, []string{"i-1", "i-2"}) || res.Created != 0 {
		t.Errorf("claimed %v (created %d), want the two healthy runners", got, res.Created)
	}
	if res.Pickup.Discarded != len(corrupt) {
		t.Errorf("discarded %d messages, want %d: %+v", res.Pickup.Discarded, len(corrupt), res.Pickup)
	}
	if n := logs.count("pickup: discarded message"); n != len(corrupt) {
		t.Errorf("%d discards logged, want %d", n, len(corrupt))
	}
	for body, reason := range corrupt {
		if logs.count("pickup: discarded message", reason) == 0 {
			t.Errorf("no discard of %.60q logged with %q", body, reason)
		}
	}
	if left := e.sqs.queuedIDs(t, largeURL); len(left) != 0 {
		t.Errorf("queue still holds %d message(s): corrupt ones must be deleted, not sent back", len(left))
	}
	if len(e.ec2.FleetInputs()) != 0 {
		t.Error("CreateFleet called although the pool had two healthy runners")
	}
}

// Messages of runners whose instance record is missing or corrupt: the
// conditional claim fails, the message is dropped and logged, the record is
// left as it was, and the claim goes on with healthy runners and the fleet.
func TestCorruptInstanceRecordsOfQueuedRunnersAreSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs := captureLogs(e)
	until := time.Now().Add(time.Hour)
	corrupt := map[string]func(item){
		"i-norecord":       nil,
		"i-nostate":        func(it item) { delete(it, protocol.AttrState) },
		"i-numstate":       func(it item) { it[protocol.AttrState] = nAttr("3") },
		"i-mapstate":       func(it item) { it[protocol.AttrState] = &types.AttributeValueMemberM{Value: item{"S": sAttr("idle")}} },
		"i-unknownstate":   func(it item) { it[protocol.AttrState] = sAttr("exploded") },
		"i-upperstate":     func(it item) { it[protocol.AttrState] = sAttr("IDLE") },
		"i-norunid":        func(it item) { delete(it, protocol.AttrRunID) },
		"i-numrunid":       func(it item) { it[protocol.AttrRunID] = nAttr("0") },
		"i-nullrunid":      func(it item) { it[protocol.AttrRunID] = &types.AttributeValueMemberNULL{Value: true} },
		"i-owned":          func(it item) { it[protocol.AttrRunID] = sAttr("another-run") },
		"i-nothreshold":    func(it item) { delete(it, protocol.AttrThreshold) },
		"i-emptythreshold": func(it item) { it[protocol.AttrThreshold] = sAttr("") },
		"i-numthreshold":   func(it item) { it[protocol.AttrThreshold] = nAttr("99999999999") },
		"i-pastthreshold":  func(it item) { it[protocol.AttrThreshold] = sAttr("2020-01-01T00:00:00Z") },
	}
	before := map[string]string{}
	for id, change := range corrupt {
		if change != nil {
			it := idleRecordItem(id, until)
			change(it)
			e.db.Put(it)
			before[id] = render(it)
		}
		e.db.Put(poolworld.HeartbeatAt(id, time.Now()))
		e.sqs.Add(largeURL, idleMessage(id, "c6i.large", until).Body())
	}
	e.seedIdle("i-ok", healthy)

	res, err := e.create(2)
	if err != nil {
		t.Fatalf("claim failed because of corrupt records: %v", err)
	}
	if res.Reused != 1 || res.Created != 1 || !slices.Contains(ids(res.Instances), "i-ok") {
		t.Errorf("result %+v, want i-ok reused and one launched", res)
	}
	for id := range corrupt {
		if logs.count("runner not idle, message dropped", id) != 1 {
			t.Errorf("%s: dropped message not logged once", id)
		}
		got := e.db.Get(protocol.TypeInstance, id)
		if want, ok := before[id]; !ok && got != nil || ok && render(got) != want {
			t.Errorf("%s: record changed to %s", id, render(got))
		}
	}
	if left := e.sqs.queuedIDs(t, largeURL); len(left) != 0 {
		t.Errorf("queue still holds %v", left)
	}
	if term := e.ec2.TerminatedIDs(); len(term) != 0 {
		t.Errorf("terminated %v: a corrupt record is someone else's to settle", term)
	}
}

// Corrupt heartbeats and signals read as none: the runner fails its checks
// and is given up (expired and terminated), and the claim launches another.
func TestCorruptAgentItemsFailTheRunnerNotTheClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs := captureLogs(e)
	heartbeat := func(value types.AttributeValue) func(string) {
		return func(id string) {
			it := poolworld.HeartbeatAt(id, time.Now())
			it[protocol.AttrUpdatedAt] = value
			e.db.Put(it)
		}
	}
	signal := func(value types.AttributeValue) func(string) {
		return func(id string) {
			it := signalItem(id, protocol.SignalRegistered, testRun)
			it[protocol.AttrValue] = value
			e.db.Put(it)
		}
	}
	sigMap := func(state, runID types.AttributeValue) types.AttributeValue {
		return &types.AttributeValueMemberM{Value: item{"state": state, "runId": runID}}
	}
	cases := []struct {
		id      string
		agent   behavior // noHeartbeat registers but never heartbeats; neverRegisters heartbeats but never signals
		corrupt func(id string)
		reason  string
	}{
		{"i-hb-garbage", noHeartbeat, heartbeat(sAttr("garbage")), "unhealthy: no heartbeat"},
		{"i-hb-number", noHeartbeat, heartbeat(nAttr("1780315200")), "unhealthy: no heartbeat"},
		{"i-hb-fraction", noHeartbeat, heartbeat(sAttr(protocol.FormatTime(time.Now()) + ".5")), "unhealthy: no heartbeat"},
		{"i-hb-offset", noHeartbeat, heartbeat(sAttr(time.Now().Format("2006-01-02T15:04:05-07:00"))), "unhealthy"},
		{"i-hb-missing", noHeartbeat, func(id string) {
			it := poolworld.HeartbeatAt(id, time.Now())
			delete(it, protocol.AttrUpdatedAt)
			e.db.Put(it)
		}, "unhealthy: no heartbeat"},
		{"i-sig-string", neverRegisters, signal(sAttr(protocol.SignalRegistered)), "last signal: none"},
		{"i-sig-numstate", neverRegisters, signal(sigMap(nAttr("1"), sAttr(testRun))), "last signal: none"},
		{"i-sig-numrun", neverRegisters, signal(sigMap(sAttr(protocol.SignalRegistered), nAttr("1"))), `last signal: UD_REG_OK for run ""`},
		{"i-sig-unknown", neverRegisters, signal(sigMap(sAttr("UD_WHATEVER"), sAttr(testRun))), "last signal: UD_WHATEVER"},
		{"i-sig-huge", neverRegisters, signal(sigMap(sAttr(strings.Repeat("UD_", 5_000)), sAttr(testRun))), "last signal: UD_UD_"},
	}
	for _, c := range cases {
		e.seedIdle(c.id, c.agent)
		c.corrupt(c.id)
	}
	// As many as there are cases, so that the claim tries them all (it
	// stops taking from the pool once more runners failed than it asked for).
	res, err := e.create(len(cases))
	if err != nil {
		t.Fatalf("claim failed because of corrupt agent items: %v", err)
	}
	if res.Created != len(cases) || res.Reused != 0 {
		t.Errorf("result %+v, want %d runners launched", res, len(cases))
	}
	terminated := e.ec2.TerminatedIDs()
	for _, c := range cases {
		if logs.count("runner failed its checks", c.id, c.reason) != 1 {
			t.Errorf("%s: no log of the failed checks with %q", c.id, c.reason)
		}
		if r := e.db.instance(t, c.id); r.State != protocol.StateTerminated || !slices.Contains(terminated, c.id) {
			t.Errorf("%s is %s (terminated in EC2: %v), want given up", c.id, r.State, slices.Contains(terminated, c.id))
		}
	}
}

// A corrupt claim record is a clear error for Read, Release and a new Create
// of the same run, and nothing is touched.
func TestCorruptClaimRecordIsAClearError(t *testing.T) {
	t.Parallel()
	for name, value := range map[string]types.AttributeValue{
		"not JSON":        sAttr("{not json"),
		"wrong types":     sAttr(`{"instanceCount":"two","instances":"i-1"}`),
		"bad duration":    sAttr(`{"instanceCount":1,"resourceClass":"large","maxRuntime":"forever"}`),
		"value a number":  nAttr("1"),
		"value a map":     &types.AttributeValueMemberM{Value: item{"state": sAttr("complete")}},
		"value absent":    nil,
		"huge value":      sAttr(`{"instances":[` + strings.Repeat(`{"id":"i-1"},`, 20_000) + `]`),
		"instances wrong": sAttr(`{"instanceCount":1,"instances":[{"id":5}]}`),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.seedIdle("i-1", healthy)
			it := protocol.BaseItem(protocol.TypeClaim, testRun, protocol.FormatTime(time.Now().Add(-time.Hour)))
			if value != nil {
				it[protocol.AttrValue] = value
			}
			it[protocol.AttrState] = sAttr(recordComplete)
			it[table.AttrInstanceIDs] = &types.AttributeValueMemberSS{Value: []string{"i-1"}}
			e.db.Put(it)
			want := "claim record " + testRun + " is not valid"

			_, _, _, err := e.c.Read(context.Background(), testPool, testRun)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Read = %v, want an error with %q", err, want)
			}
			_, err = e.release()
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Release = %v, want an error with %q", err, want)
			}
			_, err = e.create(1)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Create = %v, want an error with %q", err, want)
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle || r.RunID != "" {
				t.Errorf("i-1 is %s for %q, want untouched", r.State, r.RunID)
			}
			if q := e.sqs.queuedIDs(t, largeURL); !slices.Equal(q, []string{"i-1"}) {
				t.Errorf("queue holds %v, want i-1's message untouched", q)
			}
			if e.db.Get(protocol.TypeClaim, testRun) == nil {
				t.Error("the corrupt record was deleted")
			}
		})
	}
}

// A corrupt pool config item fails a claim before it receives any message
// (a corrupt class must not make it discard the whole queue), and a release
// before it changes anything.
func TestCorruptPoolConfigIsAClearError(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(e *env, it item){
		"not JSON":       func(_ *env, it item) { it[protocol.AttrValue] = sAttr(`{"name":`) },
		"null":           func(_ *env, it item) { it[protocol.AttrValue] = sAttr(`null`) },
		"a number":       func(_ *env, it item) { it[protocol.AttrValue] = nAttr("7") },
		"absent":         func(_ *env, it item) { delete(it, protocol.AttrValue) },
		"empty document": func(_ *env, it item) { it[protocol.AttrValue] = sAttr(`{}`) },
		"class with zero cpu": func(e *env, it item) {
			e.cfg.ResourceClasses["large"] = protocol.ResourceClass{CPU: 0, MemoryMiB: 4096}
			it[protocol.AttrValue] = e.cfg.Item("")[protocol.AttrValue]
		},
		"negative idle timeout": func(e *env, it item) {
			e.cfg.IdleTimeout = protocol.Duration(-time.Minute)
			it[protocol.AttrValue] = e.cfg.Item("")[protocol.AttrValue]
		},
		"unknown instance selection": func(e *env, it item) {
			e.cfg.Fleet.InstanceSelection = "cheapest"
			it[protocol.AttrValue] = e.cfg.Item("")[protocol.AttrValue]
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.claimed(t, map[string]behavior{"i-held": healthy})
			e.seedIdle("i-1", healthy)
			it := e.db.Get(protocol.TypeMetadata, protocol.PoolConfigID)
			change(e, it)
			e.db.Put(it)
			receives := len(e.sqs.ReceiveInputs())
			fleets := len(e.ec2.FleetInputs())

			_, err := e.create(1, func(r *Request) { r.RunID = "run-2" })
			if err == nil || !strings.Contains(err.Error(), "pool config item is not valid") {
				t.Errorf("Create = %v, want an error about the pool config item", err)
			}
			if n := len(e.sqs.ReceiveInputs()); n != receives {
				t.Errorf("Create received from the queue %d time(s) with a corrupt pool config", n-receives)
			}
			if len(e.ec2.FleetInputs()) != fleets {
				t.Error("Create launched instances with a corrupt pool config")
			}
			if q := e.sqs.queuedIDs(t, largeURL); !slices.Equal(q, []string{"i-1"}) {
				t.Errorf("queue holds %v, want i-1's message untouched", q)
			}
			_, err = e.release()
			if err == nil || !strings.Contains(err.Error(), "pool config item is not valid") {
				t.Errorf("Release = %v, want an error about the pool config item", err)
			}
			if r := e.db.instance(t, "i-held"); r.State != protocol.StateRunning || r.RunID != testRun {
				t.Errorf("i-held is %s for %q, want still running for the claim", r.State, r.RunID)
			}
		})
	}
}

// ---------------------------------------------------------------- corrupt records of a claim

// One corrupt instance record among a claim's runners is skipped and
// logged: the healthy runners are still given back, and `terraform destroy`
// does not fail until someone repairs the record by hand.
func TestCorruptInstanceRecordDoesNotBlockRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs := captureLogs(e)
	e.claimed(t, map[string]behavior{"i-1": healthy, "i-2": healthy})
	it := e.db.Get(protocol.TypeInstance, "i-2")
	delete(it, protocol.AttrState)
	e.db.Put(it)

	outcomes, err := e.release()
	if err != nil {
		t.Fatalf("Release = %v: one corrupt record failed the whole release", err)
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle {
		t.Errorf("i-1 is %s, want released", r.State)
	}
	if !slices.Contains(outcomes, "i-1: released to the pool") || logs.count("i-2") == 0 {
		t.Errorf("outcomes %q; want i-1 released and i-2 reported", outcomes)
	}
}

// The same for Read: the claim can still be refreshed.
func TestCorruptInstanceRecordDoesNotBlockRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claimed(t, map[string]behavior{"i-1": healthy, "i-2": healthy})
	it := e.db.Get(protocol.TypeInstance, "i-2")
	it[protocol.AttrState] = nAttr("1")
	e.db.Put(it)

	_, live, ok, err := e.c.Read(context.Background(), testPool, testRun)
	if err != nil || !ok {
		t.Fatalf("Read = %v, %v: one corrupt record failed the whole read", ok, err)
	}
	if got := instanceIDs(live); !slices.Equal(got, []string{"i-1"}) {
		t.Errorf("live %v, want only i-1", got)
	}
}

// A claim record whose instanceIds attribute is not a string set is
// refused: releasing it as owning nothing would report success while its
// runners stay running for the run until their runtime ends.
func TestCorruptOwnedIDsDoNotLeakRunners(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claimed(t, map[string]behavior{"i-1": healthy})
	it := e.db.Get(protocol.TypeClaim, testRun)
	it[table.AttrInstanceIDs] = sAttr("i-1")
	e.db.Put(it)

	_, err := e.release()
	if r := e.db.instance(t, "i-1"); err == nil && r.State == protocol.StateRunning && r.RunID == testRun {
		t.Errorf("Release reported success, but i-1 is still running for the run and the claim record is gone (%v)", e.db.Get(protocol.TypeClaim, testRun) == nil)
	}
}

// A claim record whose document lacks the resource class (`null`, `{}`) is
// refused like any corrupt record: releasing it would move the runner to
// idle and send its message to the queue of class "", leaving an idle
// runner no claim can find.
func TestIncompleteClaimRecordIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claimed(t, map[string]behavior{"i-1": healthy})
	it := e.db.Get(protocol.TypeClaim, testRun)
	it[protocol.AttrValue] = sAttr("null")
	e.db.Put(it)

	_, err := e.release()
	if err == nil || !strings.Contains(err.Error(), "claim record "+testRun+" is not valid") {
		t.Errorf("Release = %v, want the record refused as not valid", err)
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateRunning {
		t.Errorf("i-1 is %s with no message in the queue (%v), want left running until the record is repaired", r.State, e.sqs.queuedIDs(t, largeURL))
	}
}
