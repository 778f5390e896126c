// Package agenttest is the machine of a simulated instance: a Host and a
// Runner for the real agent (package agent) that touch nothing on this
// machine, keep what an instance keeps across its boots (the runner
// installed, the preparation done), and misbehave when a test asks, so that
// the simulations of the tests, the demo and the simulator run the agent's
// own code against the AWS of their choice.
package agenttest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Host is an instance's machine: its walls always go up and its jobs end
// at once; it remembers its preparation across boots.
type Host struct {
	mu       sync.Mutex
	prepared bool
}

var _ agent.Host = (*Host)(nil)

// RaiseWalls sets nothing up.
func (h *Host) RaiseWalls(context.Context) error { return nil }

// Prepare prepares the instance.
func (h *Host) Prepare(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prepared = true
	return nil
}

// EndJobs ends nothing: there are no jobs.
func (h *Host) EndJobs(context.Context) error { return nil }

// Wipe wipes nothing.
func (h *Host) Wipe(context.Context) error { return nil }

// Prepared tells whether the instance was prepared, at any boot.
func (h *Host) Prepared() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.prepared
}

// Runner is an instance's GitHub runner: installed at once, registered and
// removed at once unless a test asks otherwise.
type Runner struct {
	// Clock times RegisterDelay (nil: the machine's).
	Clock agent.Clock
	// RegisterDelay: registration takes this long.
	RegisterDelay time.Duration
	// RegisterHangs: registration never ends (until the boot does).
	RegisterHangs bool
	// RegisterFails: registration fails with this error.
	RegisterFails error
	// RemoveHangs: deregistration never ends (until the boot does);
	// OnRemoveHang hears it begin.
	RemoveHangs  bool
	OnRemoveHang func()
	// RefuseOlderThan: GitHub refuses a registered runner older than this
	// version, as after a critical security release: it stops, and runs
	// again only when restarted on a newer installation.
	RefuseOlderThan string
	// RestartFails: starting the runner again fails with this error.
	RestartFails error

	mu         sync.Mutex
	installed  string
	registered *agent.Registration
	restarts   int
}

var _ agent.Runner = (*Runner)(nil)

// ErrRefused is the registration failure of a runner told to fail.
var ErrRefused = errors.New("the registration failed (simulated)")

// Installed is the version installed.
func (r *Runner) Installed() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.installed
}

// Install installs the archive's version at once.
func (r *Runner) Install(_ context.Context, a agent.Archive) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.installed = a.Version
	return nil
}

// Check finds the installation intact.
func (r *Runner) Check(context.Context) error { return nil }

// Register registers as the test asked.
func (r *Runner) Register(ctx context.Context, reg agent.Registration) error {
	switch {
	case r.RegisterHangs:
		<-ctx.Done()
		return ctx.Err()
	case r.RegisterFails != nil:
		return r.RegisterFails
	case r.RegisterDelay > 0:
		clock := r.Clock
		if clock == nil {
			clock = agent.SystemClock{}
		}
		if err := clock.Sleep(ctx, r.RegisterDelay); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.registered = &reg
	return nil
}

// Running tells whether the registered runner runs: not while GitHub
// refuses its version.
func (r *Runner) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.registered == nil || r.RefuseOlderThan == "" || protocol.CompareRunnerVersions(r.installed, r.RefuseOlderThan) >= 0
}

// Restart starts the runner again, on the installation, unless
// RestartFails.
func (r *Runner) Restart(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restarts++
	return r.RestartFails
}

// Restarts counts the runner's starts after its registration.
func (r *Runner) Restarts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restarts
}

// Stop stops nothing.
func (r *Runner) Stop(context.Context) error { return nil }

// Remove deregisters as the test asked.
func (r *Runner) Remove(ctx context.Context, _ string) error {
	if r.RemoveHangs {
		if r.OnRemoveHang != nil {
			r.OnRemoveHang()
		}
		<-ctx.Done()
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.registered = nil
	return nil
}

// Registered is the registration of the run served, nil when none.
func (r *Runner) Registered() *agent.Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.registered
}
