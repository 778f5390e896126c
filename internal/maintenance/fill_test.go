package maintenance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

func (e *env) warm(opts ...func(*WarmOptions)) WarmResult {
	e.T.Helper()
	o := WarmOptions{Timings: timings()}
	for _, f := range opts {
		f(&o)
	}
	res, err := Warm(context.Background(), e.c, poolworld.Pool, o)
	if err != nil {
		e.T.Fatal(err)
	}
	return res
}

// A fill launches what each tier lacks: stopped runners with their stopped
// time (they stop themselves once prepared), hot runners that join the
// queue with hot deadlines once ready. Nothing registers.
func TestWarmFillsBothTiers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 2, Stopped: 1}}
	e.writeConfig()
	start := time.Now()
	res := e.warm()
	if len(res.Launched) != 3 {
		t.Fatalf("launched %v, want 3: %+v", res.Launched, res)
	}
	want := TierCounts{Hot: 2, HotTarget: 2, Stopped: 1, StoppedTarget: 1}
	if res.Before["large"] != (TierCounts{HotTarget: 2, StoppedTarget: 1}) || res.After["large"] != want {
		t.Errorf("before %+v, after %+v; want none, then %+v", res.Before["large"], res.After["large"], want)
	}
	status, err := WarmStatus(context.Background(), e.c, poolworld.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if status["large"] != want {
		t.Errorf("status %+v, want %+v", status["large"], want)
	}
	queued := e.SQS.QueuedIDs(t, poolworld.LargeURL)
	var stopped []string
	for _, id := range res.Launched {
		r := e.DB.Instance(t, id)
		if r.State != protocol.StateIdle || r.RunID != "" || r.TemplateVersion != "1" || r.LaunchedAt == "" {
			t.Errorf("%s: %+v, want idle, unowned, with its launch facts", id, r)
		}
		if r.StopUntil != "" {
			stopped = append(stopped, id)
			poolworld.During(start, claim.MaxStoppedAge).Check(t, id+" stopUntil", r.StopUntil)
			if slices.Contains(queued, id) {
				t.Errorf("the stopped runner %s is in the queue", id)
			}
			continue
		}
		poolworld.During(start, protocol.MaxHotAge).Check(t, id+" hot deadline", r.Threshold)
		if !slices.Contains(queued, id) {
			t.Errorf("the hot runner %s is not in the queue %v", id, queued)
		}
	}
	e.EC2.Mu.Lock()
	defer e.EC2.Mu.Unlock()
	if len(stopped) != 1 || !e.EC2.Stopped[stopped[0]] {
		t.Errorf("stopped tier %v, EC2 stopped %v; want one runner that stopped itself", stopped, e.EC2.Stopped)
	}
	for _, id := range res.Launched {
		if !strings.HasPrefix(e.EC2.InitialRunIDs[id], "warm-") {
			t.Errorf("%s's InitialRunId is %q, want a fill id", id, e.EC2.InitialRunIDs[id])
		}
	}
}

// A full pool launches nothing; a fill bounded by Most launches at most
// that many per tier.
func TestWarmLaunchesOnlyWhatLacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 1, Stopped: 3}}
	e.writeConfig()
	e.seedStopped("i-s1")
	res := e.warm(func(o *WarmOptions) { o.Most, o.Tiers = 1, []protocol.Tier{protocol.TierStopped} })
	if len(res.Launched) != 1 || res.After["large"].Stopped != 2 || res.After["large"].Hot != 0 {
		t.Errorf("launched %v, after %+v; want one stopped runner more, no hot one", res.Launched, res.After["large"])
	}
	res = e.warm()
	if len(res.Launched) != 2 || res.After["large"] != (TierCounts{Hot: 1, HotTarget: 1, Stopped: 3, StoppedTarget: 3}) {
		t.Errorf("launched %v, after %+v; want the last stopped and the hot one", res.Launched, res.After["large"])
	}
	if res = e.warm(); len(res.Launched) != 0 {
		t.Errorf("a full pool launched %v", res.Launched)
	}
}

// Warm runners of an outdated template are retired and replaced.
func TestWarmReplacesOutdatedRunners(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 1}}
	e.writeConfig()
	e.seedStopped("i-old")
	e.EC2.LtVersion = 2
	res := e.warm()
	if !slices.Equal(res.Retired, []string{"i-old"}) || len(res.Launched) != 1 {
		t.Fatalf("retired %v, launched %v; want i-old replaced", res.Retired, res.Launched)
	}
	if r := e.DB.Instance(t, res.Launched[0]); r.TemplateVersion != "2" {
		t.Errorf("the replacement is of version %q, want 2", r.TemplateVersion)
	}
	if r := e.DB.Instance(t, "i-old"); r.State != protocol.StateTerminated {
		t.Errorf("i-old is %s", r.State)
	}
}

// A hot runner that is not ready in time is terminated, not queued.
func TestWarmTerminatesHotRunnerNotReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 2}}
	e.writeConfig()
	e.Agents.Set("i-f1", poolworld.StaleHeartbeat) // says nothing
	res := e.warm()
	if res.After["large"].Hot != 1 {
		t.Errorf("after %+v, want one hot runner", res.After["large"])
	}
	if !slices.Contains(e.EC2.TerminatedIDs(), "i-f1") || slices.Contains(e.SQS.QueuedIDs(t, poolworld.LargeURL), "i-f1") {
		t.Errorf("i-f1 never got ready: terminated %v, queue %v", e.EC2.TerminatedIDs(), e.SQS.QueuedIDs(t, poolworld.LargeURL))
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "i-f1 launched for the hot tier was not ready") {
		t.Errorf("notes %q do not say why i-f1 was terminated", res.Notes)
	}
}

// A pool without fleet settings cannot fill: it says so and launches nothing.
func TestWarmWithoutFleetSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 1}}
	e.cfg.Fleet = nil
	e.writeConfig()
	res := e.warm()
	if len(res.Launched) != 0 || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "has no fleet settings") {
		t.Errorf("launched %v, notes %q", res.Launched, res.Notes)
	}
}

// A fill that cannot launch or keep what a class lacks says so, by class,
// with why: the pool's apply and the ec2runners_warm action warn with it,
// instead of leaving the tier empty unexplained. A class it fills, or one
// it was not to fill (Tiers, Most), is not short.
func TestWarmSaysWhyAClassLacks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		target protocol.WarmTarget
		setup  func(e *env)
		want   []string // in the class's reasons
		err    bool     // Warm fails too
	}{
		{"launch template of another pool", protocol.WarmTarget{Stopped: 1},
			func(e *env) { e.EC2.LtTags = map[string]string{protocol.TagPool: "another"} },
			[]string{"launch template lt-0123 does not carry the tag ec2runners:pool = testpool"}, true},
		{"no launch template", protocol.WarmTarget{Hot: 1},
			func(e *env) { e.EC2.LtMissing = true }, []string{"reading launch template lt-0123", "InvalidLaunchTemplateId.NotFound"}, true},
		{"CreateFleet fails", protocol.WarmTarget{Stopped: 1},
			func(e *env) { e.EC2.FleetErr = errors.New("UnauthorizedOperation: not allowed") },
			[]string{"CreateFleet: UnauthorizedOperation: not allowed"}, true},
		{"CreateFleet launches fewer", protocol.WarmTarget{Stopped: 2},
			func(e *env) { e.EC2.ShortBy = 1 }, []string{"CreateFleet launched 1 of 2", "InsufficientInstanceCapacity"}, false},
		{"hot runner never ready", protocol.WarmTarget{Hot: 1},
			func(e *env) { e.Agents.Set("i-f1", poolworld.StaleHeartbeat) }, []string{"i-f1 launched for the hot tier was not ready"}, false},
		{"no fleet settings", protocol.WarmTarget{Hot: 1},
			func(e *env) { e.cfg.Fleet = nil }, []string{"has no fleet settings"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.cfg.Warm = map[string]protocol.WarmTarget{"large": tc.target, "xlarge": {Stopped: 1}}
			tc.setup(e)
			e.writeConfig()
			res, err := Warm(context.Background(), e.c, poolworld.Pool, WarmOptions{Timings: timings()})
			if (err != nil) != tc.err {
				t.Errorf("Warm: %v, want an error: %v", err, tc.err)
			}
			why := strings.Join(res.Short["large"], "\n")
			for _, w := range tc.want {
				if !strings.Contains(why, w) {
					t.Errorf("class large short for %q, want it to say %q", res.Short["large"], w)
				}
			}
			if !strings.HasPrefix(why, "class large: ") {
				t.Errorf("reasons %q do not name the class", res.Short["large"])
			}
			// xlarge's runner, poolworld.Healthy, fills it: only large is short.
			if tc.name == "hot runner never ready" {
				if _, short := res.Short["xlarge"]; short {
					t.Errorf("class xlarge, filled, is short: %q", res.Short["xlarge"])
				}
			}
		})
	}
}

// A fill that gets what it set out to launch leaves no class short, also
// when WarmOptions leave tiers lacking.
func TestWarmFilledIsNotShort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Hot: 1, Stopped: 3}}
	e.writeConfig()
	res := e.warm(func(o *WarmOptions) { o.Most, o.Tiers = 1, []protocol.Tier{protocol.TierStopped} })
	if len(res.Launched) != 1 || len(res.Short) != 0 {
		t.Errorf("launched %v, short %q; want one stopped runner and no class short (the options left the rest)", res.Launched, res.Short)
	}
	if res = e.warm(); len(res.Launched) != 3 || len(res.Short) != 0 {
		t.Errorf("launched %v, short %q; want the rest, and no class short", res.Launched, res.Short)
	}
}

// A fill retires warm runners of the template the pool launched before
// either upgrade and replaces them from the new one.
func TestWarmRetiresRunnersOfAnotherTemplate(t *testing.T) {
	for _, up := range poolworld.Upgrades {
		t.Run(up.Name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.cfg.Fleet.LaunchTemplateVersion = "$Default" // version 1 of lt-0123
			e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 1}}
			e.writeConfig()
			e.seedStopped("i-old")
			e.DB.SetInstance(t, "i-old", func(r *protocol.Instance) { r.TemplateID = "lt-0123" })
			if res := e.warm(); len(res.Retired)+len(res.Launched) != 0 {
				t.Fatalf("before the upgrade: retired %v, launched %v", res.Retired, res.Launched)
			}
			up.Apply(e.World, &e.cfg)
			res := e.warm()
			if !slices.Equal(res.Retired, []string{"i-old"}) || len(res.Launched) != 1 {
				t.Fatalf("retired %v, launched %v; want i-old replaced", res.Retired, res.Launched)
			}
			e.CheckLaunchedFrom(t, res.Launched[0], up.ID, up.Version)
		})
	}
}
