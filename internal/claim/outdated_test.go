package claim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/poolworld"
)

// A runner is outdated when the pool launches from another launch template
// (a replaced aws_launch_template: a new id, version 1 again) or another
// version of it. A runner recorded before records named their template is
// judged by its version, and by whether it was launched before the current
// template was created; what nothing tells is not outdated.
func TestOutdated(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return protocol.FormatTime(now.Add(d)) }
	current := TemplateRef{ID: "lt-new", Version: "1", Created: now.Add(-time.Hour)}
	for _, tc := range []struct {
		name       string
		launchedAt string
		from       TemplateRef
		current    TemplateRef
		want       string // a part of the reason; "" not outdated
	}{
		{"same template and version", at(-30 * time.Minute), launchedFrom("lt-new", "1"), current, ""},
		{"replaced template, same version number", at(-2 * time.Hour), launchedFrom("lt-old", "1"), current,
			"launched from launch template lt-old version 1, the pool launches launch template lt-new version 1"},
		{"replaced template, launched after it was created", at(-30 * time.Minute), launchedFrom("lt-old", "1"), current, "launched from launch template lt-old version 1"},
		{"new version of the same template", at(-30 * time.Minute), launchedFrom("lt-new", "1"), TemplateRef{ID: "lt-new", Version: "2", Created: current.Created},
			"launched from launch template lt-new version 1, the pool launches launch template lt-new version 2"},
		// Records from before template ids.
		{"no id, other version", at(-30 * time.Minute), launchedFrom("", "3"), current, "launched from launch template version 3, the pool launches launch template lt-new version 1"},
		{"no id, launched before the template was created", at(-2 * time.Hour), launchedFrom("", "1"), current,
			"launched at 2026-06-01T10:00:00Z, before launch template lt-new version 1 was created (2026-06-01T11:00:00Z): from another launch template"},
		{"no id, launched after the template was created", at(-30 * time.Minute), launchedFrom("", "1"), current, ""},
		{"no id, no version, launched before", at(-2 * time.Hour), TemplateRef{}, current, "before launch template lt-new version 1 was created"},
		{"no launch facts at all", "", TemplateRef{}, current, ""},
		// The current template unknown: nothing is outdated.
		{"current unknown", at(-2 * time.Hour), launchedFrom("lt-old", "1"), TemplateRef{}, ""},
		{"current creation unknown", at(-2 * time.Hour), launchedFrom("", "1"), TemplateRef{ID: "lt-new", Version: "1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Retirement(tc.launchedAt, tc.from, tc.current, 0, now)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("retirement = %q, want %q", got, tc.want)
			}
		})
	}
	if got := Retirement(at(-25*time.Hour), launchedFrom("lt-new", "1"), current, 24*time.Hour, now); !strings.Contains(got, "more than max_runner_age 24h ago") {
		t.Errorf("a current runner past max_runner_age: %q", got)
	}
}

// templateEnv is a pool that launches $Default of lt-0123, version 1.
func templateEnv(t *testing.T) *env {
	e := newEnv(t)
	e.cfg.Fleet.LaunchTemplateVersion = "$Default"
	e.writeConfig()
	return e
}

// seedHot puts an idle large runner in the queue, launched at launchedAt
// from template id (""; unknown, as recorded before template ids) and
// version.
func (e *env) seedHot(id string, launchedAt time.Time, template, version string) {
	e.t.Helper()
	m := idleMessage(id, "c6i.large", time.Now().Add(time.Hour))
	m.LaunchedAt, m.TemplateID, m.TemplateVersion = protocol.FormatTime(launchedAt), template, version
	e.seedRecord(protocol.Instance{ID: id, State: protocol.StateIdle, Threshold: m.Threshold,
		LaunchedAt: m.LaunchedAt, TemplateID: template, TemplateVersion: version}, healthy)
	e.sqs.Add(largeURL, m.Body())
}

// A claim retires hot and stopped runners of the template the pool
// launched before either upgrade, and launches from the new one; before
// the upgrade, it reuses them.
func TestCreateRetiresRunnersOfAnotherTemplate(t *testing.T) {
	for _, up := range poolworld.Upgrades {
		t.Run(up.Name, func(t *testing.T) {
			t.Parallel()
			e := templateEnv(t)
			e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 1}}
			e.writeConfig()
			e.seedHot("i-hot", time.Now().Add(-10*time.Minute), "lt-0123", "1")
			e.seedHot("i-hot2", time.Now().Add(-10*time.Minute), "lt-0123", "1")
			e.seedStopped("i-stopped", healthy) // version 1
			e.db.setInstance(t, "i-stopped", func(r *protocol.Instance) { r.TemplateID = "lt-0123" })

			// Before: the current runners serve.
			res, err := e.create(1)
			if err != nil {
				t.Fatal(err)
			}
			if got := sources(res); len(got[SourcePool]) != 1 || res.Created != 0 || res.Pickup.Retired != 0 {
				t.Fatalf("before the upgrade: sources %v, retired %d; want a hot runner reused", got, res.Pickup.Retired)
			}
			if inst := res.Instances[0]; inst.TemplateID != "lt-0123" || inst.TemplateVersion != "1" {
				t.Errorf("the claim's instance %+v does not say its template", inst)
			}

			up.Apply(e.w, &e.cfg)
			res, err = e.create(1, func(r *Request) { r.RunID = "run-2" })
			if err != nil {
				t.Fatal(err)
			}
			if got := sources(res); len(got[SourceFleet]) != 1 || res.Pickup.Retired != 1 {
				t.Fatalf("after: sources %v, pickup retired %d; want the hot runner retired and one launched", got, res.Pickup.Retired)
			}
			hot := "i-hot"
			if e.db.instance(t, hot).State != protocol.StateIdle {
				hot = "i-hot2" // the first claim took i-hot
			}
			for _, id := range []string{hot, "i-stopped"} {
				if r := e.db.instance(t, id); r.State != protocol.StateTerminated || !slices.Contains(e.ec2.TerminatedIDs(), id) {
					t.Errorf("%s is %s (terminated in EC2: %v), want retired", id, r.State, e.ec2.TerminatedIDs())
				}
			}
			if len(e.ec2.StartedIDs) != 0 {
				t.Errorf("started %v", e.ec2.StartedIDs)
			}
			e.w.CheckLaunchedFrom(t, res.Instances[0].ID, up.ID, up.Version)
			if inst := res.Instances[0]; inst.TemplateID != up.ID || inst.TemplateVersion != up.Version {
				t.Errorf("the claim's instance %+v, want of %s version %s", inst, up.ID, up.Version)
			}
		})
	}
}

// A release terminates a runner of the template the pool launched before
// either upgrade instead of giving it back; without one, it gives it back,
// its message naming its template.
func TestReleaseRetiresRunnersOfAnotherTemplate(t *testing.T) {
	for _, up := range append(poolworld.Upgrades, poolworld.Upgrade{Name: "no upgrade", Apply: func(*poolworld.World, *protocol.PoolConfig) {}, ID: "lt-0123", Version: "1"}) {
		t.Run(up.Name, func(t *testing.T) {
			t.Parallel()
			e := templateEnv(t)
			res, err := e.create(1)
			if err != nil {
				t.Fatal(err)
			}
			id := res.Instances[0].ID
			e.w.CheckLaunchedFrom(t, id, "lt-0123", "1")
			up.Apply(e.w, &e.cfg)
			outcomes, err := e.release()
			if err != nil {
				t.Fatal(err)
			}
			r := e.db.instance(t, id)
			if up.Name == "no upgrade" {
				q := e.sqs.queued(t, largeURL)
				if r.State != protocol.StateIdle || len(q) != 1 || q[0].TemplateID != "lt-0123" || q[0].TemplateVersion != "1" {
					t.Errorf("%s is %s, queue %+v; want it back in the pool, its message naming lt-0123 version 1", id, r.State, q)
				}
				return
			}
			want := "launched from launch template lt-0123 version 1, the pool launches launch template " + up.ID + " version " + up.Version + "; terminated"
			if len(outcomes) != 1 || !strings.Contains(outcomes[0], want) {
				t.Errorf("outcomes %q, want %q", outcomes, want)
			}
			if r.State != protocol.StateTerminated || len(e.sqs.queued(t, largeURL)) != 0 {
				t.Errorf("%s is %s, queue %v; want it terminated, not queued", id, r.State, e.sqs.queuedIDs(t, largeURL))
			}
		})
	}
}

// Runners recorded before records named their template: when the pool's
// template was replaced after they launched, they are retired, hot or
// stopped; when it was not, they serve.
func TestRunnersFromBeforeTemplateIDs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replaced time.Duration // how long ago the pool's template was created
		retired  bool
	}{
		{"template replaced since they launched", 10 * time.Minute, true},
		{"template older than they are", 3 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := templateEnv(t)
			e.cfg.Warm = map[string]protocol.WarmTarget{"large": {Stopped: 1}}
			e.cfg.Fleet.LaunchTemplateID = "lt-new"
			e.writeConfig()
			e.ec2.LtID, e.ec2.LtCreated = "lt-new", time.Now().Add(-tc.replaced)
			e.seedHot("i-hot", time.Now().Add(-time.Hour), "", "1")
			e.seedStopped("i-stopped", healthy) // launched 2 hours ago, version 1, no template id
			res, err := e.create(2)
			if err != nil {
				t.Fatal(err)
			}
			got := sources(res)
			if !tc.retired {
				if !slices.Equal(got[SourcePool], []string{"i-hot"}) || !slices.Equal(got[SourceStopped], []string{"i-stopped"}) {
					t.Errorf("sources %v, want i-hot reused and i-stopped started", got)
				}
				return
			}
			if len(got[SourceFleet]) != 2 || res.Pickup.Retired != 1 {
				t.Errorf("sources %v, pickup retired %d; want both retired and two launched", got, res.Pickup.Retired)
			}
			for _, id := range []string{"i-hot", "i-stopped"} {
				if r := e.db.instance(t, id); r.State != protocol.StateTerminated {
					t.Errorf("%s is %s, want retired", id, r.State)
				}
			}
			for _, inst := range res.Instances {
				e.w.CheckLaunchedFrom(t, inst.ID, "lt-new", "1")
			}
		})
	}
}
