package agent

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Run is one boot of the agent: it raises the walls, prepares the instance
// and tells whoever launched it, then heartbeats, checks its deadlines and
// serves runs until it stops or terminates its instance (or ctx ends). It
// returns once every loop it started has ended.
func (a *Agent) Run(ctx context.Context) End {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	walls := a.d.Host.RaiseWalls(ctx)
	if walls != nil {
		a.logf("the walls between jobs and the pool are down: %v", walls)
	}
	a.logf("agent of %s in pool %s (initial run: %s)", a.id.InstanceID, a.cfg.Pool, cmp.Or(a.id.InitialRunID, "none"))
	ended := make(chan End, 1)
	// The first heartbeat goes before anything slow: a claim waiting for a
	// fleet instance sees it alive at once.
	loop := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	loop(a.heartbeats)
	loop(func(ctx context.Context) {
		for ctx.Err() == nil {
			if end := a.SelfCheck(ctx); end != EndNone {
				ended <- end
				cancel()
				return
			}
			_ = a.d.Clock.Sleep(ctx, a.interval(a.cfg.Intervals.SelfCheck))
		}
	})
	if a.Boot(ctx, walls) == nil {
		loop(a.serve)
	}
	select {
	case end := <-ended:
		return end
	case <-ctx.Done():
		return EndNone
	}
}

// giveUp stops the heartbeats for good: the pool ends an instance whose
// heartbeat stopped. A beat on its way lands first, so that no one sees a
// fresh beat after what the agent says next.
func (a *Agent) giveUp() {
	a.beat.Lock()
	defer a.beat.Unlock()
	a.mu.Lock()
	a.failed = true
	a.mu.Unlock()
}

// retire ends an instance that can serve its run no more: it heartbeats no
// more, so the pool ends it even if EC2 refuses, and terminates it.
func (a *Agent) retire(ctx context.Context, runID, why string) {
	a.giveUp()
	a.terminate(ctx, runID, why)
}

// heartbeats beats on a fixed schedule, one interval after the last beat
// was due, so that a slow write does not stretch the interval; a late beat
// goes at once, without a burst to catch up.
func (a *Agent) heartbeats(ctx context.Context) {
	interval := a.interval(a.cfg.Intervals.Heartbeat)
	next := a.d.Clock.Now()
	for ctx.Err() == nil {
		if err := a.Heartbeat(ctx); err != nil && ctx.Err() == nil {
			a.logf("%v", err)
		}
		next = next.Add(interval)
		if wait := next.Sub(a.d.Clock.Now()); wait > 0 {
			_ = a.d.Clock.Sleep(ctx, wait)
		} else {
			next = a.d.Clock.Now()
		}
	}
}

// serve polls its record and serves the runs it names until ctx ends.
func (a *Agent) serve(ctx context.Context) {
	a.logf("ready: waiting for a claim")
	for ctx.Err() == nil {
		a.pause(ctx, a.Poll(ctx))
	}
}

// pause waits d, or until the run's runner exits, whichever comes first:
// the runner of a run's next job starts as soon as the last one exited.
func (a *Agent) pause(ctx context.Context, d time.Duration) {
	exited := a.d.Runner.Exited()
	select {
	case <-exited:
		exited = nil // Poll saw it exit, and said when to act on it
	default:
	}
	if exited == nil {
		_ = a.d.Clock.Sleep(ctx, d)
		return
	}
	wake, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-exited:
			stop()
		case <-wake.Done():
		}
	}()
	_ = a.d.Clock.Sleep(wake, d)
}

// Boot prepares the instance at this boot, given how raising the walls
// went (walls): the runner installed and the pre-runner script run (once
// per instance), and tells whoever launched it, through a signal for its
// InitialRunId: UD_OK, or UD_FAILED (the agent then heartbeats no more, and
// ends its instance once its record expires). An earlier boot may have
// been cut short before it told. It returns nil when the instance serves.
func (a *Agent) Boot(ctx context.Context, walls error) error {
	err := walls
	if err == nil {
		err = a.prepare(ctx)
	}
	outcome, event := protocol.SignalUserDataOK, EventPrepared
	if err != nil {
		a.logf("preparing the instance failed: %v", err)
		outcome, event = protocol.SignalUserDataFailed, EventPrepareFailed
		a.giveUp()
	}
	if a.id.InitialRunID != "" {
		if serr := a.signal(ctx, outcome, a.id.InitialRunID); serr != nil {
			return errors.Join(err, serr)
		}
	}
	a.emit(event, a.id.InitialRunID, errString(err))
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.ready = true
	a.mu.Unlock()
	return nil
}

// prepare installs the runner, unless one is (the runner is updated only
// while idle, never on a boot a claim waits for), and runs the pre-runner
// script.
func (a *Agent) prepare(ctx context.Context) error {
	if a.d.Runner.Installed() == "" {
		archive, err := a.archiveToInstall(ctx)
		if err != nil {
			return err
		}
		a.logf("installing the GitHub runner %s from %s", archive.Version, archive.URL)
		if err := a.d.Runner.Install(ctx, archive); err != nil {
			return err
		}
	}
	return a.d.Host.Prepare(ctx)
}

// SelfCheck reads its record once and acts on its deadlines: it terminates
// its instance when the record is terminated, when its threshold is more
// than the grace past, and when no record appeared within the orphan
// timeout of its boot (a claim that crashed between launching it and
// writing its record). A runner of the stopped tier stops instead, once
// prepared.
func (a *Agent) SelfCheck(ctx context.Context) End {
	rec, found, err := a.record(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.logf("%v", err)
		}
		return EndNone
	}
	now := a.d.Clock.Now()
	orphaned := now.Sub(a.bootAt) > a.interval(a.cfg.Intervals.OrphanTimeout)
	switch {
	case !found:
		if orphaned {
			return a.terminate(ctx, "", "no instance record "+protocol.FormatDuration(a.interval(a.cfg.Intervals.OrphanTimeout))+" after boot")
		}
	case rec.State == protocol.StateTerminated:
		return a.terminate(ctx, rec.RunID, "its record is terminated")
	case a.pastGrace(rec, now):
		return a.pastThreshold(ctx, rec, orphaned)
	}
	return EndNone
}

// pastGrace tells whether the record's threshold is more than the grace
// past; an unreadable threshold is not.
func (a *Agent) pastGrace(rec protocol.Instance, now time.Time) bool {
	threshold, err := protocol.ParseTime(rec.Threshold)
	return err == nil && now.After(threshold.Add(a.interval(a.cfg.Intervals.SelfTerminationGrace)))
}

// pastThreshold: a runner of the stopped tier stops once this boot is
// ready (a stopped fill must have told its preparation first, and a claim
// that starts it must find it prepared), and terminates when its
// preparation does not end within the orphan timeout. Any other runner
// terminates.
func (a *Agent) pastThreshold(ctx context.Context, rec protocol.Instance, orphaned bool) End {
	now := a.d.Clock.Now()
	grace := protocol.FormatDuration(a.interval(a.cfg.Intervals.SelfTerminationGrace))
	if !rec.Stopped(now) {
		return a.terminate(ctx, rec.RunID, "threshold "+rec.Threshold+" (state "+rec.State+") passed more than "+grace+" ago")
	}
	a.mu.Lock()
	ready := a.ready
	a.mu.Unlock()
	switch {
	case ready:
		// A claim may have taken the runner since the record was read: stop
		// only if it still says so.
		again, found, err := a.record(ctx)
		if err != nil || !found || !a.pastGrace(again, a.d.Clock.Now()) || !again.Stopped(a.d.Clock.Now()) {
			return EndNone
		}
		return a.stop(ctx, "idle in the stopped tier until "+again.StopUntil)
	case orphaned:
		return a.terminate(ctx, rec.RunID, "not prepared "+protocol.FormatDuration(a.interval(a.cfg.Intervals.OrphanTimeout))+" after boot")
	}
	return EndNone
}

// terminate terminates its instance; EndNone when EC2 refused (the next
// check tries again).
func (a *Agent) terminate(ctx context.Context, runID, why string) End {
	a.logf("terminating this instance: %s", why)
	if _, err := a.d.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{a.id.InstanceID}}); err != nil {
		a.logf("terminating this instance: %v", err)
		return EndNone
	}
	a.emit(EventSelfTerminated, runID, why)
	return EndTerminated
}

// stop stops its instance into the pool's stopped tier: EC2 keeps its disk
// (the runner installed, the instance prepared), and a claim starts it
// again. When EC2 does not stop it (a Spot instance: UnsupportedOperation,
// or any error) it terminates it instead.
func (a *Agent) stop(ctx context.Context, why string) End {
	a.logf("stopping this instance: %s", why)
	if _, err := a.d.EC2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{a.id.InstanceID}}); err != nil {
		return a.terminate(ctx, "", "stopping it failed: "+err.Error())
	}
	a.emit(EventSelfStopped, "", why)
	return EndStopped
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
