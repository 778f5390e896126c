package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Lambda's limits on one synchronous invocation
// (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
const (
	// MaxInvocationTime is the longest a function may run: its timeout is
	// at most 15 minutes, and a claim runs in one invocation.
	MaxInvocationTime = 15 * time.Minute
	// MaxPayloadBytes bounds a synchronous invocation's request and its
	// response (6 MB).
	MaxPayloadBytes = 6 << 20
)

// Invoker is the Lambda call the client makes (lambda.Client's).
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// TokenSource gives the calling job's GitHub Actions OIDC token, issued
// for an audience (ActionsToken).
type TokenSource interface {
	IDToken(ctx context.Context, audience string) (string, error)
}

// Client makes claims through a pool's broker, with claim.Claimer's
// methods: each call fetches a fresh OIDC token for the broker's audience
// and invokes the broker function once, synchronously.
type Client struct {
	Lambda   Invoker
	Function string // the broker function's name or ARN
	Audience string // "": DefaultAudience
	Token    TokenSource
	// Warn reports what the broker says went wrong without failing the
	// operation, and what the caller should know about the call itself;
	// nil: nothing is reported.
	Warn func(summary, detail string)
}

// Create claims runners through the broker (claim.Claimer.Create). The
// broker takes the claim's repository and workflow run from the token.
func (c *Client) Create(ctx context.Context, req claim.Request) (*claim.Result, error) {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) > MaxInvocationTime {
		most := protocol.FormatDuration(MaxInvocationTime)
		c.warn("Claim timeout longer than a broker invocation",
			fmt.Sprintf("Claim %s/%s may wait %s, but the broker %s makes it in one Lambda invocation, which runs at most %s (less when the function's own timeout is shorter): the claim fails when the invocation ends. Set the claim's create timeout to %s or less.",
				req.Pool, req.RunID, protocol.FormatDuration(time.Until(deadline).Round(time.Minute)), c.Function, most, most))
	}
	resp, err := c.invoke(ctx, Request{Operation: OpClaim, Pool: req.Pool, RunID: req.RunID, Claim: &req})
	if err != nil {
		return nil, err
	}
	if resp.Result == nil {
		return nil, c.malformed(OpClaim, "no result")
	}
	return resp.Result, nil
}

// Read returns a claim's record and the instances it still holds
// (claim.Claimer.Read); ok is false when the broker says the claim does
// not exist. A refusal is an error, never a claim gone.
func (c *Client) Read(ctx context.Context, pool, runID string) (rec claim.Record, live []claim.Instance, ok bool, err error) {
	resp, err := c.invoke(ctx, Request{Operation: OpRead, Pool: pool, RunID: runID})
	if err != nil || resp.Record == nil {
		return claim.Record{}, nil, false, err
	}
	return *resp.Record, resp.Live, true, nil
}

// Release gives a claim's runners back (claim.Claimer.Release) and
// returns what happened to each.
func (c *Client) Release(ctx context.Context, pool, runID string) ([]string, error) {
	resp, err := c.invoke(ctx, Request{Operation: OpRelease, Pool: pool, RunID: runID})
	if err != nil {
		return nil, err
	}
	return resp.Outcomes, nil
}

func (c *Client) audience() string {
	if c.Audience != "" {
		return c.Audience
	}
	return DefaultAudience
}

func (c *Client) warn(summary, detail string) {
	if c.Warn != nil {
		c.Warn(summary, detail)
	}
}

// invoke makes one operation's invocation: the broker's warnings are
// reported, its error returned as a *Failure.
func (c *Client) invoke(ctx context.Context, req Request) (*Response, error) {
	token, err := c.Token.IDToken(ctx, c.audience())
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", c.Function, err)
	}
	req.IDToken = token
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	out, err := c.Lambda.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(c.Function),
		InvocationType: lambdatypes.InvocationTypeRequestResponse,
		Payload:        payload,
	})
	if err != nil {
		return nil, c.invokeError(req.Operation, err)
	}
	if out.FunctionError != nil {
		return nil, c.functionError(out.Payload)
	}
	// A broker always answers an object; null (a handler that returned
	// nothing) would read as a claim gone.
	if p := bytes.TrimSpace(out.Payload); len(p) == 0 || bytes.Equal(p, []byte("null")) {
		return nil, c.malformed(req.Operation, "an empty answer")
	}
	var resp Response
	if err := json.Unmarshal(out.Payload, &resp); err != nil {
		return nil, c.malformed(req.Operation, err.Error())
	}
	for _, w := range resp.Warnings {
		c.warn(w[0], w[1])
	}
	if resp.Error != nil {
		return nil, &Failure{Function: c.Function, Operation: req.Operation, Kind: resp.Error.Kind, Message: resp.Error.Message}
	}
	return &resp, nil
}

// Failure is the broker's answer that it did not do what it was asked:
// refused (ErrorDenied, ErrorOverCap, ErrorOtherClaimant, ErrorInvalid)
// or ran and failed (ErrorFailed). A failure of kind ErrorOtherClaimant is
// claim.ErrOtherClaimant (errors.Is), as the pool logic's own.
type Failure struct {
	Function  string // the broker function
	Operation string // OpClaim, OpRead or OpRelease
	Kind      string
	Message   string // the broker's
}

func (f *Failure) Error() string {
	return fmt.Sprintf("%s (broker %s, %s: %s)", f.Message, f.Function, f.Operation, f.Kind)
}

func (f *Failure) Unwrap() error {
	if f.Kind == ErrorOtherClaimant {
		return claim.ErrOtherClaimant
	}
	return nil
}

// FunctionError is the broker function's failure as Lambda reports it
// (X-Amz-Function-Error): the function returned an error, panicked,
// crashed or timed out, before it could answer.
type FunctionError struct {
	Function string
	Type     string // errorType: the Go error's type, or Lambda's ("Sandbox.Timedout", "Runtime.ExitError")
	Message  string // errorMessage
}

func (e *FunctionError) Error() string {
	hint := "see the function's log (CloudWatch Logs, log group /aws/lambda/" + functionNameOf(e.Function) + ")"
	if e.Type == "Sandbox.Timedout" || strings.Contains(e.Message, "Task timed out") {
		hint = fmt.Sprintf("the function's timeout ended it: the pool stack sets the broker's timeout, at most %s; %s", protocol.FormatDuration(MaxInvocationTime), hint)
	}
	return fmt.Sprintf("broker function %s failed: %s: %s; %s", e.Function, e.Type, e.Message, hint)
}

func (c *Client) functionError(payload []byte) error {
	fe := &FunctionError{Function: c.Function}
	var reported struct {
		Message string `json:"errorMessage"`
		Type    string `json:"errorType"`
	}
	if err := json.Unmarshal(payload, &reported); err != nil || reported.Message == "" {
		fe.Type, fe.Message = "unknown", excerpt(payload)
	} else {
		fe.Type, fe.Message = reported.Type, reported.Message
	}
	return fe
}

// malformed: the function answered something that is not a broker's
// answer, such as another function's.
func (c *Client) malformed(operation, problem string) error {
	return fmt.Errorf("function %s answered %s with no broker response (%s): check that it is the pool's broker (ec2runners-broker) of this provider's release", c.Function, operation, problem)
}

// invokeError says what Lambda's refusal to invoke the broker means, and
// what to check.
func (c *Client) invokeError(operation string, err error) error {
	var (
		notFound  *lambdatypes.ResourceNotFoundException
		throttled *lambdatypes.TooManyRequestsException
		conflict  *lambdatypes.ResourceConflictException
		notReady  *lambdatypes.ResourceNotReadyException
		tooLarge  *lambdatypes.RequestTooLargeException
		apiErr    smithy.APIError
	)
	switch {
	case errors.As(err, &notFound):
		return fmt.Errorf("broker function %s not found: check the function's name or ARN, the region Lambda is called in, and that the pool stack deployed the broker: %w", c.Function, err)
	case errors.As(err, &throttled):
		return fmt.Errorf("invocations of broker %s throttled by Lambda (%s), past the SDK's retries: more run at once than its reserved concurrency or the account's allow; retry later, or raise the function's reserved concurrency: %w", c.Function, throttled.Reason, err)
	case errors.As(err, &conflict), errors.As(err, &notReady):
		return fmt.Errorf("broker function %s cannot be invoked now (it is being created, updated, or is inactive): retry once the pool stack's deployment settles: %w", c.Function, err)
	case errors.As(err, &tooLarge):
		return fmt.Errorf("the %s request to broker %s exceeds Lambda's %d MB payload of a synchronous invocation: %w", operation, c.Function, MaxPayloadBytes>>20, err)
	case errors.As(err, &apiErr) && strings.Contains(apiErr.ErrorCode(), "AccessDenied"):
		return fmt.Errorf("not allowed to invoke broker function %s: the role the workflow assumes needs lambda:InvokeFunction on the function's ARN (and nothing else): %w", c.Function, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("broker %s did not answer %s within the operation's timeout: %w", c.Function, operation, err)
	}
	return fmt.Errorf("invoking broker function %s (%s): %w", c.Function, operation, err)
}

// Lambda's forms of a function to invoke: its name, its ARN or its partial
// ARN, each optionally qualified by a version or an alias
// (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html).
var functionPattern = regexp.MustCompile(`^(?:arn:aws[a-zA-Z-]*:lambda:[a-z]{2}(?:-[a-z]+)+-\d+:\d{12}:function:|\d{12}:function:)?([A-Za-z0-9_-]{1,64})(?::(?:\$LATEST|[A-Za-z0-9_-]{1,128}))?$`)

// maxFunctionLength is Lambda's bound on the whole reference.
const maxFunctionLength = 170

// FunctionRule says what ValidateFunction accepts.
const FunctionRule = "a Lambda function's name (1-64 letters, digits, '-' and '_'), " +
	"ARN (arn:aws:lambda:<region>:<account>:function:<name>) or partial ARN (<account>:function:<name>), " +
	"optionally followed by :<version or alias>, at most 170 characters"

// ValidateFunction checks a broker function as Lambda's Invoke takes it.
func ValidateFunction(s string) error {
	if len(s) > maxFunctionLength || !functionPattern.MatchString(s) {
		return fmt.Errorf("%q is not %s", s, FunctionRule)
	}
	return nil
}

// AudienceRule says what ValidateAudience accepts.
const AudienceRule = "printable ASCII characters without spaces, such as " + DefaultAudience

var audiencePattern = regexp.MustCompile(`^[!-~]+$`)

// ValidateAudience checks an audience to request the job's OIDC token for:
// it travels in the token request's URL and the token's aud claim.
func ValidateAudience(s string) error {
	if !audiencePattern.MatchString(s) {
		return fmt.Errorf("%q is not %s", s, AudienceRule)
	}
	return nil
}

// functionNameOf is the name in a function's name or ARN.
func functionNameOf(function string) string {
	if m := functionPattern.FindStringSubmatch(function); m != nil {
		return m[1]
	}
	return function
}
