package protocol

import "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
	item[AttrValue] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		signalValueState: &types.AttributeValueMemberS{Value: s.State},
		signalValueRunID: &types.AttributeValueMemberS{Value: s.RunID},
	}}
	return item
}

// SignalFromItem reads a worker signal item; ok is false when item holds none.
func SignalFromItem(item map[string]types.AttributeValue) (s Signal, ok bool) {
	value, isMap := item[AttrValue].(*types.AttributeValueMemberM)
	if !isMap {
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
	item[AttrValue] = &types.AttributeValueMemberS{Value: HeartbeatValue}
	return item
}
