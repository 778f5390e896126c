package protocol

import (
	"time"

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
	signalValueLabel           = "label"
	HeartbeatValue             = "PING"
)

// Signal is the latest worker signal of one instance.
type Signal struct {
	InstanceARN string
	State       string
	RunID       string
	// Label, with UD_REG_OK: the label the runner registered with. An
	// agent older than labels with a secret writes none (it registered
	// with the run id).
	Label     string
	UpdatedAt string
}

// Item renders the signal as the SIGNAL item of the instance's agent partition.
func (s Signal) Item() map[string]types.AttributeValue {
	item := agentItem(s.InstanceARN, SortKeySignal, entitySignal, s.UpdatedAt)
	if t, err := ParseTime(s.UpdatedAt); err == nil {
		item[AttrExpiresAt] = ExpiresAt(t)
	}
	item[AttrValue] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		signalValueState: &types.AttributeValueMemberS{Value: s.State},
		signalValueRunID: &types.AttributeValueMemberS{Value: s.RunID},
	}}
	if s.Label != "" {
		item[AttrValue].(*types.AttributeValueMemberM).Value[signalValueLabel] = &types.AttributeValueMemberS{Value: s.Label}
	}
	return item
}

// SignalFromItem reads a worker signal item; ok is false when item holds
// none, or is not a signal item (PK AGENT#<instance ARN>, SK SIGNAL).
func SignalFromItem(item map[string]types.AttributeValue) (s Signal, ok bool) {
	arn, isAgent := agentOf(item, SortKeySignal)
	value, isMap := item[AttrValue].(*types.AttributeValueMemberM)
	if !isAgent || !isMap {
		return Signal{}, false
	}
	s = Signal{
		InstanceARN: arn,
		State:       StringAttr(value.Value, signalValueState),
		RunID:       StringAttr(value.Value, signalValueRunID),
		Label:       StringAttr(value.Value, signalValueLabel),
		UpdatedAt:   StringAttr(item, AttrUpdatedAt),
	}
	if s.State == "" {
		return Signal{}, false
	}
	return s, true
}

// HeartbeatItem is the heartbeat an agent writes every few seconds.
func HeartbeatItem(instanceARN, now string) map[string]types.AttributeValue {
	item := agentItem(instanceARN, SortKeyHeartbeat, entityHeartbeat, now)
	if t, err := ParseTime(now); err == nil {
		item[AttrExpiresAt] = ExpiresAt(t)
	}
	item[AttrValue] = &types.AttributeValueMemberS{Value: HeartbeatValue}
	return item
}

// HeartbeatFromItem reads a heartbeat item: the instance and when it beat.
// ok is false unless the item is a HEARTBEAT item of an agent partition
// with the value PING and a timestamp.
func HeartbeatFromItem(item map[string]types.AttributeValue) (instanceARN string, at time.Time, ok bool) {
	arn, isAgent := agentOf(item, SortKeyHeartbeat)
	at, err := ParseTime(StringAttr(item, AttrUpdatedAt))
	if !isAgent || StringAttr(item, AttrValue) != HeartbeatValue || err != nil {
		return "", time.Time{}, false
	}
	return arn, at, true
}
