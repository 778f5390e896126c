package agentsim_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

// The same failure, twice, from the emulator: each answer has its own
// request id, yet it is one error to log; another failure is another.
func TestErrorKey(t *testing.T) {
	const table = "agentsim-no-such-table"
	missing := func() error {
		_, err := ddbClient.Query(t.Context(), &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("PK = :pk")})
		if err == nil {
			t.Fatalf("querying the missing table %s succeeded", table)
		}
		return err
	}
	first, again := missing(), missing()
	if first.Error() == again.Error() {
		t.Logf("the emulator answered both with one request id: %v", first)
	}
	if agentsim.ErrorKey(first) != agentsim.ErrorKey(again) {
		t.Errorf("one failure, two keys:\n%s\n%s", agentsim.ErrorKey(first), agentsim.ErrorKey(again))
	}
	_, other := ddbClient.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table)})
	if other == nil || agentsim.ErrorKey(other) == agentsim.ErrorKey(first) {
		t.Errorf("two failures, one key: %s", agentsim.ErrorKey(other))
	}
}
