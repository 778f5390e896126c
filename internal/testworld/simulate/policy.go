package simulate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Policy is how the pool keeps runners warm. All of it is pool
// configuration the real claim code reads (configure) and fills the
// replay schedules; the driver is the same for every policy.
type Policy struct {
	Name        string
	IdleTimeout time.Duration
	// Warm are the targets by class (the pool's warm attribute): a
	// release keeps runners hot, then (on-demand ones) stopped, up to
	// them; claims and releases top the stopped tier up.
	Warm map[string]protocol.WarmTarget
	// FillAtStart: the pool's apply fills the targets in force as the
	// replay starts (its plan shows them lacking).
	FillAtStart bool
	// FillAtWindows: a scheduled ec2runners_warm action fills the targets
	// as each window of the schedules opens.
	FillAtWindows bool
}

// configure sets what the policy decides in the pool config the claims
// read.
func (p Policy) configure(cfg *protocol.PoolConfig) {
	cfg.IdleTimeout = protocol.Duration(p.IdleTimeout)
	cfg.Warm = p.Warm
}

// inWindow tells whether a window of class's schedule is open at t.
func (p Policy) inWindow(class string, t time.Time) bool {
	return slices.ContainsFunc(p.Warm[class].Schedule, func(w protocol.WarmWindow) bool { return w.Contains(t) })
}

// windowOpenings are the moments in [from, to) where a window of the
// policy's schedules opens, in order, each once.
func (p Policy) windowOpenings(from, to time.Time) []time.Time {
	seen := map[time.Time]bool{}
	for _, target := range p.Warm {
		for _, w := range target.Schedule {
			loc, err := time.LoadLocation(w.TimeZone)
			opens, perr := protocol.ParseClock(w.From)
			if err != nil || perr != nil {
				continue // validated by the provider; the guide's are valid
			}
			local := from.In(loc)
			for day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc); day.Before(to); day = day.AddDate(0, 0, 1) {
				at := time.Date(day.Year(), day.Month(), day.Day(), int(opens/time.Hour), int(opens%time.Hour/time.Minute), 0, 0, loc)
				if slices.Contains(w.Days, protocol.WeekDays[day.Weekday()]) && !at.Before(from) && at.Before(to) {
					seen[at.UTC()] = true
				}
			}
		}
	}
	return slices.SortedFunc(maps.Keys(seen), time.Time.Compare)
}

// SeedsPolicy is the seeds' (and the provider's default): hot only, 7
// minutes.
func SeedsPolicy() Policy {
	p := HotPolicy(seedsIdle)
	p.Name += " (ec2-runner-pool-manager's)"
	return p
}

// seedsIdle is the seeds' idle_timeout, the provider's default.
const seedsIdle = 7 * time.Minute

// HotPolicy keeps released runners hot for idle.
func HotPolicy(idle time.Duration) Policy {
	return Policy{Name: fmt.Sprintf("hot, idle %s", protocol.FormatDuration(idle)), IdleTimeout: idle}
}

// PerClass is a count of runners for each of the simulated pool's classes.
type PerClass struct{ Large, XLarge int }

func (c PerClass) of(class string) int {
	if class == "xlarge" {
		return c.XLarge
	}
	return c.Large
}

func (c PerClass) String() string { return fmt.Sprintf("%d large + %d xlarge", c.Large, c.XLarge) }

// Window is a window of a policy's schedule: when (WarmWindow's days,
// hours and time zone; its counts are not read) and its targets by class,
// on top of the stopped ones at all hours.
type Window struct {
	When         protocol.WarmWindow
	Hot, Stopped PerClass
}

func (w Window) String() string {
	var tiers []string
	if w.Hot != (PerClass{}) {
		tiers = append(tiers, "hot "+w.Hot.String())
	}
	if w.Stopped != (PerClass{}) {
		tiers = append(tiers, "stopped "+w.Stopped.String())
	}
	days := strings.Join(w.When.Days, ",")
	switch len(w.When.Days) {
	case 5:
		days = "weekdays"
	case 7:
		days = "daily"
	}
	return fmt.Sprintf("%s %s-%s %s", strings.Join(tiers, ", "), w.When.From, w.When.To, days)
}

// The windows of the guide's schedules, in the traces' time zone (UTC):
// office hours, and the half hours around the nightly batch (02:00).
var (
	OfficeHours = protocol.WarmWindow{Days: []string{"mon", "tue", "wed", "thu", "fri"}, From: "08:00", To: "19:00", TimeZone: "UTC"}
	BatchHours  = protocol.WarmWindow{Days: protocol.WeekDays, From: "01:30", To: "02:30", TimeZone: "UTC"}
)

// WarmPolicy idles for idle and keeps stopped runners at all hours:
// released on-demand runners stop after their idle time while the tier
// lacks them, claims and releases top it up, and the pool's apply fills it
// at the start. Windows add targets at their hours, filled as each opens
// by a scheduled ec2runners_warm action.
func WarmPolicy(idle time.Duration, stopped PerClass, windows ...Window) Policy {
	warm := map[string]protocol.WarmTarget{}
	for class := range Classes {
		target := protocol.WarmTarget{Stopped: stopped.of(class)}
		for _, w := range windows {
			ww := w.When
			if w.Hot != (PerClass{}) {
				ww.Hot = protocol.Count(w.Hot.of(class))
			}
			if w.Stopped != (PerClass{}) { // a window's target replaces the base one: add it
				ww.Stopped = protocol.Count(stopped.of(class) + w.Stopped.of(class))
			}
			target.Schedule = append(target.Schedule, ww)
		}
		warm[class] = target
	}
	name := fmt.Sprintf("idle %s, stopped %s", protocol.FormatDuration(idle), stopped)
	for _, w := range windows {
		name += ", " + w.String()
	}
	if len(windows) > 0 {
		name += " (filled as it opens)"
	}
	return Policy{Name: name, IdleTimeout: idle, Warm: warm, FillAtStart: true, FillAtWindows: len(windows) > 0}
}

// Policies are the guide's: the seeds', longer idle timeouts, stopped
// tiers of four sizes (one with the seeds' idle timeout), hot runners in
// office hours on top, and a stopped window for the nightly batch.
func Policies() []Policy {
	idle := 2 * time.Minute
	stopped := PerClass{16, 4}
	return []Policy{SeedsPolicy(), HotPolicy(15 * time.Minute), HotPolicy(time.Hour),
		WarmPolicy(seedsIdle, stopped),
		WarmPolicy(idle, PerClass{8, 2}), WarmPolicy(idle, stopped), WarmPolicy(idle, PerClass{24, 6}), WarmPolicy(idle, PerClass{32, 8}),
		WarmPolicy(idle, stopped, Window{When: OfficeHours, Hot: PerClass{8, 2}}),
		WarmPolicy(idle, stopped, Window{When: OfficeHours, Hot: PerClass{16, 4}}),
		WarmPolicy(idle, stopped, Window{When: BatchHours, Stopped: PerClass{300, 120}}),
	}
}
