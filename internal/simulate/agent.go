package simulate

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The agents of the pool's runners play PROTOCOL.md through the table,
// healthy and prompt once their instance has booted: a launched instance
// boots the fleet's latency after its launch, a started one the stopped
// tier's after its start (meteredEC2), and until then its agent answers
// nothing. One exception: a runner a claim launched registers at once,
// its boot being in its job's wait (LatencyBySource) instead; the claim's
// wait for it would change nothing the replay measures, and cost hundreds
// of steps of the clock per claim. A booted agent answers within the call
// that changes its record (answer); at its idle deadline it stops its
// instance when its record says it is in its stopped time, and terminates
// it otherwise (idleDeadline); a stopped instance's agent is down until a
// claim starts it.

// bootAfter schedules the boot of id's agent d from now (w.mu held).
func (w *World) bootAfter(id string, d time.Duration) {
	w.events.push(event{at: w.clock.Now().Add(d), key: "boot " + id, do: func(ctx context.Context) error { return w.boot(ctx, id) }})
}

// boot is id's instance having booted: its agent heartbeats, signals UD_OK
// for its InitialRunId tag (a run, or the fill that launched it), and acts
// on its record as one that just read it. A runner in its stopped time (a
// fill launched it for the stopped tier, and it is prepared now) stops.
func (w *World) boot(ctx context.Context, id string) error {
	w.mu.Lock()
	life := w.instances[id]
	booting := life != nil && life.ended.IsZero() && !life.runningSince.IsZero() && !life.agentUp
	if booting {
		life.agentUp = true
	}
	w.mu.Unlock()
	if !booting {
		return nil // terminated while it booted, or a claim's launch, up at once
	}
	rec, err := protocol.InstanceFromItem(w.db.Get(protocol.TypeInstance, id))
	if err != nil {
		return fmt.Errorf("agent of %s booting without a record: %w", id, err)
	}
	w.ec2.Mu.Lock()
	initialRun := w.ec2.InitialRunIDs[id]
	w.ec2.Mu.Unlock()
	arn := protocol.InstanceARN(arnPrefix, id)
	prepared := protocol.Signal{InstanceARN: arn, State: protocol.SignalUserDataOK, RunID: initialRun, UpdatedAt: protocol.FormatTime(w.clock.Now())}
	w.db.Put(prepared.Item())
	for _, it := range w.answer(protocol.Instance{}, rec, false) {
		w.db.Put(it)
	}
	if rec.Stopped(w.clock.Now()) {
		return w.stop(ctx, id)
	}
	return nil
}

// answer is what a booted agent writes when its record changes (the
// table's OnInstance, under its lock, inside the claim call that changed
// the record): a heartbeat, UD_REG_OK for a new run, the release
// confirmation; when the record is idle, it schedules the agent's check at
// its idle deadline.
func (w *World) answer(old, cur protocol.Instance, existed bool) []map[string]types.AttributeValue {
	if !existed && cur.State == protocol.StateCreated {
		w.bootNow(cur.ID) // a claim's launch
	}
	if cur.State == protocol.StateTerminated || !w.agentUp(cur.ID) {
		return nil
	}
	now := protocol.FormatTime(w.clock.Now())
	arn := protocol.InstanceARN(arnPrefix, cur.ID)
	out := []map[string]types.AttributeValue{protocol.HeartbeatItem(arn, now)}
	switch {
	case cur.RunID != "" && (!existed || old.RunID != cur.RunID):
		out = append(out, protocol.Signal{InstanceARN: arn, State: protocol.SignalRegistered, RunID: cur.RunID, UpdatedAt: now}.Item())
	case existed && old.RunID != "" && cur.RunID == "":
		out = append(out, protocol.Signal{InstanceARN: arn, State: protocol.SignalReleased, RunID: old.RunID, UpdatedAt: now}.Item())
	}
	if threshold, err := protocol.ParseTime(cur.Threshold); err == nil && cur.State == protocol.StateIdle {
		id := cur.ID
		w.At(threshold.Add(SelfTerminationGrace+SelfCheckInterval), "idle "+id, func(ctx context.Context) error { return w.idleDeadline(ctx, id) })
	}
	return out
}

// bootNow has id's agent up at once.
func (w *World) bootNow(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if life := w.instances[id]; life != nil {
		life.agentUp = true
	}
}

func (w *World) agentUp(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	life := w.instances[id]
	return life != nil && life.agentUp
}

// idleDeadline is the agent's check once its record's threshold is
// SelfTerminationGrace past, at its first check after: a runner in its
// stopped time stops its instance, any other terminates it. A record
// claimed since has a later threshold (and a check of its own).
func (w *World) idleDeadline(ctx context.Context, id string) error {
	rec, err := protocol.InstanceFromItem(w.db.Get(protocol.TypeInstance, id))
	if err != nil {
		return fmt.Errorf("agent of %s reading its record: %w", id, err)
	}
	now := w.clock.Now()
	threshold, err := protocol.ParseTime(rec.Threshold)
	if err != nil || rec.State == protocol.StateTerminated || !now.After(threshold.Add(SelfTerminationGrace)) {
		return err
	}
	if !w.agentUp(id) {
		return nil // the reaper was first, or the instance is stopped
	}
	if rec.Stopped(now) {
		return w.stop(ctx, id)
	}
	if _, err := w.claimer.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		return fmt.Errorf("agent of %s terminating itself: %w", id, err)
	}
	w.mu.Lock()
	w.instances[id].terminatedByIdle = true
	w.mu.Unlock()
	return nil
}

// stop is the agent stopping its own instance.
func (w *World) stop(ctx context.Context, id string) error {
	if _, err := (meteredEC2{w.ec2, w}).StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		return fmt.Errorf("agent of %s stopping its instance: %w", id, err)
	}
	return nil
}
