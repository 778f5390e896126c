package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// fakeLambda answers every invocation with answer (a failed function when
// functionError is set) and keeps what it was asked.
type fakeLambda struct {
	answer        string
	functionError string
	err           error

	function string
	request  protocol.JITRequest
}

func (l *fakeLambda) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	l.function = aws.ToString(in.FunctionName)
	if err := json.Unmarshal(in.Payload, &l.request); err != nil {
		return nil, err
	}
	if l.err != nil {
		return nil, l.err
	}
	out := &lambda.InvokeOutput{StatusCode: 200, Payload: []byte(l.answer)}
	if l.functionError != "" {
		out.FunctionError = aws.String(l.functionError)
	}
	return out, nil
}

var testGrant = protocol.RegistrationGrant{InstanceARN: "arn:aws:ec2:us-east-1:123456789012:instance/i-0aaa", Grant: "grant-secret", RunID: "run-1"}

// The agent presents its grant to the function it was configured with, and
// takes the runner the broker answers.
func TestLambdaBrokerRegisters(t *testing.T) {
	l := &fakeLambda{answer: `{"runner":{"runnerId":7,"runnerName":"i-0aaa-x1","encodedJitConfig":"config"}}`}
	runner, err := agent.LambdaBroker{Lambda: l, Function: "pool1-broker"}.Register(t.Context(), testGrant)
	if err != nil || runner != (protocol.JITRunner{RunnerID: 7, RunnerName: "i-0aaa-x1", EncodedJITConfig: "config"}) {
		t.Fatalf("Register = %+v, %v", runner, err)
	}
	want := protocol.JITRequest{Operation: protocol.JITRegister, InstanceARN: testGrant.InstanceARN, RunID: "run-1", Grant: "grant-secret"}
	if l.function != "pool1-broker" || l.request != want {
		t.Errorf("invoked %s with %+v, want pool1-broker with %+v", l.function, l.request, want)
	}
}

// Deregistering names the runner to delete, with the grant.
func TestLambdaBrokerDeregisters(t *testing.T) {
	l := &fakeLambda{answer: `{}`}
	if err := (agent.LambdaBroker{Lambda: l, Function: "pool1-broker"}).Deregister(t.Context(), testGrant, 7); err != nil {
		t.Fatal(err)
	}
	if l.request.Operation != protocol.JITDeregister || l.request.RunnerID != 7 || l.request.Grant != "grant-secret" {
		t.Errorf("asked %+v, want the deregistration of runner 7 with the grant", l.request)
	}
}

// Whatever keeps the broker from minting is an error naming the function
// and why; none quotes an answer's runner credentials.
func TestLambdaBrokerFailures(t *testing.T) {
	cases := []struct {
		name string
		l    *fakeLambda
		want string
	}{
		{"refused", &fakeLambda{answer: `{"error":{"kind":"denied","message":"the grant presented is not instance i-0aaa's"}}`},
			"the pool's broker pool1-broker refused to register (denied): the grant presented is not instance i-0aaa's"},
		{"failed", &fakeLambda{answer: `{"errorMessage":"out of memory"}`, functionError: "Unhandled"},
			"the pool's broker pool1-broker failed (Unhandled): out of memory"},
		{"not invoked", &fakeLambda{err: errors.New("AccessDeniedException")}, "invoking the pool's broker pool1-broker: AccessDeniedException"},
		{"no runner", &fakeLambda{answer: `{"runner":{"runnerId":7,"runnerName":"i-0aaa-x1"}}`}, "the pool's broker pool1-broker answered no just-in-time runner"},
		{"not a broker", &fakeLambda{answer: `"secret"`}, "answered something else than a broker's answer"},
	}
	for _, tc := range cases {
		_, err := agent.LambdaBroker{Lambda: tc.l, Function: "pool1-broker"}.Register(t.Context(), testGrant)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}
