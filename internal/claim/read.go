package claim

import (
	"context"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Read returns a claim's record and the instances it still holds: those
// whose record is running (or claimed) under its run id with a deadline not
// yet passed. A record gone, terminated, expired or owned by another run is
// no longer the claim's. ok is false when the claim does not exist.
func (c *Claimer) Read(ctx context.Context, poolName, runID string) (rec Record, live []Instance, ok bool, err error) {
	s := c.store(poolName)
	rec, ok, err = s.readRecord(ctx, poolName, runID)
	if !ok || err != nil {
		return Record{}, nil, false, IgnoreMissingPool(err)
	}
	records, err := s.instances(ctx, instanceIDs(rec.Instances))
	if err != nil {
		return Record{}, nil, false, err
	}
	return rec, liveInstances(rec, records, c.now()), true, nil
}

// liveInstances are the instances of rec that it still holds, given their
// instance records.
func liveInstances(rec Record, records map[string]protocol.Instance, at time.Time) []Instance {
	var live []Instance
	now := protocol.FormatTime(at)
	for _, inst := range rec.Instances {
		r, found := records[inst.ID]
		if found && r.RunID == rec.Request.RunID && (r.State == protocol.StateRunning || r.State == protocol.StateClaimed) && r.Threshold > now {
			live = append(live, inst)
		}
	}
	return live
}
