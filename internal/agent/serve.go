package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// errRunChanged: the record no longer names the run the agent waited for.
var errRunChanged = errors.New("the record no longer names the run")

// Poll is one step of serving: it reads its record once and acts on it. A
// record that names a run (created, claimed or running) gets the runner
// registered for it (and, for a run of just-in-time registrations, the
// next job's runner once the last one exited); one that no longer names
// the run served gets it released; an idle agent keeps its runner on the
// release the pool told it of. It returns when to poll next.
func (a *Agent) Poll(ctx context.Context) time.Duration {
	rec, found, err := a.record(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.logf("%v", err)
		}
		return a.interval(a.cfg.Intervals.ClaimPoll)
	}
	a.mu.Lock()
	serving, registered := a.serving, a.registered
	a.mu.Unlock()
	switch {
	case serving == "" && found && namesRun(rec):
		a.register(ctx, rec.RunID)
		return 0
	case serving == "":
		a.keepRunnerCurrent(ctx)
		return a.interval(a.cfg.Intervals.ClaimPoll)
	case found && rec.RunID == serving:
		switch {
		case !registered || a.d.Runner.Running():
		case a.jit != nil:
			return a.nextJob(ctx, serving)
		default:
			a.restartRunner(ctx, serving)
		}
		return a.interval(a.cfg.Intervals.ReleasePoll)
	}
	a.leave(ctx, serving)
	return 0 // the record may already name the next run
}

// namesRun tells whether the record hands the runner a run: a run id as
// claims validate them (GitHub matches labels case-insensitively, so one
// in capitals could be another run's label) in a state that serves it.
func namesRun(rec protocol.Instance) bool {
	switch rec.State {
	case protocol.StateCreated, protocol.StateClaimed, protocol.StateRunning:
		return protocol.ValidateRunID(rec.RunID) == nil
	}
	return false
}

// register registers a runner for runID and signals how it went; the run
// is served (released when the record leaves it) either way.
func (a *Agent) register(ctx context.Context, runID string) {
	a.mu.Lock()
	a.serving, a.registered = runID, false
	a.mu.Unlock()
	a.jit = nil
	label, err := a.registerRun(ctx, runID)
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, errRunChanged):
		a.logf("run %s was taken back before its token arrived", runID)
		return
	case err != nil:
		a.logf("registering for run %s failed: %v", runID, err)
		if a.signal(ctx, protocol.SignalRegistrationFailed, runID) == nil {
			a.emit(EventRegistrationFailed, runID, err.Error())
		}
		return
	}
	a.mu.Lock()
	a.registered = true
	a.mu.Unlock()
	// The claim checks the label: a runner registered with another would
	// get none of the run's jobs.
	if a.signalLabel(ctx, protocol.SignalRegistered, runID, label) == nil {
		a.emit(EventRegistered, runID, "")
	}
}

// registerRun registers the runner for runID with the label and in the
// runner group its registration token names, and returns the label; or,
// given a registration grant, starts the runner of the run's first job on
// a just-in-time registration with the grant's label.
func (a *Agent) registerRun(ctx context.Context, runID string) (string, error) {
	token, grant, err := a.registration(ctx, runID, func(ctx context.Context) bool {
		rec, found, err := a.record(ctx)
		return err != nil || (found && rec.RunID == runID)
	})
	if err != nil {
		return "", err
	}
	if err := a.checkRunnerAccepted(ctx); err != nil {
		return "", err
	}
	if err := a.d.Runner.Check(ctx); err != nil {
		return "", err
	}
	if grant != nil {
		return grant.Label, a.startFirstJob(ctx, *grant)
	}
	// No process of the runner user may be left to read the token.
	if err := a.d.Host.EndJobs(ctx); err != nil {
		return "", err
	}
	url := strings.TrimRight(a.cfg.GitHubURL, "/") + "/" + token.Target
	label := token.RunnerLabel()
	// The label's secret stays out of the log, which the instance's
	// console output may show.
	group := cmp.Or(token.RunnerGroup, "the default group")
	a.logf("registering runner %s for run %s in %s at %s", a.id.InstanceID, runID, group, url)
	reg := Registration{URL: url, Name: a.id.InstanceID, Label: label, RunnerGroup: token.RunnerGroup, Token: token.Token}
	return label, a.d.Runner.Register(ctx, reg)
}

// leave releases the runner from runID and signals how it went, in the
// protocol's order.
func (a *Agent) leave(ctx context.Context, runID string) {
	a.logf("released from run %s", runID)
	err := a.releaseRun(ctx, runID)
	if ctx.Err() != nil {
		return
	}
	a.mu.Lock()
	a.serving, a.registered = "", false
	a.mu.Unlock()
	a.jit = nil
	if err != nil {
		a.logf("releasing from run %s failed: %v", runID, err)
		if a.signal(ctx, protocol.SignalDeregistrationFailed, runID) == nil {
			a.emit(EventReleaseFailed, runID, err.Error())
		}
		return
	}
	if a.signal(ctx, protocol.SignalDeregistered, runID) == nil && a.signal(ctx, protocol.SignalReleased, runID) == nil {
		a.emit(EventReleased, runID, "")
	}
}

// releaseRun stops the run's runner and every process of the runner user,
// deregisters the runner (only once no process of the runner user is
// left: a process that outlived the run could read the removal token; a
// run of just-in-time registrations has the broker delete the last one,
// used or not) and wipes what the run left.
func (a *Agent) releaseRun(ctx context.Context, runID string) error {
	if err := a.d.Runner.Stop(ctx); err != nil {
		a.logf("stopping the runner: %v", err)
	}
	if err := a.d.Host.EndJobs(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	registered := a.registered
	a.mu.Unlock()
	switch {
	case a.jit != nil:
		if id := a.jit.runner.RunnerID; id != 0 {
			a.logf("asking the pool's broker to delete runner %s of run %s", a.jit.runner.RunnerName, runID)
			if err := a.d.Broker.Deregister(ctx, a.jit.grant, id); err != nil {
				return err
			}
		}
	case registered:
		token, err := a.token(ctx, protocol.SortKeyRemovalToken, runID, nil)
		if err != nil {
			return err
		}
		if err := a.d.Runner.Remove(ctx, token.Token); err != nil {
			return err
		}
	}
	return a.d.Host.Wipe(ctx)
}

// ---------------------------------------------------------------- the runner's version

// checkRunnerAccepted fails when the installed runner is older than GitHub
// accepts, as the pool told it with the run's token: GitHub would send it
// no job, and the claim must replace it rather than wait.
func (a *Agent) checkRunnerAccepted(ctx context.Context) error {
	told, err := a.toldRelease(ctx)
	if err != nil || told == nil {
		return nil // nothing told: the claim judged the runner by its heartbeat
	}
	if installed := a.d.Runner.Installed(); protocol.CompareRunnerVersions(installed, told.Minimum) < 0 {
		return fmt.Errorf("runner %s is older than GitHub accepts (%s and later)", installed, told.Minimum)
	}
	return nil
}

// toldRelease reads the runner release the pool told it of: nil when none,
// or the item is not one.
func (a *Agent) toldRelease(ctx context.Context) (*protocol.RunnerReleaseItem, error) {
	item, err := a.agentItem(ctx, protocol.SortKeyRunnerRelease)
	if err != nil {
		return nil, err
	}
	if len(item) == 0 {
		return nil, nil
	}
	told, err := protocol.RunnerReleaseFromItem(item)
	if err != nil {
		a.logf("ignoring its runner release item: %v", err)
		return nil, nil
	}
	return &told, nil
}

// keepRunnerCurrent, while the agent waits for a run, updates its runner to
// the release the pool told it of when that is newer, in the background:
// a claim arriving meanwhile registers the runner installed, and the
// update serves the runs after it. A pinned runner_version never changes.
func (a *Agent) keepRunnerCurrent(ctx context.Context) {
	if a.cfg.Runner.Pinned() {
		return
	}
	now := a.d.Clock.Now()
	a.mu.Lock()
	due := !a.updating && !now.Before(a.nextCheck)
	if due {
		a.nextCheck = now.Add(a.interval(a.cfg.Intervals.RunnerCheck))
	}
	a.mu.Unlock()
	if !due {
		return
	}
	told, err := a.toldRelease(ctx)
	if err != nil {
		a.logf("%v", err)
		return
	}
	installed := a.d.Runner.Installed()
	if told == nil || protocol.CompareRunnerVersions(told.Release.Version, installed) <= 0 {
		return
	}
	archive, err := a.archiveOf(told.Release)
	if err != nil {
		a.logf("not updating the runner: %v", err)
		return
	}
	a.mu.Lock()
	a.updating = true
	a.mu.Unlock()
	a.d.Background(func() {
		defer func() {
			a.mu.Lock()
			a.updating = false
			a.mu.Unlock()
		}()
		a.logf("updating the GitHub runner from %s to %s while idle", installed, archive.Version)
		if err := a.d.Runner.Install(ctx, archive); err != nil {
			if ctx.Err() == nil {
				a.logf("updating the GitHub runner to %s failed: %v", archive.Version, err)
			}
			return
		}
		a.emit(EventRunnerUpdated, "", archive.Version)
	})
}

// restartRunner starts the run's runner again once it stopped, in the
// background (a download must not hold up the run's release). Why it
// stopped is not asked: what the runner prints and writes is the jobs' to
// forge. A runner GitHub refuses stops, and GitHub refuses older runners
// at once after a critical security release, which no release date
// foretells; so when GitHub publishes a newer release than the one
// installed, the runner starts again on it (unless pinned). Either way the
// run's jobs end first, and a runner that cannot start again is retired
// with its instance rather than left half alive: the agent terminates it
// and beats no more, so the pool ends it even if EC2 refused. A runner
// that keeps stopping (a pinned one GitHub refuses) starts again once per
// runner check interval.
func (a *Agent) restartRunner(ctx context.Context, runID string) {
	now := a.d.Clock.Now()
	a.mu.Lock()
	busy := a.restarting || a.failed || now.Before(a.nextRestart)
	if !busy {
		a.restarting = true
		a.nextRestart = now.Add(a.interval(a.cfg.Intervals.RunnerCheck))
	}
	a.mu.Unlock()
	if busy {
		return
	}
	a.d.Background(func() {
		defer func() {
			a.mu.Lock()
			a.restarting = false
			a.mu.Unlock()
		}()
		a.logf("the runner of run %s stopped; starting it again", runID)
		a.installNewerRelease(ctx, runID)
		if err := a.d.Runner.Restart(ctx); err != nil && ctx.Err() == nil {
			a.retire(ctx, runID, "its runner could not start again: "+err.Error())
		}
	})
}

// installNewerRelease installs GitHub's newest runner release for the
// runner's next start in runID, when it is newer than the one installed
// (newerRelease); one that fails to install leaves the installed one.
func (a *Agent) installNewerRelease(ctx context.Context, runID string) {
	installed := a.d.Runner.Installed()
	archive, ok := a.newerRelease(ctx, installed)
	if !ok {
		return
	}
	a.logf("GitHub publishes runner %s, newer than %s: installing it first", archive.Version, installed)
	if err := a.d.Runner.Install(ctx, archive); err != nil {
		a.logf("installing runner %s failed (starting %s again): %v", archive.Version, installed, err)
		return
	}
	a.emit(EventRunnerUpdated, runID, archive.Version)
}

// newerRelease is the archive of the newest release GitHub publishes, as
// the pool told it or as GitHub answers now, when it is newer than
// installed and the runner is not pinned.
func (a *Agent) newerRelease(ctx context.Context, installed string) (Archive, bool) {
	if a.cfg.Runner.Pinned() {
		return Archive{}, false
	}
	var newest *protocol.RunnerRelease
	if a.d.Releases != nil {
		if r, err := a.d.Releases.Newest(ctx); err == nil {
			newest = &r
		} else {
			a.logf("the newest runner release: %v", err)
		}
	}
	if told, err := a.toldRelease(ctx); err == nil && told != nil && (newest == nil || protocol.CompareRunnerVersions(told.Release.Version, newest.Version) > 0) {
		newest = &told.Release
	}
	if newest == nil || protocol.CompareRunnerVersions(newest.Version, installed) <= 0 {
		return Archive{}, false
	}
	archive, err := a.archiveOf(*newest)
	if err != nil {
		a.logf("not updating the runner: %v", err)
		return Archive{}, false
	}
	return archive, true
}

// archiveToInstall is the runner archive a boot installs: the pinned
// version, else the release the pool told it of, else the newest GitHub
// names.
func (a *Agent) archiveToInstall(ctx context.Context) (Archive, error) {
	if a.cfg.Runner.Pinned() {
		v := a.cfg.Runner.Version
		return Archive{Version: v, URL: a.cfg.Runner.ArchiveURL(v, platform()), SHA256: strings.ToLower(a.cfg.Runner.SHA256)}, nil
	}
	told, err := a.toldRelease(ctx)
	if err != nil {
		return Archive{}, err
	}
	if told != nil {
		return a.archiveOf(told.Release)
	}
	if a.d.Releases == nil {
		return Archive{}, errors.New("the pool told it no runner release to install, and it has no GitHub to ask")
	}
	newest, err := a.d.Releases.Newest(ctx)
	if err != nil {
		return Archive{}, fmt.Errorf("the newest runner release: %w", err)
	}
	return a.archiveOf(newest)
}

// archiveOf is the archive of release r for this machine, with the digest
// GitHub publishes for it: a release without one is not installed.
func (a *Agent) archiveOf(r protocol.RunnerRelease) (Archive, error) {
	digest := r.SHA256[platform()]
	if digest == "" {
		return Archive{}, fmt.Errorf("GitHub publishes no digest of runner %s for %s", r.Version, platform())
	}
	return Archive{Version: r.Version, URL: a.cfg.Runner.ArchiveURL(r.Version, platform()), SHA256: digest}, nil
}
