package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

// holdingTable stands in for DynamoDB: a table keyed by PK that accepts
// every write at once, except one with the value "hold", which stays in
// flight until the test sends on release. It describes the table only to
// a caller other than the client (access key "test").
func holdingTable(t *testing.T) (url string, arrived, release chan struct{}) {
	arrived, release = make(chan struct{}), make(chan struct{})
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.DescribeTable" {
			// The proxy's own look-up, under its own key: not one
			// of the client's calls.
			if strings.Contains(r.Header.Get("Authorization"), "Credential=test/") {
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#AccessDeniedException","message":"the client's own key"}`)
				return
			}
			fmt.Fprint(w, `{"Table":{"TableName":"t","KeySchema":[{"AttributeName":"PK","KeyType":"HASH"}]}}`)
			return
		}
		if bytes.Contains(body, []byte(`"hold"`)) {
			arrived <- struct{}{}
			<-release
		}
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(stub.Close)
	return stub.URL, arrived, release
}

// DynamoDB refuses a write that meets a transaction on one of its items:
// a single write with TransactionConflictException, a transaction
// cancelled with TransactionConflict on that item; two single writes on
// one item are serialized, not refused. Without the realism, every write
// goes through, as the emulator answers.
func TestRealismDynamoDBConflicts(t *testing.T) {
	ctx := context.Background()
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	key := func(pk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"PK": s(pk)}
	}
	update := func(pk, value string) *ddbtypes.Update {
		return &ddbtypes.Update{TableName: aws.String("t"), Key: key(pk), UpdateExpression: aws.String("SET v = :v"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": s(value)}}
	}
	for _, on := range []bool{true, false} {
		url, arrived, release := holdingTable(t)
		p := startProxy(t, url, 1)
		p.SetRealism(faultproxy.Realism{DynamoDBConflicts: on})
		c := newClients(p.URL, 1)
		writeItem := func(pk, value string) error {
			u := update(pk, value)
			_, err := c.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression, ExpressionAttributeValues: u.ExpressionAttributeValues})
			return err
		}
		transact := func(items ...ddbtypes.TransactWriteItem) error {
			_, err := c.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
			return err
		}
		// inFlight starts write and waits until the table holds it.
		inFlight := func(write func() error) chan error {
			done := make(chan error, 1)
			go func() { done <- write() }()
			await.Done(t, "the held write at the table", arrived)
			return done
		}
		singleConflict := func(err error) bool {
			var conflict *ddbtypes.TransactionConflictException
			return errors.As(err, &conflict)
		}
		// cancelledAt tells whether a transaction was cancelled for a
		// conflict on its item at, and only that one.
		cancelledAt := func(err error, at int) bool {
			var canceled *ddbtypes.TransactionCanceledException
			if !errors.As(err, &canceled) {
				return false
			}
			for i, r := range canceled.CancellationReasons {
				if (i == at) != (aws.ToString(r.Code) == "TransactionConflict") {
					return false
				}
			}
			return at < len(canceled.CancellationReasons)
		}

		// A transaction on k under way.
		held := inFlight(func() error {
			return transact(ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String("t"), Item: map[string]ddbtypes.AttributeValue{"PK": s("k"), "v": s("hold")}}})
		})
		if err := writeItem("k", "x"); on != singleConflict(err) || (!on && err != nil) {
			t.Errorf("realism %t: UpdateItem on an item a transaction is writing: %v", on, err)
		}
		_, err := c.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: map[string]ddbtypes.AttributeValue{"PK": s("k"), "other": s("y")}})
		if on != singleConflict(err) || (!on && err != nil) {
			t.Errorf("realism %t: PutItem on an item a transaction is writing: %v", on, err)
		}
		if _, err := c.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("t"), Key: key("j")}); err != nil {
			t.Errorf("realism %t: DeleteItem on another item: %v", on, err)
		}
		err = transact(ddbtypes.TransactWriteItem{Update: update("j", "x")},
			ddbtypes.TransactWriteItem{ConditionCheck: &ddbtypes.ConditionCheck{TableName: aws.String("t"), Key: key("k"), ConditionExpression: aws.String("attribute_exists(PK)")}})
		if on != cancelledAt(err, 1) || (!on && err != nil) {
			t.Errorf("realism %t: a transaction checking an item another transaction is writing: %v", on, err)
		}
		release <- struct{}{}
		if err := <-held; err != nil {
			t.Fatalf("realism %t: the first transaction: %v", on, err)
		}
		if err := writeItem("k", "x"); err != nil {
			t.Errorf("realism %t: UpdateItem once the transaction ended: %v", on, err)
		}

		// A single write on k under way.
		held = inFlight(func() error { return writeItem("k", "hold") })
		if err := writeItem("k", "x"); err != nil {
			t.Errorf("realism %t: a second single write on one item: %v", on, err)
		}
		if err := transact(ddbtypes.TransactWriteItem{Update: update("k", "x")}); on != cancelledAt(err, 0) || (!on && err != nil) {
			t.Errorf("realism %t: a transaction on an item a single write is writing: %v", on, err)
		}
		release <- struct{}{}
		if err := <-held; err != nil {
			t.Fatalf("realism %t: the held write: %v", on, err)
		}

		want := 0
		if on {
			want = 4
		}
		if st := p.Stats(); st.WriteConflicts != want {
			t.Errorf("realism %t: %d writes refused, want %d", on, st.WriteConflicts, want)
		}
	}
}
