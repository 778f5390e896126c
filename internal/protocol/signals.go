package protocol

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Worker signals written by the agent.
const (
	SignalUserDataOK           = "UD_OK"
	SignalUserDataFailed       = "UD_FAILED"
	SignalRegistered           = "UD_REG_OK"
	SignalRegistrationFailed   = "UD_REG_FAILED"
	SignalDeregistered         = "UD_REMOVE_REG_OK"
	SignalDeregistrationFailed = "UD_REMOVE_REG_FAILED"
	SignalReleased             = "UD_REMOVE_REG_REMOVE_RUN_OK"
	signalValueState           = "state"
	signalValueRunID           = "runId"
	HeartbeatValue             = "PING"
)

// Signal is the latest worker signal of one instance.
type Signal struct {
	InstanceID string
	State      string
	RunID      string
	UpdatedAt  string
}

// Item renders the signal as a table item.
func (s Signal) Item() map[string]types.AttributeValue {
	item := BaseItem(TypeSignal, s.InstanceID, s.UpdatedAt)
	if t, err := ParseTime(s.UpdatedAt); err == nil {
		item[AttrExpiresAt] = ExpiresAt(t)
	}
	item[AttrValue] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		signalValueState: &types.AttributeValueMemberS{Value: s.State},
		signalValueRunID: &types.AttributeValueMemberS{Value: s.RunID},
	}}
	return item
}

// SignalFromItem reads a worker signal item; ok is false when item holds
// none, or is not a signal item (PK TYPE#WS, SK ID#<instance-id>).
func SignalFromItem(item map[string]types.AttributeValue) (s Signal, ok bool) {
	value, isMap := item[AttrValue].(*types.AttributeValueMemberM)
	if !isMap || StringAttr(item, AttrPK) != TypeSignal || !strings.HasPrefix(StringAttr(item, AttrSK), "ID#") || IdentifierOf(item) == "" {
		return Signal{}, false
	}
	s = Signal{
		InstanceID: IdentifierOf(item),
		State:      StringAttr(value.Value, signalValueState),
		RunID:      StringAttr(value.Value, signalValueRunID),
		UpdatedAt:  StringAttr(item, AttrUpdatedAt),
	}
	return s, s.State != ""
}

// HeartbeatItem is the heartbeat an agent writes every few seconds.
func HeartbeatItem(instanceID, now string) map[string]types.AttributeValue {
	item := BaseItem(TypeHeartbeat, instanceID, now)
	if t, err := ParseTime(now); err == nil {
		item[AttrExpiresAt] = ExpiresAt(t)
	}
	item[AttrValue] = &types.AttributeValueMemberS{Value: HeartbeatValue}
	return item
}
