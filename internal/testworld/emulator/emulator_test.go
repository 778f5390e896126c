package emulator

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// With AWS_ENDPOINT_URL set (a LocalStack, here a stand-in), Ensure puts its
// front in front of it: requests reach it untouched, its answers come back
// untouched, and stop leaves it running.
func TestEnsureUsesAWSEndpointURL(t *testing.T) {
	type seen struct {
		method, uri, host, auth, contentType string
		body                                 []byte
	}
	got := make(chan seen, 1)
	localstack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_ministack/health" {
			http.NotFound(w, r) // Ensure asks which emulator it is: not MiniStack
			return
		}
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body}
		w.Header().Set("X-Amzn-Requestid", "req-1")
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, `{"answer":true}`)
	}))
	defer localstack.Close()
	t.Setenv("AWS_ENDPOINT_URL", localstack.URL)
	endpoint, stop, err := Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if endpoint == localstack.URL {
		t.Fatalf("endpoint = AWS_ENDPOINT_URL %s, want the front in front of it", endpoint)
	}

	body := bytes.Repeat([]byte(`{"TableName":"t"}`), 60000) // 1 MB, streamed through
	req, err := http.NewRequest(http.MethodPost, endpoint+"/some/path?x=1", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	const auth = "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x"
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || string(answer) != `{"answer":true}` || resp.Header.Get("X-Amzn-Requestid") != "req-1" {
		t.Errorf("answer: HTTP %d %q, request id %q; want the emulator's own", resp.StatusCode, answer, resp.Header.Get("X-Amzn-Requestid"))
	}
	s := <-got
	if s.method != http.MethodPost || s.uri != "/some/path?x=1" || s.host != strings.TrimPrefix(endpoint, "http://") ||
		s.auth != auth || s.contentType != "application/x-amz-json-1.0" || !bytes.Equal(s.body, body) {
		t.Errorf("the emulator got %s %s (Host %s, Authorization %q, Content-Type %q, %d bytes); want the request as sent",
			s.method, s.uri, s.host, s.auth, s.contentType, len(s.body))
	}

	stop()
	if _, err := http.Get(endpoint); err == nil {
		t.Error("the front still answers after stop")
	}
	if resp, err := http.Get(localstack.URL); err != nil {
		t.Errorf("stop ended AWS_ENDPOINT_URL's emulator: %v", err)
	} else {
		resp.Body.Close()
		<-got
	}
}

// TestConditionalUpdateHasOneWinner races 20 identical conditional
// UpdateItems per trial: exactly one may succeed, as on real DynamoDB (plain
// moto_server sometimes lets two through).
func TestConditionalUpdateHasOneWinner(t *testing.T) {
	ctx, d := emulatorDDB(t)
	table := d.newTable(ctx, t)

	key := map[string]any{"PK": s("runner"), "SK": s("slot")}
	const trials, racers = 20, 20

	// The claim, padded with extra attributes: plain moto checks the
	// condition before it validates and applies the update, and a longer
	// update widens that window enough for the race to show. Unpadded, plain
	// moto_server rarely lets two through (0 of 300 trials here); padded with
	// 80, it did in about 2 trials of 3.
	update := "SET #s = :claimed, #o = :me"
	for i := 0; i < 80; i++ {
		update += fmt.Sprintf(", pad%d = :me", i)
	}
	for trial := 0; trial < trials; trial++ {
		if _, err := d.call(ctx, "PutItem", map[string]any{
			"TableName": table,
			"Item":      map[string]any{"PK": s("runner"), "SK": s("slot"), "state": s("idle")},
		}); err != nil {
			t.Fatalf("trial %d: resetting item: %v", trial, err)
		}

		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
			others  []error
			start   = make(chan struct{})
		)
		for i := 0; i < racers; i++ {
			me := fmt.Sprintf("racer-%d", i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := d.call(ctx, "UpdateItem", map[string]any{
					"TableName":                 table,
					"Key":                       key,
					"UpdateExpression":          update,
					"ConditionExpression":       "#s = :idle",
					"ExpressionAttributeNames":  map[string]string{"#s": "state", "#o": "owner"},
					"ExpressionAttributeValues": map[string]any{":claimed": s("claimed"), ":idle": s("idle"), ":me": s(me)},
				})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, me)
				case isType(err, "ConditionalCheckFailedException"):
				default:
					others = append(others, err)
				}
			}()
		}
		close(start)
		wg.Wait()

		if len(others) > 0 {
			t.Fatalf("trial %d: unexpected errors: %v", trial, others)
		}
		if len(winners) != 1 {
			t.Fatalf("trial %d: %d winners %v, want exactly 1", trial, len(winners), winners)
		}
		out, err := d.call(ctx, "GetItem", map[string]any{"TableName": table, "Key": key, "ConsistentRead": true})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		item, _ := out["Item"].(map[string]any)
		if got := attrS(item, "owner"); got != winners[0] {
			t.Fatalf("trial %d: owner = %q, want winner %q", trial, got, winners[0])
		}
	}
}

// TestTransactionRollsBack: a cancelled transaction changes nothing, and a
// committed one everything (the emulator backs tables up for a rollback
// differently from plain moto).
func TestTransactionRollsBack(t *testing.T) {
	ctx, d := emulatorDDB(t)
	table := d.newTable(ctx, t)
	keys := []map[string]any{{"PK": s("item"), "SK": s("a")}, {"PK": s("item"), "SK": s("b")}, {"PK": s("item"), "SK": s("c")}}
	for _, k := range keys {
		if _, err := d.call(ctx, "PutItem", map[string]any{"TableName": table, "Item": map[string]any{"PK": k["PK"], "SK": k["SK"], "v": s("0")}}); err != nil {
			t.Fatal(err)
		}
	}
	transact := func(lastCondition string) error {
		var items []map[string]any
		for i, k := range keys {
			u := map[string]any{
				"TableName": table, "Key": k, "UpdateExpression": "SET v = :one",
				"ExpressionAttributeValues": map[string]any{":one": s("1")},
			}
			if i == len(keys)-1 && lastCondition != "" {
				u["ConditionExpression"] = "v = :want"
				u["ExpressionAttributeValues"].(map[string]any)[":want"] = s(lastCondition)
			}
			items = append(items, map[string]any{"Update": u})
		}
		_, err := d.call(ctx, "TransactWriteItems", map[string]any{"TransactItems": items})
		return err
	}
	values := func() string {
		var got []string
		for _, k := range keys {
			out, err := d.call(ctx, "GetItem", map[string]any{"TableName": table, "Key": k, "ConsistentRead": true})
			if err != nil {
				t.Fatal(err)
			}
			item, _ := out["Item"].(map[string]any)
			got = append(got, attrS(item, "v"))
		}
		return strings.Join(got, ",")
	}
	if err := transact("5"); !isType(err, "TransactionCanceledException") {
		t.Fatalf("transaction with a failing condition: %v, want TransactionCanceledException", err)
	}
	if got := values(); got != "0,0,0" {
		t.Errorf("after a cancelled transaction: %s, want 0,0,0", got)
	}
	if err := transact("0"); err != nil {
		t.Fatal(err)
	}
	if got := values(); got != "1,1,1" {
		t.Errorf("after a committed transaction: %s, want 1,1,1", got)
	}
}

// TestRetentionCheck: the emulator's own retention check (see
// serialized_moto.py) still keeps messages past the queue's retention
// period from being handed out.
func TestRetentionCheck(t *testing.T) {
	got := runServerPython(t, `
import serialized_moto
serialized_moto.check_retention_directly()
from moto.sqs.models import sqs_backends
backend = sqs_backends["000000000000"]["us-east-1"]
backend.create_queue("retention", MessageRetentionPeriod="60")
fresh = backend.send_message("retention", "fresh")
old = backend.send_message("retention", "old")
old.sent_timestamp -= 61 * 1000
print(backend.is_message_valid_based_on_retention_period("retention", fresh),
      backend.is_message_valid_based_on_retention_period("retention", old))
`)
	if got != "True False" {
		t.Errorf("valid (fresh, past retention) = %s, want True False", got)
	}
}

// TestModuleListReadOnce: the module list the emulator reads once (see
// serialized_moto.py) is the one moto would list at every request.
func TestModuleListReadOnce(t *testing.T) {
	got := runServerPython(t, `
import serialized_moto
from moto import backends
listed = list(backends.list_of_moto_modules())
serialized_moto.list_modules_once()
print(len(listed) > 50 and "dynamodb" in listed and list(backends.list_of_moto_modules()) == listed)
`)
	if got != "True" {
		t.Errorf("the module list read once differs from moto's own: %s", got)
	}
}

// runServerPython runs code with the emulator's server script importable
// and returns what it printed, trimmed.
func runServerPython(t *testing.T, code string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "serialized_moto.py"), serverScript, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cmp.Or(os.Getenv("EC2RUNNERS_PYTHON"), "python3"), "-c", code)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "MOTO_ACCOUNT_ID=000000000000")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// emulatorDDB starts (or joins) the emulator for the test, until its end,
// and returns the test's context and a DynamoDB client of it. The startup
// and each call (a guard against a hung server) have Patience; the test's
// calls together have no deadline.
func emulatorDDB(t *testing.T) (context.Context, *ddb) {
	startup, cancel := context.WithTimeout(context.Background(), await.Patience)
	defer cancel()
	endpoint, stop, err := Ensure(startup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop) // after the tables' cleanup, registered later
	return t.Context(), &ddb{endpoint: endpoint, client: &http.Client{Timeout: await.Patience}}
}

// newTable creates a PK/SK table, deleted when the test ends.
func (d *ddb) newTable(ctx context.Context, t *testing.T) string {
	t.Helper()
	table := "emulator-test-" + randomHex(6)
	if _, err := d.call(ctx, "CreateTable", map[string]any{
		"TableName":   table,
		"BillingMode": "PAY_PER_REQUEST",
		"AttributeDefinitions": []map[string]string{
			{"AttributeName": "PK", "AttributeType": "S"},
			{"AttributeName": "SK", "AttributeType": "S"},
		},
		"KeySchema": []map[string]string{
			{"AttributeName": "PK", "KeyType": "HASH"},
			{"AttributeName": "SK", "KeyType": "RANGE"},
		},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := d.call(context.Background(), "DeleteTable", map[string]any{"TableName": table}); err != nil {
			t.Errorf("deleting table: %v", err)
		}
	})
	waitActive(ctx, t, d, table)
	return table
}

type ddb struct {
	endpoint string
	client   *http.Client
}

// apiError is a DynamoDB error response.
type apiError struct {
	Status  int
	Type    string // e.g. ConditionalCheckFailedException
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Type, e.Message) }

func isType(err error, typ string) bool {
	e, ok := err.(*apiError)
	return ok && e.Type == typ
}

// call sends one DynamoDB JSON request. moto does not check signatures, but
// needs the Authorization header to find the region and service.
func (d *ddb) call(ctx context.Context, op string, in map[string]any) (map[string]any, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.endpoint+"/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x")
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("%s: HTTP %d, body %q: %w", op, resp.StatusCode, raw, err)
		}
	}
	if resp.StatusCode != http.StatusOK {
		e := &apiError{Status: resp.StatusCode}
		typ, _ := out["__type"].(string)
		e.Type = typ[strings.LastIndex(typ, "#")+1:]
		e.Message, _ = out["message"].(string)
		if e.Message == "" {
			e.Message, _ = out["Message"].(string)
		}
		return nil, e
	}
	return out, nil
}

// waitActive waits for the table to be ACTIVE (moto: at once; LocalStack:
// soon after).
func waitActive(ctx context.Context, t *testing.T, d *ddb, table string) {
	t.Helper()
	await.True(t, "table "+table+" to be ACTIVE", func() error {
		out, err := d.call(ctx, "DescribeTable", map[string]any{"TableName": table})
		if err != nil {
			t.Fatal(err)
		}
		desc, _ := out["Table"].(map[string]any)
		if status := desc["TableStatus"]; status != "ACTIVE" {
			return fmt.Errorf("status %v", status)
		}
		return nil
	})
}

func s(v string) map[string]string { return map[string]string{"S": v} }

func attrS(item map[string]any, name string) string {
	a, _ := item[name].(map[string]any)
	v, _ := a["S"].(string)
	return v
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
