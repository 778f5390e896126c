package claim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// startStopped claims up to n of the class's stopped runners that the
// claim's request allows and starts them; they then boot and register
// like new instances (waitStarted). The candidates are the holders of the
// class's stopped slots that their records say are in their stopped time
// and that EC2 says are stopped: one still stopping, or not yet stopped by
// its agent, is left alone (its agent may stop it any moment). Outdated
// ones are retired on the way. Each is claimed by its conditional write
// (stopped -> claimed, which removes its stopped time), its registration
// token handed first, as for warm runners.
func (a *attempt) startStopped(ctx context.Context, n int) ([]Instance, error) {
	if _, ok := a.cfg.Warm[a.req.ResourceClass]; !ok {
		return nil, nil
	}
	ids, err := a.stoppedCandidates(ctx, n)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	if err := a.s.addOwned(ctx, a.req.RunID, a.rec.Nonce, instanceIDs(ids)...); err != nil {
		return nil, err
	}
	if err := a.handRegistration(ctx, instanceIDs(ids)); err != nil {
		return nil, err
	}
	take := table.Transition{
		FromState: protocol.StateIdle, ToState: protocol.StateClaimed, ToRunID: a.req.RunID,
		Threshold: a.c.now().Add(claimedLifetime), Deadline: table.InStoppedTime,
	}
	errs := a.s.applyEach(ctx, instanceIDs(ids), func(string) table.Transition { return take })
	var took []Instance
	var failed error
	for i, inst := range ids {
		switch outcome, err := a.claimOutcome(ctx, inst.ID, errs[i]); outcome {
		case claimed:
			a.hold(inst, protocol.StateClaimed)
			took = append(took, inst)
		case unknown:
			a.hold(inst, protocol.StateClaimed) // maybe ours: rollback settles it
			failed = errors.Join(failed, err)
		}
	}
	if failed != nil || len(took) == 0 {
		return nil, failed
	}
	if _, err := a.c.EC2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: instanceIDs(took)}); err != nil {
		if !pool.HasErrorCode(err, "InsufficientInstanceCapacity") {
			// Still held: the rollback this error causes settles them.
			return nil, fmt.Errorf("StartInstances %v: %w", instanceIDs(took), err)
		}
		return nil, a.discardUnstartable(ctx, took, err)
	}
	a.c.log("claim: started stopped runners", "run", a.req.RunID, "instances", instanceIDs(took))
	return took, nil
}

// discardUnstartable ends stopped runners EC2 has no capacity to start
// now (AWS documents InsufficientInstanceCapacity for StartInstances):
// the claim does not fail for them, the fleet, free to pick other types
// and zones, launches in their place, and the pool's fill restores its
// stopped tier later.
func (a *attempt) discardUnstartable(ctx context.Context, took []Instance, cause error) error {
	a.c.log("claim: EC2 cannot start stopped runners now; launching instead", "run", a.req.RunID, "instances", instanceIDs(took), "error", cause.Error())
	for _, inst := range took {
		terminated, err := a.c.discard(ctx, a.s, inst.ID, protocol.StateClaimed, a.req.RunID)
		if err != nil {
			return err // still held: rollback settles it
		}
		a.drop(inst.ID, discardOutcome("stopped, EC2 has no capacity to start it now", terminated))
	}
	return nil
}

// stoppedCandidates lists up to n stopped runners of the class the claim
// may take, retiring outdated ones.
func (a *attempt) stoppedCandidates(ctx context.Context, n int) ([]Instance, error) {
	slots, _, err := a.s.readSlots(ctx, protocol.TierStopped, a.req.ResourceClass)
	if err != nil || len(slots) == 0 {
		return nil, err
	}
	var holders []string
	for _, sl := range slots {
		holders = append(holders, sl.ID)
	}
	slices.Sort(holders)
	records, err := a.s.instances(ctx, holders)
	if err != nil {
		return nil, err
	}
	now := a.c.now()
	retired := map[string]string{}
	var fit []protocol.Instance
	for _, sl := range slots {
		r, ok := records[sl.ID]
		if !ok || !r.Stopped(now) || r.StopUntil != sl.Until || r.ResourceClass != a.req.ResourceClass {
			continue
		}
		if why := Retirement(r.LaunchedAt, launchedFrom(r.TemplateID, r.TemplateVersion), a.wants.Template, a.wants.MaxRunnerAge, now); why != "" {
			retired[r.ID] = why
			continue
		}
		if r.UsageClass == a.req.UsageClass && MatchInstanceType(a.req.AllowedTypes, r.InstanceType) {
			fit = append(fit, r)
		}
	}
	a.retire(ctx, retired)
	if len(fit) == 0 {
		return nil, nil
	}
	slices.SortFunc(fit, func(x, y protocol.Instance) int { return cmp.Compare(x.ID, y.ID) })
	states, err := a.c.instanceStates(ctx, fit)
	if err != nil {
		return nil, err
	}
	var out []Instance
	for _, r := range fit {
		if len(out) == n {
			break
		}
		if states[r.ID] == ec2types.InstanceStateNameStopped {
			out = append(out, Instance{ID: r.ID, InstanceType: r.InstanceType, UsageClass: r.UsageClass, Source: SourceStopped,
				LaunchedAt: r.LaunchedAt, TemplateID: r.TemplateID, TemplateVersion: r.TemplateVersion})
		}
	}
	return out, nil
}

// instanceStates is EC2's state of each of records' instances; one EC2
// does not know (anymore) is left out.
func (c *Claimer) instanceStates(ctx context.Context, records []protocol.Instance) (map[string]ec2types.InstanceStateName, error) {
	ids := make([]string, len(records))
	for i, r := range records {
		ids[i] = r.ID
	}
	out, err := c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if isInstanceNotFound(err) && len(ids) > 1 {
		// One unknown id fails the whole call: ask one by one.
		states := map[string]ec2types.InstanceStateName{}
		for _, r := range records {
			one, err := c.instanceStates(ctx, []protocol.Instance{r})
			if err != nil {
				return nil, err
			}
			for id, st := range one {
				states[id] = st
			}
		}
		return states, nil
	}
	if isInstanceNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("DescribeInstances: %w", err)
	}
	states := map[string]ec2types.InstanceStateName{}
	for _, res := range out.Reservations {
		for _, inst := range res.Instances {
			if inst.State != nil {
				states[aws.ToString(inst.InstanceId)] = inst.State.Name
			}
		}
	}
	return states, nil
}

// waitStarted waits until the started runners have booted and registered
// for the run, as new instances do (up to the fleet validation wait), and
// says which did not, and why.
func (a *attempt) waitStarted(ctx context.Context, started []Instance) (map[string]error, error) {
	watch := newAgentWatch(a.s, a.cfg.InstanceARNPrefix)
	wait := a.req.Timings.FleetValidationWait
	for _, inst := range started {
		watch.add(inst.ID, wait, registered(a.registration(), wait, false, a.req.Timings, a.runnerPolicy()))
	}
	decided, err := watch.wait(ctx, a.req.Timings.PollInterval)
	failed := map[string]error{}
	for id, why := range decided {
		if why != nil {
			failed[id] = why
		}
	}
	return failed, err
}

// isInstanceNotFound tells EC2's answer for an instance id it does not know.
func isInstanceNotFound(err error) bool { return pool.HasErrorCode(err, "InvalidInstanceID.NotFound") }
