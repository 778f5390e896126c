package protocol

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's TTL reads a Number of epoch seconds and silently ignores any
// other type, or milliseconds (a date thousands of years ahead): no error
// would say so, the items would just never go. ExpiresAt is one.
func TestExpiresAt_isANumberOfEpochSeconds(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	n, ok := ExpiresAt(now).(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("ExpiresAt is %T, want a Number", ExpiresAt(now))
	}
	secs, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil || secs != now.Add(Retention).Unix() {
		t.Errorf("ExpiresAt = %s, want %d, the epoch seconds of now plus Retention", n.Value, now.Add(Retention).Unix())
	}
}
