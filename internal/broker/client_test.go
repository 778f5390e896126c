package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
)

const function = "ci-broker"

// fakeLambda is Lambda's Invoke API with one function, whose answers the
// test gives.
type fakeLambda struct {
	t      *testing.T
	answer func(req broker.Request) (status int, headers map[string]string, body string)

	mu       sync.Mutex
	requests []broker.Request
	paths    []string
}

func (f *fakeLambda) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req broker.Request
	if err := json.Unmarshal(body, &req); err != nil {
		f.t.Errorf("the invocation's payload is not a broker request: %v: %s", err, body)
	}
	if got := r.Header.Get("X-Amz-Invocation-Type"); got != "RequestResponse" {
		f.t.Errorf("invocation type %q, want RequestResponse", got)
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.paths = append(f.paths, r.URL.EscapedPath())
	f.mu.Unlock()
	status, headers, answer := f.answer(req)
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

// answers answers every invocation with resp.
func answers(t *testing.T, resp broker.Response) func(broker.Request) (int, map[string]string, string) {
	body, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	return func(broker.Request) (int, map[string]string, string) { return http.StatusOK, nil, string(body) }
}

// tokens is a token source that counts its tokens.
type tokens struct {
	mu        sync.Mutex
	audiences []string
	err       error
}

func (s *tokens) IDToken(_ context.Context, audience string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return "", s.err
	}
	s.audiences = append(s.audiences, audience)
	return "token-" + audience + "-" + string(rune('0'+len(s.audiences))), nil
}

// newClient is a client of the fake, with the real SDK making one attempt
// per call.
func newClient(t *testing.T, answer func(broker.Request) (int, map[string]string, string)) (*broker.Client, *fakeLambda, *tokens, *[][2]string) {
	t.Helper()
	fake := &fakeLambda{t: t, answer: answer}
	server := httptest.NewServer(fake)
	t.Cleanup(server.Close)
	lc := lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(server.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), RetryMaxAttempts: 1})
	src := &tokens{}
	var warned [][2]string
	c := &broker.Client{Lambda: lc, Function: function, Token: src, Warn: func(summary, detail string) {
		warned = append(warned, [2]string{summary, detail})
	}}
	return c, fake, src, &warned
}

func TestCreate(t *testing.T) {
	result := &claim.Result{Label: "run-1-abcdefgh", Reused: 1, Instances: []claim.Instance{{ID: "i-1", InstanceType: "c7i.large", Source: "reused"}}}
	c, fake, src, warned := newClient(t, answers(t, broker.Response{Result: result, Warnings: [][2]string{{"Metrics not published", "no log group"}}}))
	req := claim.Request{Pool: "ci", RunID: "run-1", InstanceCount: 1, ResourceClass: "large", Claimant: "build"}
	got, err := c.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Label != result.Label || len(got.Instances) != 1 || got.Instances[0].ID != "i-1" || got.Reused != 1 {
		t.Errorf("result %+v, want %+v", got, result)
	}
	sent := fake.requests[0]
	if sent.Operation != broker.OpClaim || sent.Pool != "ci" || sent.RunID != "run-1" || sent.IDToken != "token-ec2runners-1" ||
		sent.Claim == nil || sent.Claim.InstanceCount != 1 || sent.Claim.ResourceClass != "large" || sent.Claim.Claimant != "build" {
		t.Errorf("the broker was asked %+v (claim %+v)", sent, sent.Claim)
	}
	if len(src.audiences) != 1 || src.audiences[0] != broker.DefaultAudience {
		t.Errorf("tokens fetched for %q, want one for %q", src.audiences, broker.DefaultAudience)
	}
	if !strings.Contains(fake.paths[0], "/functions/"+function+"/invocations") {
		t.Errorf("invoked %s, want function %s", fake.paths[0], function)
	}
	if len(*warned) != 1 || (*warned)[0][0] != "Metrics not published" {
		t.Errorf("warnings %q, want the broker's", *warned)
	}
}

// TestFreshTokenPerCall: every call fetches a token for the configured
// audience, and sends it.
func TestFreshTokenPerCall(t *testing.T) {
	c, fake, src, _ := newClient(t, answers(t, broker.Response{Outcomes: []string{"i-1: returned to the pool"}}))
	c.Audience = "sts.example"
	for range 2 {
		if _, err := c.Release(context.Background(), "ci", "run-1"); err != nil {
			t.Fatal(err)
		}
	}
	if len(src.audiences) != 2 || src.audiences[0] != "sts.example" || src.audiences[1] != "sts.example" {
		t.Errorf("tokens fetched for %q, want two for sts.example", src.audiences)
	}
	if fake.requests[0].IDToken == fake.requests[1].IDToken {
		t.Errorf("both calls sent token %q", fake.requests[0].IDToken)
	}
}

func TestRead(t *testing.T) {
	rec := claim.Record{Request: claim.Request{Pool: "ci", RunID: "run-1", Label: "run-1-abcdefgh"}, Instances: []claim.Instance{{ID: "i-1"}, {ID: "i-2"}}}
	c, fake, _, _ := newClient(t, answers(t, broker.Response{Record: &rec, Live: []claim.Instance{{ID: "i-2"}}}))
	got, live, ok, err := c.Read(context.Background(), "ci", "run-1")
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	if got.Request.Label != rec.Request.Label || len(got.Instances) != 2 || len(live) != 1 || live[0].ID != "i-2" {
		t.Errorf("record %+v, live %+v", got, live)
	}
	if op := fake.requests[0].Operation; op != broker.OpRead {
		t.Errorf("operation %q, want %q", op, broker.OpRead)
	}

	c, _, _, _ = newClient(t, answers(t, broker.Response{}))
	if _, _, ok, err := c.Read(context.Background(), "ci", "run-1"); ok || err != nil {
		t.Errorf("a claim the broker does not find: ok %v, err %v; want gone, no error", ok, err)
	}
}

// TestReadDenied: a claim the broker refuses to read is an error, never a
// claim gone (Terraform would drop it from state).
func TestReadDenied(t *testing.T) {
	c, _, _, _ := newClient(t, answers(t, broker.Response{Error: &broker.Error{Kind: broker.ErrorDenied, Message: "repository octo/b may not read claims of pool ci"}}))
	_, _, ok, err := c.Read(context.Background(), "ci", "run-1")
	var failure *broker.Failure
	if ok || !errors.As(err, &failure) || failure.Kind != broker.ErrorDenied {
		t.Fatalf("ok %v, err %v; want a denied failure", ok, err)
	}
}

// TestFailureKinds: each error kind of the broker is a *broker.Failure
// carrying it and the broker's message; other_claimant is also
// claim.ErrOtherClaimant.
func TestFailureKinds(t *testing.T) {
	for _, kind := range []string{broker.ErrorDenied, broker.ErrorOverCap, broker.ErrorOtherClaimant, broker.ErrorInvalid, broker.ErrorFailed} {
		t.Run(kind, func(t *testing.T) {
			message := "the broker says " + kind
			c, _, _, _ := newClient(t, answers(t, broker.Response{Error: &broker.Error{Kind: kind, Message: message}}))
			_, err := c.Create(context.Background(), claim.Request{Pool: "ci", RunID: "run-1"})
			var failure *broker.Failure
			if !errors.As(err, &failure) || failure.Kind != kind || failure.Message != message || failure.Operation != broker.OpClaim {
				t.Fatalf("got %#v, want a failure of kind %s", err, kind)
			}
			if !strings.Contains(err.Error(), message) || !strings.Contains(err.Error(), function) {
				t.Errorf("error %q does not give the broker's message and name the function", err)
			}
			if other := errors.Is(err, claim.ErrOtherClaimant); other != (kind == broker.ErrorOtherClaimant) {
				t.Errorf("errors.Is(claim.ErrOtherClaimant) = %v", other)
			}
		})
	}
}

// TestFunctionError: the function's own failure (Lambda's
// X-Amz-Function-Error) surfaces its message, and a timeout says which
// timeout to look at.
func TestFunctionError(t *testing.T) {
	for name, tc := range map[string]struct{ payload, want string }{
		"error":   {`{"errorMessage":"reading pool ci: AccessDeniedException","errorType":"OperationError"}`, "broker function ci-broker failed: OperationError: reading pool ci: AccessDeniedException"},
		"timeout": {`{"errorType":"Sandbox.Timedout","errorMessage":"RequestId: 1 Error: Task timed out after 900.00 seconds"}`, "the function's timeout ended it"},
		"garbage": {`not json`, "unknown: not json"},
	} {
		t.Run(name, func(t *testing.T) {
			c, _, _, _ := newClient(t, func(broker.Request) (int, map[string]string, string) {
				return http.StatusOK, map[string]string{"X-Amz-Function-Error": "Unhandled"}, tc.payload
			})
			_, err := c.Release(context.Background(), "ci", "run-1")
			var fe *broker.FunctionError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a function error with %q", err, tc.want)
			}
		})
	}
}

// TestLambdaErrors: Lambda's refusals to invoke name the function and
// what to check.
func TestLambdaErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		status       int
		code, body   string
		want         string
		wrappedToken string
	}{
		"not found": {404, "ResourceNotFoundException", `{"Type":"User","message":"Function not found: arn:aws:lambda:us-east-1:123456789012:function:ci-broker"}`,
			"broker function ci-broker not found: check the function's name or ARN", "Function not found"},
		"access denied": {403, "AccessDeniedException", `{"Message":"User: arn:aws:sts::123456789012:assumed-role/ci/x is not authorized to perform: lambda:InvokeFunction"}`,
			"needs lambda:InvokeFunction on the function's ARN", "is not authorized"},
		"throttled": {429, "TooManyRequestsException", `{"Type":"User","message":"Rate Exceeded.","Reason":"ReservedFunctionConcurrentInvocationLimitExceeded"}`,
			"invocations of broker ci-broker throttled by Lambda (ReservedFunctionConcurrentInvocationLimitExceeded)", "Rate Exceeded"},
		"pending": {409, "ResourceConflictException", `{"Type":"User","message":"The operation cannot be performed at this time. The function is currently in the following state: Pending"}`,
			"cannot be invoked now", "Pending"},
	} {
		t.Run(name, func(t *testing.T) {
			c, _, _, _ := newClient(t, func(broker.Request) (int, map[string]string, string) {
				return tc.status, map[string]string{"X-Amzn-Errortype": tc.code, "Content-Type": "application/json"}, tc.body
			})
			_, _, _, err := c.Read(context.Background(), "ci", "run-1")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.wrappedToken) {
				t.Fatalf("got %v, want %q and Lambda's own message", err, tc.want)
			}
		})
	}
}

// TestTokenError: without a token, nothing is invoked.
func TestTokenError(t *testing.T) {
	c, fake, src, _ := newClient(t, answers(t, broker.Response{}))
	src.err = errors.New("not a GitHub Actions job")
	_, err := c.Release(context.Background(), "ci", "run-1")
	if err == nil || !strings.Contains(err.Error(), "not a GitHub Actions job") || !strings.Contains(err.Error(), function) {
		t.Fatalf("got %v", err)
	}
	if len(fake.requests) != 0 {
		t.Errorf("invoked without a token: %+v", fake.requests)
	}
}

// TestMalformedAnswer: a function that is not a broker is told apart.
func TestMalformedAnswer(t *testing.T) {
	c, _, _, _ := newClient(t, func(broker.Request) (int, map[string]string, string) { return http.StatusOK, nil, `"hello"` })
	_, _, _, err := c.Read(context.Background(), "ci", "run-1")
	if err == nil || !strings.Contains(err.Error(), "no broker response") {
		t.Fatalf("got %v", err)
	}
	c, _, _, _ = newClient(t, func(broker.Request) (int, map[string]string, string) { return http.StatusOK, nil, "null" })
	if _, _, ok, err := c.Read(context.Background(), "ci", "run-1"); ok || err == nil || !strings.Contains(err.Error(), "an empty answer") {
		t.Fatalf("a null answer to a read: ok %v, err %v; want an error, not a claim gone", ok, err)
	}
	c, _, _, _ = newClient(t, answers(t, broker.Response{}))
	if _, err := c.Create(context.Background(), claim.Request{Pool: "ci", RunID: "run-1"}); err == nil || !strings.Contains(err.Error(), "no result") {
		t.Fatalf("a claim answered without a result: got %v", err)
	}
}

// TestCreateTimeoutOverInvocation: a claim that may wait longer than one
// Lambda invocation runs is told so; one within it is not.
func TestCreateTimeoutOverInvocation(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		warned  bool
	}{{20 * time.Minute, true}, {broker.MaxInvocationTime, false}, {0, false}} {
		c, _, _, warned := newClient(t, answers(t, broker.Response{Result: &claim.Result{Label: "run-1-abcdefgh"}}))
		ctx := context.Background()
		if tc.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, tc.timeout)
			defer cancel()
		}
		if _, err := c.Create(ctx, claim.Request{Pool: "ci", RunID: "run-1"}); err != nil {
			t.Fatal(err)
		}
		got := len(*warned) == 1 && strings.Contains((*warned)[0][1], "runs at most 15m (less")
		if got != tc.warned {
			t.Errorf("timeout %s: warnings %q, want warned: %v", tc.timeout, *warned, tc.warned)
		}
	}
}

func TestValidateFunction(t *testing.T) {
	for _, good := range []string{
		"ci-broker", "ci_broker_2", strings.Repeat("f", 64), "ci-broker:$LATEST", "ci-broker:live", "ci-broker:7",
		"arn:aws:lambda:eu-west-1:123456789012:function:ci-broker", "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:ci-broker:prod",
		"arn:aws-cn:lambda:cn-north-1:123456789012:function:ci-broker", "123456789012:function:ci-broker",
	} {
		if err := broker.ValidateFunction(good); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
	for _, bad := range []string{
		"", "ci broker", "ci.broker", strings.Repeat("f", 65), "ci-broker:", "ci-broker:a:b", "ci-broker:live.1",
		"arn:aws:lambda:eu-west-1:123456789012:ci-broker", "arn:aws:lambda:eu-west-1:12345:function:ci-broker", "arn:aws:s3:::bucket",
		"arn:aws:lambda:eu-west-1:123456789012:function:", "ci-broker:" + strings.Repeat("a", 129),
		"arn:aws:lambda:eu-west-1:123456789012:function:" + strings.Repeat("f", 64) + ":" + strings.Repeat("a", 70),
	} {
		if err := broker.ValidateFunction(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
