package protocol

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Instance states.
const (
	StateCreated    = "created"
	StateRunning    = "running"
	StateIdle       = "idle"
	StateClaimed    = "claimed"
	StateTerminated = "terminated"
)

// Instance record attributes.
const (
	AttrState         = "state"
	AttrRunID         = "runId"
	AttrThreshold     = "threshold"
	AttrResourceClass = "resourceClass"
	AttrInstanceType  = "instanceType"
	AttrUsageClass    = "usageClass"
	// AttrStopUntil, on an idle record of an on-demand runner: once its
	// threshold passes, the runner stops (its agent stops its instance)
	// instead of terminating, and waits in the pool, stopped, until then.
	AttrStopUntil = "stopUntil"
	// AttrLaunchedAt, AttrTemplateID and AttrTemplateVersion: when the
	// instance was launched, and from which launch template (its id, as
	// DescribeLaunchTemplates gives it) and version (a number); "" when
	// unknown (records written before them), for the pool's maximum runner
	// age and outdated runners.
	AttrLaunchedAt      = "launchedAt"
	AttrTemplateID      = "templateId"
	AttrTemplateVersion = "templateVersion"
)

// Usage classes.
const (
	UsageOnDemand = "on-demand"
	UsageSpot     = "spot"
)

// Instance is the record of one runner instance.
type Instance struct {
	ID            string
	State         string
	RunID         string
	Threshold     string
	ResourceClass string
	InstanceType  string
	UsageClass    string
	UpdatedAt     string
	// Optional: "" when not set (see AttrStopUntil, AttrLaunchedAt,
	// AttrTemplateID and AttrTemplateVersion).
	StopUntil       string
	LaunchedAt      string
	TemplateID      string
	TemplateVersion string
}

// Stopped tells whether the runner is in the pool's stopped tier at now:
// idle and unowned, its running idle time over, and its stopped time not.
// Its instance may still be stopping, or not have stopped yet.
func (i Instance) Stopped(now time.Time) bool {
	return i.State == StateIdle && i.RunID == "" && i.StopUntil != "" &&
		IsPast(i.Threshold, now) && !IsPast(i.StopUntil, now)
}

// End is when the record's last deadline passes: StopUntil when set on an
// idle record, else Threshold. The reaper ends a record after it.
func (i Instance) End() string {
	if i.State == StateIdle && i.StopUntil > i.Threshold {
		return i.StopUntil
	}
	return i.Threshold
}

// timeBefore tells whether ts is before now; an unreadable one is.
func IsPast(ts string, now time.Time) bool {
	t, err := ParseTime(ts)
	return err != nil || t.Before(now)
}

// Item renders the record as a table item.
func (i Instance) Item() map[string]types.AttributeValue {
	item := BaseItem(TypeInstance, i.ID, i.UpdatedAt)
	for name, v := range map[string]string{
		AttrState:         i.State,
		AttrRunID:         i.RunID, // never absent: "" means unowned
		AttrThreshold:     i.Threshold,
		AttrResourceClass: i.ResourceClass,
		AttrInstanceType:  i.InstanceType,
		AttrUsageClass:    i.UsageClass,
	} {
		item[name] = &types.AttributeValueMemberS{Value: v}
	}
	for name, v := range map[string]string{
		AttrStopUntil:       i.StopUntil,
		AttrLaunchedAt:      i.LaunchedAt,
		AttrTemplateID:      i.TemplateID,
		AttrTemplateVersion: i.TemplateVersion,
	} {
		if v != "" {
			item[name] = &types.AttributeValueMemberS{Value: v}
		}
	}
	return item
}

// InstanceFromItem reads an instance record.
func InstanceFromItem(item map[string]types.AttributeValue) (Instance, error) {
	inst := Instance{
		ID:            IdentifierOf(item),
		State:         StringAttr(item, AttrState),
		RunID:         StringAttr(item, AttrRunID),
		Threshold:     StringAttr(item, AttrThreshold),
		ResourceClass: StringAttr(item, AttrResourceClass),
		InstanceType:  StringAttr(item, AttrInstanceType),
		UsageClass:    StringAttr(item, AttrUsageClass),
		UpdatedAt:     StringAttr(item, AttrUpdatedAt),

		StopUntil:       StringAttr(item, AttrStopUntil),
		LaunchedAt:      StringAttr(item, AttrLaunchedAt),
		TemplateID:      StringAttr(item, AttrTemplateID),
		TemplateVersion: StringAttr(item, AttrTemplateVersion),
	}
	// The sort key must be ID#<id>: a record under another key is not the
	// one conditional writes to Key(TypeInstance, id) would change.
	if StringAttr(item, AttrPK) != TypeInstance || StringAttr(item, AttrSK) != "ID#"+inst.ID || inst.ID == "" || inst.State == "" {
		return Instance{}, fmt.Errorf("not an instance record: PK %q, SK %q, state %q", StringAttr(item, AttrPK), StringAttr(item, AttrSK), inst.State)
	}
	return inst, nil
}
