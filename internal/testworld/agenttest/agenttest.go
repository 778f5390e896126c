// Package agenttest is the machine of a simulated instance: a Host and a
// Runner for the real agent (package agent) that touch nothing on this
// machine, keep what an instance keeps across its boots (the runner
// installed, the preparation done), and misbehave when a test asks, and a
// pool's Broker, so that the simulations of the tests, the demo and the
// simulator run the agent's own code against the AWS of their choice.
package agenttest

import (
	"context"
	"errors"
	"fmt"
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
	jitConfigs []string      // the just-in-time configurations started, in order
	jobDone    chan struct{} // closed once the just-in-time runner started last exits
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
	r.registered, r.jobDone = &reg, nil
	return nil
}

// StartJIT starts a just-in-time runner with the configuration: it runs
// until its job is done (EndJob) or it is stopped.
func (r *Runner) StartJIT(_ context.Context, encodedConfig string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jitConfigs = append(r.jitConfigs, encodedConfig)
	r.jobDone = make(chan struct{})
	return nil
}

// EndJob ends the job of the just-in-time runner started last: it exits,
// as an ephemeral runner does once its job is done.
func (r *Runner) EndJob() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exit()
}

// exit makes the just-in-time runner exit; the caller holds r.mu.
func (r *Runner) exit() {
	select {
	case <-r.jobDone:
	default:
		if r.jobDone != nil {
			close(r.jobDone)
		}
	}
}

// JITConfigs are the just-in-time configurations runners started with,
// in order.
func (r *Runner) JITConfigs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.jitConfigs...)
}

// Running tells whether the run's runner runs: a just-in-time runner until
// its job is done, a registered one while GitHub does not refuse its
// version.
func (r *Runner) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobDone != nil {
		select {
		case <-r.jobDone:
			return false
		default:
			return true
		}
	}
	return r.registered == nil || r.RefuseOlderThan == "" || protocol.CompareRunnerVersions(r.installed, r.RefuseOlderThan) >= 0
}

// Exited is closed once the just-in-time runner started last exits; nil
// before one started.
func (r *Runner) Exited() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobDone
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

// Stop stops the just-in-time runner, if one runs.
func (r *Runner) Stop(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exit()
	return nil
}

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

// Broker is a pool's broker: it mints numbered just-in-time runners, named
// after the instance whose grant it is shown, and deletes them, unless a
// test asks otherwise. It trusts every grant: the broker's checks are
// package broker's to test.
type Broker struct {
	// RegisterFails: minting fails with this error.
	RegisterFails error

	mu           sync.Mutex
	minted       []protocol.JITRunner
	presented    []protocol.RegistrationGrant // with each Register, in order
	deregistered []int64
}

var _ agent.Broker = (*Broker)(nil)

// Register mints the next just-in-time runner, unless RegisterFails.
func (b *Broker) Register(_ context.Context, g protocol.RegistrationGrant) (protocol.JITRunner, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.presented = append(b.presented, g)
	if b.RegisterFails != nil {
		return protocol.JITRunner{}, b.RegisterFails
	}
	_, id, _ := protocol.SplitInstanceARN(g.InstanceARN)
	n := len(b.minted) + 1
	runner := protocol.JITRunner{RunnerID: int64(n), RunnerName: protocol.JITRunnerName(id, fmt.Sprint(n)), EncodedJITConfig: fmt.Sprintf("jit-config-%d", n)}
	b.minted = append(b.minted, runner)
	return runner, nil
}

// Deregister deletes the runner.
func (b *Broker) Deregister(_ context.Context, _ protocol.RegistrationGrant, runnerID int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deregistered = append(b.deregistered, runnerID)
	return nil
}

// Minted are the runners it minted, in order.
func (b *Broker) Minted() []protocol.JITRunner {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]protocol.JITRunner(nil), b.minted...)
}

// Presented are the grants the agent presented to mint, in order.
func (b *Broker) Presented() []protocol.RegistrationGrant {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]protocol.RegistrationGrant(nil), b.presented...)
}

// Deregistered are the runners it was asked to delete, in order.
func (b *Broker) Deregistered() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int64(nil), b.deregistered...)
}
