package protocol

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RegistrationToken is the registration token item: the GitHub tokens the
// agents register and deregister their runners with. PROTOCOL.md names
// token, timestamp and expires_at; the removal token and the target it was
// issued for are this project's additions (docs/guides/protocol.md).
type RegistrationToken struct {
	Target          string    // "owner/repository", or "owner" for organization runners
	Token           string    // registration token
	ExpiresAt       time.Time // of Token
	RemoveToken     string
	RemoveExpiresAt time.Time
	FetchedAt       time.Time // "timestamp"
}

// Fields of the registration token item's value map.
const (
	tokenTarget          = "target"
	tokenValue           = "token"
	tokenExpiresAt       = "expires_at"
	tokenRemove          = "remove_token"
	tokenRemoveExpiresAt = "remove_expires_at"
	tokenTimestamp       = "timestamp"
)

// Item renders the token item.
func (t RegistrationToken) Item() map[string]types.AttributeValue {
	item := BaseItem(TypeMetadata, RegistrationTokenID, FormatTime(t.FetchedAt))
	item[AttrValue] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		tokenTarget:          &types.AttributeValueMemberS{Value: t.Target},
		tokenValue:           &types.AttributeValueMemberS{Value: t.Token},
		tokenExpiresAt:       &types.AttributeValueMemberS{Value: FormatTime(t.ExpiresAt)},
		tokenRemove:          &types.AttributeValueMemberS{Value: t.RemoveToken},
		tokenRemoveExpiresAt: &types.AttributeValueMemberS{Value: FormatTime(t.RemoveExpiresAt)},
		tokenTimestamp:       &types.AttributeValueMemberS{Value: FormatTime(t.FetchedAt)},
	}}
	return item
}

// RegistrationTokenFromItem reads the token item. An item written by
// another tool without the removal token or target reads with those empty,
// which makes it due for a refresh.
func RegistrationTokenFromItem(item map[string]types.AttributeValue) (RegistrationToken, error) {
	value, ok := item[AttrValue].(*types.AttributeValueMemberM)
	if !ok {
		return RegistrationToken{}, fmt.Errorf("registration token item has no value map")
	}
	v := value.Value
	t := RegistrationToken{
		Target:      StringAttr(v, tokenTarget),
		Token:       StringAttr(v, tokenValue),
		RemoveToken: StringAttr(v, tokenRemove),
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
		need bool
	}{
		{tokenTimestamp, &t.FetchedAt, true},
		{tokenExpiresAt, &t.ExpiresAt, true},
		{tokenRemoveExpiresAt, &t.RemoveExpiresAt, t.RemoveToken != ""},
	} {
		s := StringAttr(v, f.name)
		if s == "" && !f.need {
			continue
		}
		ts, err := ParseTime(s)
		if err != nil {
			return RegistrationToken{}, fmt.Errorf("registration token item: %s: %w", f.name, err)
		}
		*f.dst = ts
	}
	if t.Token == "" {
		return RegistrationToken{}, fmt.Errorf("registration token item has no token")
	}
	return t, nil
}
