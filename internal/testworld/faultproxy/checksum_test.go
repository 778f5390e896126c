package faultproxy_test

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

// An answer whose body the proxy rewrites keeps a CRC32 checksum that
// matches the body the client gets, as DynamoDB's X-Amz-Crc32 must: here a
// sampled receive's, from a target that sends the header.
func TestRewrittenAnswerChecksumMatches(t *testing.T) {
	var messages []string
	for i := range 10 {
		messages = append(messages, fmt.Sprintf(`{"MessageId":"m%d","ReceiptHandle":"h%d","Body":"b"}`, i, i))
	}
	answer := `{"Messages":[` + strings.Join(messages, ",") + `]}`
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if r.Header.Get("X-Amz-Target") == "AmazonSQS.ReceiveMessage" {
			w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(answer))), 10))
			fmt.Fprint(w, answer)
			return
		}
		fmt.Fprint(w, `{"Successful":[],"Failed":[]}`) // the proxy's own visibility changes
	}))
	defer stub.Close()
	p := startProxy(t, stub.URL, 1)
	p.SetRealism(faultproxy.Realism{SQSSampling: true})
	header, body := postJSON(t, p.URL, "AmazonSQS.ReceiveMessage", `{"QueueUrl":"q","MaxNumberOfMessages":10}`)
	var got struct{ Messages []json.RawMessage }
	if err := json.Unmarshal(body, &got); err != nil || len(got.Messages) == len(messages) {
		t.Fatalf("answer %s (%v): want a sampled one, rewritten", body, err)
	}
	if want := strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10); header.Get("X-Amz-Crc32") != want {
		t.Errorf("X-Amz-Crc32 %q, want %s, the checksum of the body sent", header.Get("X-Amz-Crc32"), want)
	}
}

// An answer the proxy makes itself carries the CRC32 of its body, as
// DynamoDB's do: here a single write refused for a transaction conflict.
func TestOwnAnswerChecksumMatches(t *testing.T) {
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a request reached the target: %s", r.Header.Get("X-Amz-Target"))
	}))
	defer stub.Close()
	p := startProxy(t, stub.URL, 1)
	p.SetRules(faultproxy.Rule{Service: "dynamodb", Kind: faultproxy.Conflict, Rate: 1})
	header, body := postJSON(t, p.URL, "DynamoDB_20120810.UpdateItem", `{"TableName":"t","Key":{"pk":{"S":"a"}}}`)
	if !strings.Contains(string(body), "TransactionConflictException") {
		t.Fatalf("answer %s: want a TransactionConflictException", body)
	}
	if want := strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10); header.Get("X-Amz-Crc32") != want {
		t.Errorf("X-Amz-Crc32 %q, want %s, the checksum of the body sent", header.Get("X-Amz-Crc32"), want)
	}
}

// postJSON sends a request of the JSON protocols (target: its
// X-Amz-Target) and returns the answer's header and body.
func postJSON(t *testing.T, url, target, body string) (http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header, answer
}
