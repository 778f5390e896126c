package claim

import (
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// World is the claim tests' world (newEnv: a pool on the AWS fakes with
// real agents) for the tests of claims and releases with the pool's
// maintenance alongside (maintained_test.go, package claim_test: package
// maintenance imports this one).
type World struct{ e *env }

func NewWorld(t *testing.T) *World { return &World{newEnv(t)} }

// Claimer claims from the world's pool; its ReapInterval is -1 until a
// test sets it.
func (w *World) Claimer() *Claimer { return w.e.c }

func (w *World) Request(n int) Request { return w.e.request(n) }

// SetWarm gives the pool's config warm targets.
func (w *World) SetWarm(targets map[string]protocol.WarmTarget) {
	w.e.cfg.Warm = targets
	w.e.writeConfig()
}

// SeedIdle and SeedStopped put a healthy hot or stopped large runner in
// the pool.
func (w *World) SeedIdle(id string)    { w.e.seedIdle(id, healthy) }
func (w *World) SeedStopped(id string) { w.e.seedStopped(id, healthy) }

// PutExpired writes the record of an idle runner past its deadline.
func (w *World) PutExpired(id string) {
	now := time.Now()
	w.e.putRecord(id, protocol.StateIdle, "", now.Add(-time.Minute), now)
}

// Instances are the pool's instance records, by id.
func (w *World) Instances() map[string]protocol.Instance { return w.e.instances() }

// FleetCalls counts the CreateFleet calls made.
func (w *World) FleetCalls() int { return len(w.e.ec2.FleetInputs()) }

// ReaperLeaseTaken writes the reaper's lease as last taken at.
func (w *World) ReaperLeaseTaken(at time.Time) {
	w.e.db.Put(protocol.BaseItem(protocol.TypeLease, protocol.ReaperLeaseID, protocol.FormatTime(at)))
}

// Sources counts a claim's runners by where they came from.
func Sources(res *Result) map[string][]string { return sources(res) }

const TestPool, TestRun = testPool, testRun
