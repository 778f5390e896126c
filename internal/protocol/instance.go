package protocol

import (
	"fmt"

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
	}
	// The sort key must be ID#<id>: a record under another key is not the
	// one conditional writes to Key(TypeInstance, id) would change.
	if StringAttr(item, AttrPK) != TypeInstance || StringAttr(item, AttrSK) != "ID#"+inst.ID || inst.ID == "" || inst.State == "" {
		return Instance{}, fmt.Errorf("not an instance record: PK %q, SK %q, state %q", StringAttr(item, AttrPK), StringAttr(item, AttrSK), inst.State)
	}
	return inst, nil
}
