package protocol

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Partition keys of the pool table, beside the agent partitions (agent.go).
const (
	TypeInstance = "TYPE#INSTANCE"
	TypeMetadata = "TYPE#METADATA" // written only by the pool resource
	TypeClaim    = "TYPE#CLAIM"
	TypeLease    = "TYPE#LEASE" // leases that claims take; they may not write TYPE#METADATA
	// TypeReleased holds a marker of each released claim of a workflow
	// run, for the run's re-runs (a claim's release writes it, the pool's
	// maintenance reads it).
	TypeReleased = "TYPE#RELEASED"
)

// Identifiers of the metadata and lease items.
const (
	PoolConfigID  = "pool_config"
	ReaperLeaseID = "reaper"
	// MaintenanceLeaseID is the lease of the pool's scheduled maintenance
	// (its broker's), held while it runs.
	MaintenanceLeaseID = "maintenance"
)

// Attribute names shared by every item.
const (
	AttrPK         = "PK"
	AttrSK         = "SK"
	AttrEntityType = "entityType"
	AttrIdentifier = "identifier"
	AttrUpdatedAt  = "updatedAt"
	AttrValue      = "value"
)

// Key is the primary key of the item of the given type and identifier.
func Key(typ, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: typ},
		AttrSK: &types.AttributeValueMemberS{Value: "ID#" + id},
	}
}

// BaseItem is the key plus the attributes every item carries.
func BaseItem(typ, id string, now string) map[string]types.AttributeValue {
	item := Key(typ, id)
	item[AttrEntityType] = &types.AttributeValueMemberS{Value: strings.TrimPrefix(typ, "TYPE#")}
	item[AttrIdentifier] = &types.AttributeValueMemberS{Value: id}
	item[AttrUpdatedAt] = &types.AttributeValueMemberS{Value: now}
	return item
}

// IdentifierOf returns the bare id of an item from its sort key.
func IdentifierOf(item map[string]types.AttributeValue) string {
	return strings.TrimPrefix(StringAttr(item, AttrSK), "ID#")
}

// StringAttr returns the string attribute name of item, or "".
func StringAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
