package lambdaworld_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/lambdaworld"
)

// bootstrap is testdata/fn, built once for every test.
var bootstrap string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lambdaworld-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bootstrap = filepath.Join(dir, "bootstrap")
	if out, err := exec.Command("go", "build", "-o", bootstrap, "./testdata/fn").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build of testdata/fn: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// start serves fns, the test's function output in its log.
func start(t *testing.T, fns ...lambdaworld.Function) (*lambdaworld.World, *lambda.Client) {
	t.Helper()
	for i := range fns {
		fns[i].Executable = bootstrap
		fns[i].Output = testLog{t}
	}
	w, err := lambdaworld.Start(fns...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	// One attempt: the tests see Lambda's answers, not the SDK's retries.
	client := lambda.New(lambda.Options{Region: lambdaworld.Region, BaseEndpoint: aws.String(w.Endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), RetryMaxAttempts: 1})
	return w, client
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type echo struct {
	Event           map[string]string `json:"event"`
	RequestID       string            `json:"requestId"`
	InvokedARN      string            `json:"invokedArn"`
	DeadlineInMs    int64             `json:"deadlineInMs"`
	FunctionName    string            `json:"functionName"`
	Handler         string            `json:"handler"`
	Greeting        string            `json:"greeting"`
	ProcessID       int               `json:"pid"`
	FunctionVersion string            `json:"functionVersion"`
}

// invoke invokes function with event, synchronously.
func invoke(t *testing.T, c *lambda.Client, function string, event any) (*lambda.InvokeOutput, error) {
	t.Helper()
	payload, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	return c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String(function), Payload: payload})
}

// echoed invokes function with an echo and returns what it saw.
func echoed(t *testing.T, c *lambda.Client, function string) echo {
	t.Helper()
	out, err := invoke(t, c, function, map[string]string{"do": "echo", "message": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if out.FunctionError != nil {
		t.Fatalf("function error %s: %s", *out.FunctionError, out.Payload)
	}
	var e echo
	if err := json.Unmarshal(out.Payload, &e); err != nil {
		t.Fatalf("%v: %s", err, out.Payload)
	}
	return e
}

// functionError invokes function with event and returns the function
// error Lambda reports.
func functionError(t *testing.T, c *lambda.Client, function string, event any) (errorType, message string) {
	t.Helper()
	out, err := invoke(t, c, function, event)
	if err != nil {
		t.Fatal(err)
	}
	if out.FunctionError == nil || *out.FunctionError != "Unhandled" {
		t.Fatalf("X-Amz-Function-Error is %v, want Unhandled; payload %s", out.FunctionError, out.Payload)
	}
	var reported struct {
		Type    string `json:"errorType"`
		Message string `json:"errorMessage"`
	}
	if err := json.Unmarshal(out.Payload, &reported); err != nil {
		t.Fatalf("error payload %s: %v", out.Payload, err)
	}
	return reported.Type, reported.Message
}

// TestEcho: the function runs as Lambda runs it (its environment, its
// context), and the caller gets its answer; the environment serves the
// next invocation too.
func TestEcho(t *testing.T) {
	_, c := start(t, lambdaworld.Function{Name: "echo", Timeout: 30 * time.Second, Env: map[string]string{"GREETING": "hi"}})
	out, err := invoke(t, c, "echo", map[string]string{"do": "echo", "message": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if out.StatusCode != 200 || aws.ToString(out.ExecutedVersion) != "$LATEST" || out.FunctionError != nil {
		t.Errorf("status %d, executed version %q, function error %v", out.StatusCode, aws.ToString(out.ExecutedVersion), out.FunctionError)
	}
	var first echo
	if err := json.Unmarshal(out.Payload, &first); err != nil {
		t.Fatal(err)
	}
	if first.Event["message"] != "hello" || first.FunctionName != "echo" || first.Handler != "bootstrap" || first.Greeting != "hi" ||
		first.InvokedARN != lambdaworld.ARN("echo") || first.FunctionVersion != "$LATEST" || first.RequestID == "" {
		t.Errorf("the function saw %+v", first)
	}
	if first.DeadlineInMs <= 25_000 || first.DeadlineInMs > 30_000 {
		t.Errorf("deadline in %d ms, want the function's 30 s timeout", first.DeadlineInMs)
	}
	second := echoed(t, c, "echo")
	if second.ProcessID != first.ProcessID || second.RequestID == first.RequestID {
		t.Errorf("second invocation: process %d, request %s; want the first's process %d, a new request id", second.ProcessID, second.RequestID, first.ProcessID)
	}
}

// TestFunctionNames: a function is invoked by name, ARN, partial ARN or
// $LATEST; anything else is Lambda's ResourceNotFoundException.
func TestFunctionNames(t *testing.T) {
	_, c := start(t, lambdaworld.Function{Name: "named", Timeout: 30 * time.Second})
	for _, ref := range []string{"named", lambdaworld.ARN("named"), lambdaworld.Account + ":function:named", "named:$LATEST", lambdaworld.ARN("named") + ":$LATEST"} {
		if e := echoed(t, c, ref); e.FunctionName != "named" {
			t.Errorf("%s: ran %q", ref, e.FunctionName)
		}
	}
	for _, ref := range []string{"unknown", "named:prod", "arn:aws:lambda:us-east-1:999999999999:function:named", "arn:aws:lambda:eu-west-1:" + lambdaworld.Account + ":function:named"} {
		_, err := invoke(t, c, ref, map[string]string{"do": "echo"})
		var notFound *lambdatypes.ResourceNotFoundException
		if !errors.As(err, &notFound) || !strings.Contains(notFound.ErrorMessage(), "Function not found: arn:aws:lambda:") {
			t.Errorf("%s: got %v, want ResourceNotFoundException", ref, err)
		}
	}
	_, err := invoke(t, c, "not a name", map[string]string{"do": "echo"})
	if err == nil || !strings.Contains(err.Error(), "ValidationException") {
		t.Errorf("invalid name: got %v, want ValidationException", err)
	}
}

// TestFunctionErrors: an error, a panic, an exit and a timeout reach the
// caller as Lambda reports them; an environment that panicked, exited or
// timed out is replaced, one that returned an error is not.
func TestFunctionErrors(t *testing.T) {
	_, c := start(t, lambdaworld.Function{Name: "fails", Timeout: 2 * time.Second})
	before := echoed(t, c, "fails").ProcessID
	for _, tc := range []struct {
		event            map[string]string
		errorType, match string
		replaced         bool
	}{
		{map[string]string{"do": "error", "message": "no runners"}, "errorString", "no runners", false},
		{map[string]string{"do": "panic", "message": "lost the lease"}, "string", "lost the lease", true},
		{map[string]string{"do": "exit"}, "Runtime.ExitError", "exit status 3", true},
		{map[string]string{"do": "sleep", "sleep": "10s"}, "Sandbox.Timedout", "Task timed out after 2.00 seconds", true},
		// aws-lambda-go exits when the Runtime API refuses its response.
		{map[string]string{"do": "big"}, "Function.ResponseSizeTooLarge", "exceeded maximum allowed payload size", true},
	} {
		errorType, message := functionError(t, c, "fails", tc.event)
		if errorType != tc.errorType || !strings.Contains(message, tc.match) {
			t.Errorf("%s: function error %s: %q, want %s with %q", tc.event["do"], errorType, message, tc.errorType, tc.match)
		}
		after := echoed(t, c, "fails").ProcessID
		if replaced := after != before; replaced != tc.replaced {
			t.Errorf("%s: environment replaced: %v, want %v", tc.event["do"], replaced, tc.replaced)
		}
		before = after
	}
}

// TestInitError: a runtime that posts /init/error fails the invocation
// with its error.
func TestInitError(t *testing.T) {
	_, c := start(t, lambdaworld.Function{Name: "broken", Env: map[string]string{"FAIL_INIT": "no pool configured"}})
	errorType, message := functionError(t, c, "broken", map[string]string{"do": "echo"})
	if errorType != "InitFailed" || message != "no pool configured" {
		t.Errorf("function error %s: %q", errorType, message)
	}
}

// TestConcurrency: invocations at once run in environments of their own,
// up to the function's reserved concurrency, past which Lambda throttles.
func TestConcurrency(t *testing.T) {
	_, c := start(t,
		lambdaworld.Function{Name: "wide", Timeout: 30 * time.Second},
		lambdaworld.Function{Name: "narrow", Timeout: 30 * time.Second, ReservedConcurrency: 1})
	var wg sync.WaitGroup
	pids := make([]int, 2)
	for i := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := invoke(t, c, "wide", map[string]string{"do": "sleep", "sleep": "1s"})
			if err != nil {
				t.Error(err)
				return
			}
			var e echo
			_ = json.Unmarshal(out.Payload, &e)
			pids[i] = e.ProcessID
		}()
	}
	wg.Wait()
	if pids[0] == pids[1] {
		t.Errorf("two invocations at once ran in one process, %d", pids[0])
	}

	running := make(chan error, 1)
	go func() {
		_, err := invoke(t, c, "narrow", map[string]string{"do": "sleep", "sleep": "3s"})
		running <- err
	}()
	time.Sleep(time.Second) // the first is running
	_, err := invoke(t, c, "narrow", map[string]string{"do": "echo"})
	var throttled *lambdatypes.TooManyRequestsException
	if !errors.As(err, &throttled) || throttled.Reason != lambdatypes.ThrottleReasonReservedFunctionConcurrentInvocationLimitExceeded {
		t.Errorf("second invocation at once: got %v, want TooManyRequestsException for the reserved concurrency", err)
	}
	if err := <-running; err != nil {
		t.Error(err)
	}
}

// TestRequestTooLarge: Lambda refuses a synchronous payload over 6 MB
// before any function runs.
func TestRequestTooLarge(t *testing.T) {
	_, c := start(t, lambdaworld.Function{Name: "small"})
	payload := append(append([]byte(`{"message":"`), bytes.Repeat([]byte("x"), lambdaworld.MaxPayloadBytes)...), `"}`...)
	_, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("small"), Payload: payload})
	var tooLarge *lambdatypes.RequestTooLargeException
	if !errors.As(err, &tooLarge) {
		t.Errorf("got %v, want RequestTooLargeException", err)
	}
}
