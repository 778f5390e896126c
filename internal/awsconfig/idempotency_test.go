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

// DynamoDB makes a transaction idempotent for its ClientRequestToken: a
// retried TransactWriteItems whose first answer was lost is not applied
// twice only if the retry carries the first attempt's token. The clients
// the provider builds give every transaction a token, and their retries
// reuse it.
func TestTransactionsKeepTheirTokenAcrossRetries(t *testing.T) {
	isolate(t)
	var (
		mu     sync.Mutex
		tokens []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct{ ClientRequestToken string }
		_ = json.Unmarshal(body, &in)
		mu.Lock()
		tokens = append(tokens, in.ClientRequestToken)
		first := len(tokens) == 1
		mu.Unlock()
		answer, status := `{}`, http.StatusOK
		if first { // as if the answer were lost: the SDK retries
			answer, status = `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"lost"}`, http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(answer))), 10))
		w.WriteHeader(status)
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	c, err := New(context.Background(), Options{Region: "us-east-1", AccessKey: "a", SecretKey: "s", Endpoints: Endpoints{DynamoDB: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DynamoDB.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{{
		Put: &ddbtypes.Put{TableName: aws.String("t"), Item: map[string]ddbtypes.AttributeValue{"PK": &ddbtypes.AttributeValueMemberS{Value: "k"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0] == "" || tokens[0] != tokens[1] {
		t.Errorf("ClientRequestToken of each attempt: %q, want two equal, non-empty tokens", tokens)
	}
}
