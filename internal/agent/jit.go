package agent

import (
	"cmp"
	"context"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

// A run claimed through the pool's broker hands the runner a registration
// grant instead of a registration token. Each job of the run then starts
// on a just-in-time runner of its own, which the broker mints with the
// grant: GitHub sends it one job and then removes it, and once its runner
// exits the agent ends every process of the job and wipes the runner user,
// as a release does, before the next job's runner starts. The instance
// stays warm across jobs and runs; no job starts where another ran.

// jitRun is a run's just-in-time registrations.
type jitRun struct {
	grant protocol.RegistrationGrant
	// runner is the registration minted last (RunnerID 0: none yet): its
	// runner runs the run's current job, or will.
	runner    protocol.JITRunner
	startedAt time.Time // when its runner started
	endedAt   time.Time // when the agent saw its runner exit; zero while it runs
	// quickExits counts the runners in a row that exited at once, or whose
	// registration the broker did not mint: the next job's runner starts
	// jobStartBackoff later.
	quickExits int
}

// shortRunnerLife: a just-in-time runner that exits sooner most likely ran
// no job (GitHub refused it, or it failed to start). The next one then
// waits, longer and longer up to the runner check interval, rather than
// mint a registration at GitHub's expense in a loop. A job's own setup
// takes seconds; a run of jobs shorter than this pays the wait.
const shortRunnerLife = 5 * time.Second

// jobStartBackoff is how long after the last runner exited the next job's
// runner starts: at once, unless runners keep exiting at once (quickExits
// in a row).
func (a *Agent) jobStartBackoff(quickExits int) time.Duration {
	if quickExits == 0 {
		return 0
	}
	return retry.Backoff{First: time.Second, Max: a.interval(a.cfg.Intervals.RunnerCheck)}.Wait(quickExits)
}

// startFirstJob starts the runner of the first job of the grant's run on
// a just-in-time registration, minted while the agent proves that no
// process of the runner user is left: none may read the configuration.
func (a *Agent) startFirstJob(ctx context.Context, grant protocol.RegistrationGrant) error {
	jit := &jitRun{grant: grant}
	a.jit = jit
	runner, readyErr, mintErr := a.mintWhile(ctx, jit, a.d.Host.EndJobs)
	if err := cmp.Or(readyErr, mintErr); err != nil {
		return err
	}
	return a.startJob(ctx, jit, runner)
}

// nextJob starts the runner of the next job of runID, its last runner
// having exited: it ends every process of the job, wipes the runner user,
// and starts a runner on a new just-in-time registration. It returns when
// to poll next. A runner user it cannot wipe, or a runner that cannot
// start, retires the instance; a registration the broker does not mint is
// asked for again after a wait.
func (a *Agent) nextJob(ctx context.Context, runID string) time.Duration {
	jit, poll := a.jit, a.interval(a.cfg.Intervals.ReleasePoll)
	a.mu.Lock()
	failed := a.failed
	a.mu.Unlock()
	if failed {
		return poll
	}
	now := a.d.Clock.Now()
	if jit.endedAt.IsZero() {
		jit.endedAt = now
		if now.Sub(jit.startedAt) < shortRunnerLife {
			jit.quickExits++
		} else {
			jit.quickExits = 0
		}
	}
	if wait := jit.endedAt.Add(a.jobStartBackoff(jit.quickExits)).Sub(now); wait > 0 {
		return min(wait, poll)
	}
	a.logf("the runner of run %s exited: wiping the runner user for the run's next job, on a registration of its own", runID)
	began, suspect := now, jit.quickExits > 0
	runner, readyErr, mintErr := a.mintWhile(ctx, jit, func(ctx context.Context) error { return a.readyForNextJob(ctx, runID, suspect) })
	switch {
	case ctx.Err() != nil:
		return poll
	case readyErr != nil:
		a.retire(ctx, runID, "the runner user could not be made ready for the run's next job: "+readyErr.Error())
		return poll
	case mintErr != nil:
		a.logf("the next job of run %s has no runner yet: %v", runID, mintErr)
		jit.endedAt = a.d.Clock.Now()
		jit.quickExits++
		return min(a.jobStartBackoff(jit.quickExits), poll)
	}
	if err := a.startJob(ctx, jit, runner); err != nil {
		if ctx.Err() == nil {
			a.retire(ctx, runID, "the runner of the run's next job could not start: "+err.Error())
		}
		return poll
	}
	a.logf("runner %s of run %s's next job started in %s, the runner user wiped while its registration was minted",
		runner.RunnerName, runID, jit.startedAt.Sub(began).Round(time.Millisecond))
	return poll
}

// readyForNextJob readies the machine for the next job: every process of
// the last one ended, the runner user wiped as a release wipes it, and the
// installation checked. After a runner that exited at once (suspect) it
// first installs GitHub's newest runner release when newer than the
// installed one: GitHub refuses older runners at once after a critical
// security release (unless pinned).
func (a *Agent) readyForNextJob(ctx context.Context, runID string, suspect bool) error {
	if err := a.d.Host.EndJobs(ctx); err != nil {
		return err
	}
	if err := a.d.Host.Wipe(ctx); err != nil {
		return err
	}
	if suspect {
		a.installNewerRelease(ctx, runID)
	}
	return a.d.Runner.Check(ctx)
}

// mintWhile asks the broker for the next job's registration while ready
// readies the machine for it, so that a job's start waits for the slower
// of the two, not for both. The registration is the run's from then on
// (deleted when the agent leaves the run), used or not.
func (a *Agent) mintWhile(ctx context.Context, jit *jitRun, ready func(context.Context) error) (runner protocol.JITRunner, readyErr, mintErr error) {
	type minted struct {
		runner protocol.JITRunner
		err    error
	}
	mint := make(chan minted, 1)
	go func() {
		began := a.d.Clock.Now()
		runner, err := a.d.Broker.Register(ctx, jit.grant)
		if err == nil {
			a.logf("the pool's broker minted registration %s in %s", runner.RunnerName, a.d.Clock.Now().Sub(began).Round(time.Millisecond))
		}
		mint <- minted{runner, err}
	}()
	readyErr = ready(ctx)
	m := <-mint
	if m.err == nil {
		jit.runner = m.runner
	}
	return m.runner, readyErr, m.err
}

// startJob starts the runner of runner's registration.
func (a *Agent) startJob(ctx context.Context, jit *jitRun, runner protocol.JITRunner) error {
	a.logf("starting just-in-time runner %s for a job of run %s", runner.RunnerName, jit.grant.RunID)
	if err := a.d.Runner.StartJIT(ctx, runner.EncodedJITConfig); err != nil {
		return err
	}
	jit.startedAt, jit.endedAt = a.d.Clock.Now(), time.Time{}
	return nil
}
