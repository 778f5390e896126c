package protocol

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// AttrExpiresAt is the pool table's TTL attribute (epoch seconds, a number):
// DynamoDB deletes an item some time after it passes.
const AttrExpiresAt = "expiresAt"

// Retention is how long items nobody updates any more stay in the table:
// terminated instance records, and the heartbeats and signals of agents
// that are gone (live agents push theirs forward with every write).
const Retention = 24 * time.Hour

// ExpiresAt is the TTL value for an item written at now.
func ExpiresAt(now time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(Retention).Unix(), 10)}
}
