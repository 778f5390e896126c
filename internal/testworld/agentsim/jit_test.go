package agentsim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

// testBroker is the pool's broker function as the instances' Lambda
// clients reach it: it mints numbered just-in-time runners, deletes them,
// and keeps every request with the instance whose client made it.
type testBroker struct {
	function string

	mu       sync.Mutex
	minted   int
	requests []string // "<instance> <operation> <grant's run>[ <runner id>]"
}

// of is the broker as instance id's agent reaches it: through its own
// instance's Lambda client.
func (b *testBroker) of(id string) agent.LambdaBroker {
	return agent.LambdaBroker{Lambda: instanceLambda{b, id}, Function: b.function}
}

type instanceLambda struct {
	b  *testBroker
	id string
}

func (l instanceLambda) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	if name := aws.ToString(in.FunctionName); name != l.b.function {
		return nil, fmt.Errorf("ResourceNotFoundException: Function not found: %s", name)
	}
	var req protocol.JITRequest
	if err := json.Unmarshal(in.Payload, &req); err != nil {
		return nil, err
	}
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	var answer any = struct{}{}
	request := l.id + " " + req.Operation + " " + req.RunID
	switch req.Operation {
	case protocol.JITRegister:
		l.b.minted++
		_, instance, _ := protocol.SplitInstanceARN(req.InstanceARN)
		answer = map[string]protocol.JITRunner{"runner": {RunnerID: int64(l.b.minted),
			RunnerName: protocol.JITRunnerName(instance, fmt.Sprint(l.b.minted)), EncodedJITConfig: fmt.Sprint("config-", l.b.minted)}}
	case protocol.JITDeregister:
		request += fmt.Sprint(" ", req.RunnerID)
	}
	l.b.requests = append(l.b.requests, request)
	payload, err := json.Marshal(answer)
	return &lambda.InvokeOutput{StatusCode: 200, Payload: payload}, err
}

func (b *testBroker) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.requests)
}

// putGrant hands the instance a registration grant for runID, registering
// with target.
func (h *harness) putGrant(t *testing.T, id, runID, target string) {
	t.Helper()
	item := protocol.RegistrationGrant{
		InstanceARN: protocol.InstanceARN(testARNPrefix, id), Grant: protocol.NewGrantSecret(), ExpiresAt: time.Now().Add(time.Hour),
		RunID: runID, Target: target, Label: protocol.NewLabel(runID), UpdatedAt: protocol.FormatTime(time.Now()),
	}.Item()
	if _, err := ddbClient.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: h.table(), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// With the pool's broker, an agent handed a run's registration grant asks
// the broker function, through its own instance's Lambda client, for a
// registration for each job of the run: one for the first, another once
// the first job's runner exits (EndJob); at release it has the broker
// delete the last one, which no job used.
func TestJustInTimeRegistrations(t *testing.T) {
	t.Parallel()
	b := &testBroker{function: "pool-broker"}
	opts := testOpts
	opts.Broker = b.of
	h := newHarnessFor(t, opts, &protocol.GitHubTarget{Owner: "octo"})
	id := h.seed(t, agentsim.Healthy)

	h.putGrant(t, id, "run-1", "octo/app")
	h.setRun(t, id, protocol.StateClaimed, "run-1")
	h.waitSignal(t, id, "UD_REG_OK run-1")
	settle(t, "the runners started", func() []string { return h.sim.JITRunners(id) }, []string{id + "-1"})
	h.sim.EndJob(id)
	settle(t, "the runners started", func() []string { return h.sim.JITRunners(id) }, []string{id + "-1", id + "-2"})

	h.setRun(t, id, protocol.StateIdle, "")
	h.waitSignal(t, id, "UD_REMOVE_REG_REMOVE_RUN_OK run-1")
	if got, want := b.seen(), []string{id + " register run-1", id + " register run-1", id + " deregister run-1 2"}; !slices.Equal(got, want) {
		t.Errorf("the broker was asked %q, want %q", got, want)
	}
}
