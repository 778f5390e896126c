package protocol

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Partition keys of the pool table.
const (
	TypeInstance  = "TYPE#INSTANCE"
	TypeHeartbeat = "TYPE#HEARTBEAT"
	TypeSignal    = "TYPE#WS"
	TypeMetadata  = "TYPE#METADATA"
	TypeClaim     = "TYPE#CLAIM"
)

// Identifiers of the metadata items.
const (
	PoolConfigID        = "pool_config"
	RegistrationTokenID = "gh_registration_token"
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
