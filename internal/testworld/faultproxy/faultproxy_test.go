package faultproxy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

// endpoint is the emulator's; direct clients (setup and audit) use it.
var endpoint string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	ep, stop, err := emulator.Ensure(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultproxy tests need the AWS emulator:", err)
		return 1
	}
	defer stop()
	endpoint = ep
	return m.Run()
}

// awsClients are SDK clients for one endpoint.
type awsClients struct {
	ddb *dynamodb.Client
	sqs *sqs.Client
	ec2 *ec2.Client
}

// newClients points clients at url with the standard retryer making at most
// attempts attempts (1: no retries), with short backoffs to keep tests fast.
func newClients(url string, attempts int) awsClients {
	cfg := aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(url),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.MaxBackoff = 20 * time.Millisecond
			})
		},
	}
	return awsClients{dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg), ec2.NewFromConfig(cfg)}
}

func startProxy(t *testing.T, target string, seed uint64) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// newTable creates a table keyed by "pk" through the emulator directly.
func newTable(t *testing.T, direct awsClients) string {
	t.Helper()
	ctx := context.Background()
	name := randomName("faultproxy-")
	_, err := direct.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	// The name is this test's own: a table already there is ours, made by
	// a retry of this call whose first answer the emulator lost.
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		direct.ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

func putItem(ctx context.Context, c awsClients, table, pk string) error {
	_, err := c.ddb.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item:      map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}},
	})
	return err
}

func hasItem(t *testing.T, c awsClients, table, pk string) bool {
	t.Helper()
	out, err := c.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item != nil
}

// recorder is a hook that keeps every request it sees.
type recorder struct {
	mu   sync.Mutex
	reqs []faultproxy.Request
}

func (r *recorder) hook(req faultproxy.Request) faultproxy.Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return faultproxy.None
}

func (r *recorder) list() []faultproxy.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

func TestIdentifiesServiceAndAction(t *testing.T) {
	ctx := context.Background()
	p := startProxy(t, endpoint, 1)
	var rec recorder
	p.OnRequest(rec.hook)
	c := newClients(p.URL, 1)

	if _, err := c.ddb.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sqs.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{}); err != nil {
		t.Fatal(err)
	}
	// A query-protocol call of a service the proxy does not know by its
	// protocol: named by the credential scope of its signature.
	req, _ := http.NewRequest("POST", p.URL+"/", strings.NewReader("Action=GetCallerIdentity&Version=2011-06-15"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=00")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}

	want := []faultproxy.Request{
		{Seq: 1, Service: "dynamodb", Action: "ListTables"},
		{Seq: 2, Service: "sqs", Action: "ListQueues"},
		{Seq: 3, Service: "ec2", Action: "DescribeVpcs"},
		{Seq: 4, Service: "sts", Action: "GetCallerIdentity"},
	}
	got := rec.list()
	if len(got) != len(want) {
		t.Fatalf("hook saw %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, g := range got {
		w := want[i]
		if g.Seq != w.Seq || g.Service != w.Service || g.Action != w.Action || g.Fault != faultproxy.None {
			t.Errorf("request %d = %+v, want %+v", i, g, w)
		}
	}
	st := p.Stats()
	if n := st.Requests[faultproxy.Op{Service: "ec2", Action: "DescribeVpcs"}]; n != 1 {
		t.Errorf("Stats counts %d ec2 DescribeVpcs, want 1:\n%s", n, st)
	}
	if n := st.TotalFaults(faultproxy.None); n != 0 {
		t.Errorf("%d faults without rules", n)
	}
}

// TestErrorFaults checks that each service's throttling and server errors
// reach the SDK as the error AWS would send: the right code and status, and
// classified by the standard retryer as retryable (and throttling).
func TestErrorFaults(t *testing.T) {
	ctx := context.Background()
	p := startProxy(t, endpoint, 1)
	c := newClients(p.URL, 1)
	calls := []struct {
		service, action string
		call            func() error
		other           func() error // another action of the service, unaffected
	}{
		{"dynamodb", "ListTables",
			func() error { _, err := c.ddb.ListTables(ctx, &dynamodb.ListTablesInput{}); return err },
			func() error { _, err := c.ddb.DescribeLimits(ctx, &dynamodb.DescribeLimitsInput{}); return err }},
		{"sqs", "ListQueues",
			func() error { _, err := c.sqs.ListQueues(ctx, &sqs.ListQueuesInput{}); return err },
			func() error {
				_, err := c.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("faultproxy-none")})
				var apiErr smithy.APIError
				if errors.As(err, &apiErr) && strings.Contains(apiErr.ErrorCode(), "NonExistentQueue") {
					return nil // the emulator's own answer, not ours
				}
				return err
			}},
		{"ec2", "DescribeVpcs",
			func() error { _, err := c.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{}); return err },
			func() error { _, err := c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); return err }},
	}
	want := map[string]map[faultproxy.Kind]struct {
		code   string
		status int
	}{
		"dynamodb": {faultproxy.Throttle: {"ThrottlingException", 400}, faultproxy.ServerError: {"InternalServerError", 500}},
		"sqs":      {faultproxy.Throttle: {"RequestThrottled", 400}, faultproxy.ServerError: {"InternalError", 500}},
		"ec2":      {faultproxy.Throttle: {"RequestLimitExceeded", 503}, faultproxy.ServerError: {"InternalError", 500}},
	}
	throttles := retry.IsErrorThrottles(retry.DefaultThrottles)
	retryer := retry.NewStandard()
	for _, call := range calls {
		for _, kind := range []faultproxy.Kind{faultproxy.Throttle, faultproxy.ServerError} {
			t.Run(call.service+"/"+kind.String(), func(t *testing.T) {
				p.SetRules(faultproxy.Rule{Service: call.service, Action: call.action, Kind: kind, Rate: 1})
				err := call.call()
				var apiErr smithy.APIError
				var respErr *awshttp.ResponseError
				if !errors.As(err, &apiErr) || !errors.As(err, &respErr) {
					t.Fatalf("got %v, want an API error", err)
				}
				w := want[call.service][kind]
				if call.service == "dynamodb" && apiErr.ErrorCode() == "ProvisionedThroughputExceededException" {
					w.code = apiErr.ErrorCode() // DynamoDB's other throttle code, drawn (TestDynamoDBThrottleCodes)
				}
				if apiErr.ErrorCode() != w.code || respErr.HTTPStatusCode() != w.status {
					t.Errorf("got code %s status %d, want %s %d", apiErr.ErrorCode(), respErr.HTTPStatusCode(), w.code, w.status)
				}
				if !retryer.IsErrorRetryable(err) {
					t.Errorf("the standard retryer would not retry %v", err)
				}
				if isThrottle := throttles.IsErrorThrottle(err) == aws.TrueTernary; isThrottle != (kind == faultproxy.Throttle) {
					t.Errorf("classified as throttling: %v, for %s", isThrottle, kind)
				}
				if err := call.other(); err != nil {
					t.Errorf("another action failed: %v", err)
				}
			})
		}
	}
	p.SetRules()
	st := p.Stats()
	for _, call := range calls {
		for _, kind := range []faultproxy.Kind{faultproxy.Throttle, faultproxy.ServerError} {
			if n := st.Faults[faultproxy.Fault{Op: faultproxy.Op{Service: call.service, Action: call.action}, Kind: kind}]; n != 1 {
				t.Errorf("Stats counts %d %s %s %s, want 1", n, call.service, call.action, kind)
			}
		}
	}
	if n := st.TotalFaults(faultproxy.None); n != 6 {
		t.Errorf("Stats counts %d faults, want 6:\n%s", n, st)
	}
}

// TestDrops checks that DropBefore loses the request and DropAfter only its
// response: both are connection errors the SDK would retry, but only the
// second has taken effect.
func TestDrops(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	table := newTable(t, direct)
	p := startProxy(t, endpoint, 1)
	c := newClients(p.URL, 1)
	retryer := retry.NewStandard()

	p.SetRules(faultproxy.Rule{Service: "dynamodb", Action: "PutItem", Kind: faultproxy.DropBefore, Rate: 1})
	err := putItem(ctx, c, table, "before")
	if err == nil || !retryer.IsErrorRetryable(err) {
		t.Errorf("DropBefore: got %v, want a retryable error", err)
	}
	if hasItem(t, direct, table, "before") {
		t.Error("DropBefore: the item was written")
	}

	p.SetRules(faultproxy.Rule{Service: "dynamodb", Action: "PutItem", Kind: faultproxy.DropAfter, Rate: 1})
	err = putItem(ctx, c, table, "after")
	if err == nil || !retryer.IsErrorRetryable(err) {
		t.Errorf("DropAfter: got %v, want a retryable error", err)
	}
	if !hasItem(t, direct, table, "after") {
		t.Error("DropAfter: the item was not written")
	}

	// The classic duplicate: a lost SendMessage response, retried.
	q, err := direct.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(randomName("faultproxy-"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	p.SetRules(faultproxy.Rule{Service: "sqs", Action: "SendMessage", Kind: faultproxy.DropAfter, Rate: 1})
	if _, err := c.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x")}); err == nil {
		t.Error("DropAfter: SendMessage succeeded")
	}
	p.SetRules()
	if _, err := c.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x")}); err != nil {
		t.Fatal(err)
	}
	out, err := direct.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 2 {
		t.Errorf("queue holds %d messages, want 2 (the lost answer's and the retry's)", len(out.Messages))
	}
}

// A hook chooses its own request's fault: the drawn one (here none) is
// replaced, and counted as injected.
func TestHookChoosesItsRequestsFault(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	table := newTable(t, direct)
	p := startProxy(t, endpoint, 1)
	c := newClients(p.URL, 1)
	p.OnRequest(func(req faultproxy.Request) faultproxy.Kind {
		if req.Action == "PutItem" && strings.Contains(string(req.Body), "lost") {
			return faultproxy.DropAfter
		}
		return faultproxy.None
	})
	if err := putItem(ctx, c, table, "lost"); err == nil {
		t.Error("PutItem answered, want its answer dropped")
	}
	if !hasItem(t, direct, table, "lost") {
		t.Error("the PutItem whose answer was dropped did not take effect")
	}
	if err := putItem(ctx, c, table, "kept"); err != nil {
		t.Errorf("PutItem the hook left alone: %v", err)
	}
	if n := p.Stats().TotalFaults(faultproxy.DropAfter); n != 1 {
		t.Errorf("%d DropAfter faults counted, want 1", n)
	}
}

func TestLatency(t *testing.T) {
	p := startProxy(t, endpoint, 1)
	c := newClients(p.URL, 1)
	p.SetRules(faultproxy.Rule{Service: "dynamodb", Kind: faultproxy.Latency, Rate: 1, Delay: 300 * time.Millisecond})
	start := time.Now()
	if _, err := c.ddb.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("call took %s, want at least the 300ms delay", d)
	}
	if n := p.Stats().TotalFaults(faultproxy.Latency); n != 1 {
		t.Errorf("%d Latency faults counted, want 1", n)
	}
}

// throttlePattern makes n sequential calls through a new proxy throttling
// 10% of them and returns which were throttled. The target is a stub: the
// draws do not depend on what the target answers.
func throttlePattern(t *testing.T, seed uint64, n int) []bool {
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		fmt.Fprint(w, `{"TableNames":[]}`)
	}))
	defer stub.Close()
	p, err := faultproxy.New(stub.URL, seed)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var rec recorder
	p.OnRequest(rec.hook)
	p.SetRules(faultproxy.Rule{Service: "dynamodb", Kind: faultproxy.Throttle, Rate: 0.1})
	c := newClients(p.URL, 1)
	var pattern []bool
	for range n {
		_, err := c.ddb.ListTables(context.Background(), &dynamodb.ListTablesInput{})
		pattern = append(pattern, err != nil)
	}
	reqs := rec.list()
	if len(reqs) != n {
		t.Fatalf("hook saw %d requests, want %d", len(reqs), n)
	}
	throttled := 0
	for i, req := range reqs {
		if (req.Fault == faultproxy.Throttle) != pattern[i] {
			t.Fatalf("request %d: hook saw fault %s, client error %v", req.Seq, req.Fault, pattern[i])
		}
		if pattern[i] {
			throttled++
		}
	}
	if st := p.Stats().TotalFaults(faultproxy.Throttle); st != throttled {
		t.Errorf("Stats counts %d throttles, clients saw %d", st, throttled)
	}
	return pattern
}

func TestRateIsReproducible(t *testing.T) {
	const n = 300
	count := func(p []bool) int {
		c := 0
		for _, v := range p {
			if v {
				c++
			}
		}
		return c
	}
	a, b := throttlePattern(t, 42, n), throttlePattern(t, 42, n)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different faults: %d and %d throttled", count(a), count(b))
	}
	// 10% of 300: 30 expected, standard deviation 5.2.
	if c := count(a); c < 10 || c > 55 {
		t.Errorf("%d of %d calls throttled at rate 0.1", c, n)
	}
	t.Logf("seed 42: %d of %d throttled", count(a), n)
	if other := throttlePattern(t, 43, n); slices.Equal(a, other) {
		t.Error("seeds 42 and 43 gave the same faults")
	}
}

// TestRetriesAbsorbFaults: with the standard retryer and enough attempts,
// calls through a proxy that throttles 10% and fails 5% all succeed, once.
func TestRetriesAbsorbFaults(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	table := newTable(t, direct)
	p := startProxy(t, endpoint, 7)
	p.SetRules(
		faultproxy.Rule{Kind: faultproxy.Throttle, Rate: 0.1},
		faultproxy.Rule{Kind: faultproxy.ServerError, Rate: 0.05},
	)
	c := newClients(p.URL, 10)
	const n = 60
	for i := range n {
		if err := putItem(ctx, c, table, fmt.Sprint(i)); err != nil {
			t.Fatalf("PutItem %d: %v", i, err)
		}
	}
	st := p.Stats()
	if st.TotalFaults(faultproxy.Throttle) == 0 || st.TotalFaults(faultproxy.ServerError) == 0 {
		t.Errorf("expected both kinds of faults:\n%s", st)
	}
	t.Logf("stats:\n%s", st)
	p.Pause(true) // the audit
	out, err := c.ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), Select: ddbtypes.SelectCount})
	if err != nil {
		t.Fatal(err)
	}
	if out.Count != n {
		t.Errorf("table holds %d items, want %d", out.Count, n)
	}
}

// TestHookOrderAndHold: the hook sees requests in order, and a blocked hook
// holds its request in flight (not yet applied) while others go through.
func TestHookOrderAndHold(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	table := newTable(t, direct)
	p := startProxy(t, endpoint, 1)
	c := newClients(p.URL, 1)

	held, release := make(chan faultproxy.Request, 1), make(chan struct{})
	var rec recorder
	p.OnRequest(func(req faultproxy.Request) faultproxy.Kind {
		rec.hook(req)
		if req.Action == "PutItem" && strings.Contains(string(req.Body), "held") {
			held <- req
			<-release
		}
		return faultproxy.None
	})
	for _, pk := range []string{"a", "b"} {
		if err := putItem(ctx, c, table, pk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "a"}}}); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for i, req := range rec.list() {
		if req.Seq != i+1 {
			t.Errorf("request %d has Seq %d", i+1, req.Seq)
		}
		actions = append(actions, req.Action)
	}
	if want := []string{"PutItem", "PutItem", "GetItem"}; !slices.Equal(actions, want) {
		t.Errorf("hook saw %v, want %v", actions, want)
	}

	done := make(chan error, 1)
	go func() { done <- putItem(ctx, c, table, "held") }()
	var req faultproxy.Request
	await.True(t, "the hook to see the PutItem", func() error {
		select {
		case req = <-held:
			return nil
		case err := <-done:
			t.Fatalf("the PutItem returned without the hook holding it: %v", err)
		default:
		}
		return fmt.Errorf("no PutItem held; hook saw %d request(s)", len(rec.list()))
	})
	if req.Seq != 4 {
		t.Errorf("held request has Seq %d, want 4", req.Seq)
	}
	if _, err := c.ddb.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("another request while one is held: %v", err)
	}
	if hasItem(t, direct, table, "held") {
		t.Error("the held PutItem took effect before release")
	}
	select {
	case err := <-done:
		t.Fatalf("the held PutItem returned early: %v", err)
	default:
	}
	close(release)
	await.True(t, "the released PutItem to return", func() error {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return nil
		default:
			return errors.New("still in flight")
		}
	})
	if !hasItem(t, direct, table, "held") {
		t.Error("the released PutItem did not take effect")
	}
}

func TestPause(t *testing.T) {
	ctx := context.Background()
	p := startProxy(t, endpoint, 1)
	c := newClients(p.URL, 1)
	list := func() error { _, err := c.ddb.ListTables(ctx, &dynamodb.ListTablesInput{}); return err }
	p.SetRules(faultproxy.Rule{Service: "dynamodb", Action: "ListTables", Kind: faultproxy.Throttle, Rate: 1})

	p.Pause(true)
	for range 3 {
		if err := list(); err != nil {
			t.Fatalf("paused: %v", err)
		}
	}
	if n := p.Stats().TotalFaults(faultproxy.None); n != 0 {
		t.Errorf("%d faults while paused", n)
	}
	p.Pause(false)
	if err := list(); err == nil {
		t.Error("resumed: no fault")
	}
	st := p.Stats()
	if st.Requests[faultproxy.Op{Service: "dynamodb", Action: "ListTables"}] != 4 || st.TotalFaults(faultproxy.Throttle) != 1 {
		t.Errorf("stats:\n%s", st)
	}
}
