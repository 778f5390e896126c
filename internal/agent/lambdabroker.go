package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Lambda is the part of Lambda the agent uses: invoking the pool's broker.
type Lambda interface {
	Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// LambdaBroker is the pool's broker as an instance reaches it: its Lambda
// function, invoked with the instance role's credentials
// (lambda:InvokeFunction on the broker). The binary uses it, and so do the
// simulated agents of the tests, so that both invoke the broker alike.
type LambdaBroker struct {
	Lambda   Lambda
	Function string // name or ARN (Config.BrokerFunction)
}

var _ Broker = LambdaBroker{}

// Register asks the broker for the next job's just-in-time runner.
func (b LambdaBroker) Register(ctx context.Context, g protocol.RegistrationGrant) (protocol.JITRunner, error) {
	runner, err := b.invoke(ctx, protocol.JITRequest{Operation: protocol.JITRegister, InstanceARN: g.InstanceARN, RunID: g.RunID, Grant: g.Grant})
	switch {
	case err != nil:
		return protocol.JITRunner{}, err
	case runner == nil || runner.RunnerID <= 0 || runner.EncodedJITConfig == "":
		return protocol.JITRunner{}, fmt.Errorf("the pool's broker %s answered no just-in-time runner", b.Function)
	}
	return *runner, nil
}

// Deregister asks the broker to delete the run's runner runnerID.
func (b LambdaBroker) Deregister(ctx context.Context, g protocol.RegistrationGrant, runnerID int64) error {
	_, err := b.invoke(ctx, protocol.JITRequest{Operation: protocol.JITDeregister, InstanceARN: g.InstanceARN, RunID: g.RunID, Grant: g.Grant, RunnerID: runnerID})
	return err
}

// invoke invokes the broker with req and returns the runner it answers
// with, if any, or why it refused. The answer of a register holds the
// runner's credentials: no error quotes it.
func (b LambdaBroker) invoke(ctx context.Context, req protocol.JITRequest) (*protocol.JITRunner, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	out, err := b.Lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(b.Function), Payload: payload})
	if err != nil {
		return nil, fmt.Errorf("invoking the pool's broker %s: %w", b.Function, err)
	}
	if out.FunctionError != nil {
		var failure struct {
			Message string `json:"errorMessage"`
		}
		_ = json.Unmarshal(out.Payload, &failure)
		return nil, fmt.Errorf("the pool's broker %s failed (%s): %s", b.Function, aws.ToString(out.FunctionError), failure.Message)
	}
	var answer struct {
		Runner *protocol.JITRunner `json:"runner"`
		Error  *struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out.Payload, &answer); err != nil {
		return nil, errors.New("the pool's broker " + b.Function + " answered something else than a broker's answer")
	}
	if answer.Error != nil {
		return nil, fmt.Errorf("the pool's broker %s refused to %s (%s): %s", b.Function, req.Operation, answer.Error.Kind, answer.Error.Message)
	}
	return answer.Runner, nil
}
