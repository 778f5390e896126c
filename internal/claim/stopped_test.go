package claim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// sources counts a claim's runners by where they came from.
func sources(res *Result) map[string][]string {
	out := map[string][]string{}
	for _, inst := range res.Instances {
		out[inst.Source] = append(out[inst.Source], inst.ID)
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// A claim takes hot runners from the queue first, then starts stopped ones,
// then launches the rest, in one Create; the started ones register for the
// run after their boot like new instances.
func TestCreateTakesHotThenStoppedThenFleet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 2}}
	e.writeConfig()
	e.seedIdle("i-1", healthy)
	e.seedStopped("i-2", healthy)
	e.seedStopped("i-3", healthy)
	res, err := e.create(4)
	if err != nil {
		t.Fatal(err)
	}
	got := sources(res)
	if !slices.Equal(got[SourcePool], []string{"i-1"}) || !slices.Equal(got[SourceStopped], []string{"i-2", "i-3"}) || len(got[SourceFleet]) != 1 {
		t.Errorf("sources %v, want i-1 from the pool, i-2 and i-3 started, one launched", got)
	}
	if res.Reused != 1 || res.Started != 2 || res.Created != 1 {
		t.Errorf("reused %d, started %d, created %d; want 1, 2, 1", res.Reused, res.Started, res.Created)
	}
	e.ec2.Mu.Lock()
	started := slices.Sorted(slices.Values(e.ec2.StartedIDs))
	e.ec2.Mu.Unlock()
	if !slices.Equal(started, []string{"i-2", "i-3"}) {
		t.Errorf("StartInstances started %v, want i-2 and i-3", started)
	}
	for _, inst := range res.Instances {
		r := e.db.instance(t, inst.ID)
		if r.State != protocol.StateRunning || r.RunID != testRun || r.StopUntil != "" {
			t.Errorf("%s: state %s, run %q, stopUntil %q; want running for the run, its stopped time gone", inst.ID, r.State, r.RunID, r.StopUntil)
		}
	}
}

// A runner may be named by two slots of a tier: the one it holds, and a
// stale one it held before a claim took it (a slot is freed by its
// holder's record, not cleared). A claim reads it once: DynamoDB refuses
// a BatchGetItem that names a key twice (ValidationException).
func TestCreateStartsRunnerNamedByTwoSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 2}}
	e.writeConfig()
	e.seedStopped("i-2", healthy)
	e.addSlot(protocol.TierStopped, "large", warmSlot{ID: "i-2", Until: protocol.FormatTime(time.Now().Add(time.Hour)), Taken: protocol.FormatTime(time.Now().Add(-3 * time.Hour))})
	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := sources(res); !slices.Equal(got[SourceStopped], []string{"i-2"}) {
		t.Errorf("sources %v, want i-2 started", got)
	}
}

// A started runner that does not come back healthy (no heartbeat after its
// boot) is terminated and replaced by a launch within the same claim.
func TestCreateReplacesStoppedRunnerThatDoesNotComeBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 1}}
	e.writeConfig()
	e.seedStopped("i-2", staleHeartbeat)
	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := sources(res); len(got[SourceFleet]) != 1 || len(got[SourceStopped]) != 0 {
		t.Errorf("sources %v, want one launched runner", got)
	}
	if !slices.Contains(e.ec2.TerminatedIDs(), "i-2") {
		t.Errorf("i-2 was started and never came back, but is not terminated (terminated: %v)", e.ec2.TerminatedIDs())
	}
	if r := e.db.instance(t, "i-2"); r.State != protocol.StateTerminated {
		t.Errorf("i-2's record is %s, want terminated", r.State)
	}
}

// Stopped runners EC2 has no capacity to start do not fail the claim: they
// are terminated and the fleet launches in their place.
func TestCreateLaunchesWhenStoppedRunnersCannotStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 2}}
	e.writeConfig()
	e.seedStopped("i-2", healthy)
	e.seedStopped("i-3", healthy)
	e.ec2.Mu.Lock()
	e.ec2.StartErr = &smithy.GenericAPIError{Code: "InsufficientInstanceCapacity", Message: "We currently do not have sufficient m7i.large capacity in the Availability Zone you requested"}
	e.ec2.Mu.Unlock()
	res, err := e.create(2)
	if err != nil {
		t.Fatal(err)
	}
	if got := sources(res); len(got[SourceFleet]) != 2 || len(got[SourceStopped]) != 0 {
		t.Errorf("sources %v, want two launched runners", got)
	}
	for _, id := range []string{"i-2", "i-3"} {
		if !slices.Contains(e.ec2.TerminatedIDs(), id) {
			t.Errorf("%s could not start, but is not terminated (terminated: %v)", id, e.ec2.TerminatedIDs())
		}
		if r := e.db.instance(t, id); r.State != protocol.StateTerminated {
			t.Errorf("%s's record is %s, want terminated", id, r.State)
		}
	}
}

// A runner in its stopped time that EC2 still runs (its agent has not
// stopped it yet, or it is stopping) is left alone: its agent may stop it
// any moment. So is one of another usage class or instance type.
func TestCreateStartsOnlyStoppedRunnersItMayUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 3}}
	e.writeConfig()
	e.seedStopped("i-running", healthy)
	e.ec2.Mu.Lock()
	delete(e.ec2.Stopped, "i-running")
	e.ec2.Mu.Unlock()
	e.seedStopped("i-spot", healthy)
	e.db.setInstance(t, "i-spot", func(r *protocol.Instance) { r.UsageClass = protocol.UsageSpot })
	e.seedStopped("i-graviton", healthy)
	e.db.setInstance(t, "i-graviton", func(r *protocol.Instance) { r.InstanceType = "r7g.large" })
	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := sources(res); len(got[SourceFleet]) != 1 {
		t.Errorf("sources %v, want one launched runner", got)
	}
	e.ec2.Mu.Lock()
	defer e.ec2.Mu.Unlock()
	if len(e.ec2.StartedIDs) != 0 {
		t.Errorf("started %v", e.ec2.StartedIDs)
	}
	for _, id := range []string{"i-running", "i-spot", "i-graviton"} {
		if r := e.db.instance(t, id); r.State != protocol.StateIdle || r.StopUntil == "" {
			t.Errorf("%s: state %s, stopUntil %q; want it left in the stopped tier", id, r.State, r.StopUntil)
		}
	}
}

// A stopped runner of an outdated launch template version is not started
// but retired: terminated, its record too.
func TestCreateRetiresOutdatedStoppedRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 1}}
	e.writeConfig()
	e.seedStopped("i-old", healthy) // launched from version 1
	e.ec2.LtVersion = 2
	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := sources(res); len(got[SourceFleet]) != 1 {
		t.Errorf("sources %v, want one launched runner", got)
	}
	if r := e.db.instance(t, "i-old"); r.State != protocol.StateTerminated || !slices.Contains(e.ec2.TerminatedIDs(), "i-old") {
		t.Errorf("i-old: record %s, terminated %v; want it retired", r.State, e.ec2.TerminatedIDs())
	}
	if r := e.db.instance(t, res.Instances[0].ID); r.TemplateVersion != "2" || r.LaunchedAt == "" {
		t.Errorf("the launched runner's record says version %q, launched at %q; want version 2 and its launch time", r.TemplateVersion, r.LaunchedAt)
	}
}

// A hot runner whose message says it is outdated, or older than the pool's
// maximum runner age, is not handed out: the claim retires it and launches.
func TestCreateRetiresOutdatedHotRunners(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.MaxRunnerAge = protocol.Duration(24 * time.Hour)
	e.writeConfig()
	e.ec2.LtVersion = 3
	for id, m := range map[string]func(*protocol.Message){
		"i-old-version": func(m *protocol.Message) { m.TemplateVersion, m.LaunchedAt = "2", protocol.FormatTime(time.Now()) },
		"i-too-old": func(m *protocol.Message) {
			m.TemplateVersion, m.LaunchedAt = "3", protocol.FormatTime(time.Now().Add(-25*time.Hour))
		},
	} {
		msg := idleMessage(id, "c6i.large", time.Now().Add(time.Hour))
		m(&msg)
		e.seedRecord(protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: msg.Threshold}, healthy)
		e.sqs.Add(largeURL, msg.Body())
	}
	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := sources(res); len(got[SourceFleet]) != 1 {
		t.Errorf("sources %v, want one launched runner", got)
	}
	if res.Pickup.Retired != 2 {
		t.Errorf("pickup retired %d, want 2", res.Pickup.Retired)
	}
	for _, id := range []string{"i-old-version", "i-too-old"} {
		if r := e.db.instance(t, id); r.State != protocol.StateTerminated {
			t.Errorf("%s is %s, want retired (terminated)", id, r.State)
		}
	}
	if q := e.sqs.queuedIDs(t, largeURL); len(q) != 0 {
		t.Errorf("queue holds %v", q)
	}
}

// A release keeps runners hot up to the hot target, then stopped up to the
// stopped target (on-demand ones only: Spot instances cannot be stopped):
// those idle for the idle timeout and then stop until their slot ends.
func TestReleaseKeepsStoppedAfterHot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 1, Stopped: 1}}
	e.writeConfig()
	e.claimed(t, map[string]behavior{"i-1": healthy, "i-2": healthy, "i-3": healthy, "i-4": healthy})
	e.db.setInstance(t, "i-4", func(r *protocol.Instance) { r.UsageClass = protocol.UsageSpot })
	start := time.Now()
	outcomes, err := e.release()
	if err != nil {
		t.Fatal(err)
	}
	var hot, stopped, plain int
	for _, id := range []string{"i-1", "i-2", "i-3", "i-4"} {
		r := e.db.instance(t, id)
		th, _ := protocol.ParseTime(r.Threshold)
		switch {
		case r.StopUntil != "":
			stopped++
			if id == "i-4" {
				t.Errorf("the Spot runner i-4 was given a stopped time")
			}
			during(start, idleTime).Check(t, id+" threshold", r.Threshold)
			during(start, MaxStoppedAge).Check(t, id+" stopUntil", r.StopUntil)
		case th.After(start.Add(idleTime + time.Minute)):
			hot++
		default:
			plain++
		}
	}
	if hot != 1 || stopped != 1 || plain != 2 {
		t.Errorf("%d hot, %d stopped, %d plain; want 1, 1, 2: %q", hot, stopped, plain, outcomes)
	}
	if !strings.Contains(strings.Join(outcomes, "\n"), "then kept stopped until") {
		t.Errorf("outcomes do not say a runner is kept stopped: %q", outcomes)
	}
}

// A release terminates a runner past the pool's maximum runner age instead
// of giving it back.
func TestReleaseRetiresTooOldRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.MaxRunnerAge = protocol.Duration(24 * time.Hour)
	e.writeConfig()
	e.claimed(t, map[string]behavior{"i-1": healthy, "i-2": healthy})
	e.db.setInstance(t, "i-1", func(r *protocol.Instance) { r.LaunchedAt = protocol.FormatTime(time.Now().Add(-25 * time.Hour)) })
	outcomes, err := e.release()
	if err != nil {
		t.Fatal(err)
	}
	if r := e.db.instance(t, "i-1"); r.State != protocol.StateTerminated {
		t.Errorf("i-1 is %s, want terminated: %q", r.State, outcomes)
	}
	if r := e.db.instance(t, "i-2"); r.State != protocol.StateIdle {
		t.Errorf("i-2 is %s, want idle: %q", r.State, outcomes)
	}
	if q := e.sqs.queuedIDs(t, largeURL); !slices.Equal(q, []string{"i-2"}) {
		t.Errorf("queue holds %v, want i-2", q)
	}
}
