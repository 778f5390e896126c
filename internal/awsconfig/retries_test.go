package awsconfig

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// dynamoAnswer is one answer of a stand-in DynamoDB endpoint.
type dynamoAnswer struct {
	status int
	body   string
}

// errorAnswer is DynamoDB's answer for an error of type typ.
func errorAnswer(status int, typ, msg string) dynamoAnswer {
	return dynamoAnswer{status, `{"__type":"com.amazonaws.dynamodb.v20120810#` + typ + `","message":"` + msg + `"}`}
}

// dynamoStandIn answers the requests to a DynamoDB client built by New with
// answers in turn (then {}), and returns the client and the request bodies.
func dynamoStandIn(t *testing.T, answers ...dynamoAnswer) (*dynamodb.Client, func() [][]byte) {
	t.Helper()
	isolate(t)
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, body)
		a := dynamoAnswer{http.StatusOK, `{}`}
		if n := len(bodies); n <= len(answers) {
			a = answers[n-1]
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(a.body))), 10))
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	c, err := New(context.Background(), Options{Region: "us-east-1", AccessKey: "a", SecretKey: "s", Endpoints: Endpoints{DynamoDB: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	return c.DynamoDB, func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return bodies
	}
}

// DynamoDB makes a transaction idempotent for its ClientRequestToken: a
// retried TransactWriteItems whose first answer was lost is not applied
// twice only if the retry carries the first attempt's token. The clients
// the provider builds give every transaction a token, and their retries
// reuse it.
func TestTransactionsKeepTheirTokenAcrossRetries(t *testing.T) {
	db, requests := dynamoStandIn(t, errorAnswer(http.StatusInternalServerError, "InternalServerError", "lost"))
	_, err := db.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{{
		Put: &ddbtypes.Put{TableName: aws.String("t"), Item: map[string]ddbtypes.AttributeValue{"PK": &ddbtypes.AttributeValueMemberS{Value: "k"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, body := range requests() {
		var in struct{ ClientRequestToken string }
		_ = json.Unmarshal(body, &in)
		tokens = append(tokens, in.ClientRequestToken)
	}
	if len(tokens) != 2 || tokens[0] == "" || tokens[0] != tokens[1] {
		t.Errorf("ClientRequestToken of each attempt: %q, want two equal, non-empty tokens", tokens)
	}
}

// A single write to an item that a transaction is changing fails with
// TransactionConflictException, which AWS documents as retryable and the
// SDK does not retry by itself: the provider's clients retry it, so a
// release or a claim does not fail for a concurrent transaction.
func TestWritesConflictingWithATransactionAreRetried(t *testing.T) {
	db, requests := dynamoStandIn(t, errorAnswer(http.StatusBadRequest, "TransactionConflictException", "Transaction is ongoing for the item"))
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String("t"), Key: map[string]ddbtypes.AttributeValue{"PK": &ddbtypes.AttributeValueMemberS{Value: "k"}},
		UpdateExpression: aws.String("SET a = :a"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":a": &ddbtypes.AttributeValueMemberS{Value: "v"}},
	})
	if err != nil {
		t.Fatalf("UpdateItem: %v", err)
	}
	if n := len(requests()); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}
