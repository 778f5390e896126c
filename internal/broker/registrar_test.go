package broker

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

const (
	testPool   = "ci-runners"
	arnPrefix  = "arn:aws:ec2:eu-west-1:123456789012:instance/"
	instance   = "i-0123456789abcdef0"
	neighbour  = "i-0fedcba9876543210"
	testRun    = "run-1"
	repository = "octo/app"
)

// registrarWorld is the pool's table, in memory, with an instance claimed
// for testRun through the broker (its record, the claim's record and its
// grant), the stub GitHub, and the registrar serving them.
type registrarWorld struct {
	table  *awsfake.Table
	gh     *scripttest.GitHub
	now    time.Time
	label  string
	grants map[string]string // each instance's secret
	r      *Registrar
}

func newRegistrarWorld(t testing.TB) *registrarWorld {
	gh := scripttest.NewGitHub(t)
	client, err := github.New(github.Config{BaseURL: gh.URL, Token: gh.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	w := &registrarWorld{table: awsfake.NewTable(testPool), gh: gh, now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC),
		label: protocol.NewLabel(testRun), grants: map[string]string{}}
	w.r = &Registrar{DynamoDB: w.table, Pool: testPool, GitHub: func(context.Context) (claim.JITRunners, error) { return client, nil }, Now: func() time.Time { return w.now }}
	for _, id := range []string{instance, neighbour} {
		w.record(id, protocol.StateClaimed, testRun)
		w.grant(id, testRun, repository, w.label, w.now.Add(time.Hour))
	}
	w.claimRecord(testRun, repository, w.label, instance, neighbour)
	return w
}

func (w *registrarWorld) record(id, state, runID string) {
	w.table.Put(protocol.Instance{ID: id, State: state, RunID: runID, Threshold: protocol.FormatTime(w.now.Add(5 * time.Minute)),
		ResourceClass: "large", InstanceType: "m7i.large", UsageClass: protocol.UsageOnDemand, UpdatedAt: protocol.FormatTime(w.now)}.Item())
}

// grant writes instance id's grant, as a claim through the broker does, or
// as the instance itself could (its role may write its own partition).
func (w *registrarWorld) grant(id, runID, target, label string, expires time.Time) {
	w.grants[id] = protocol.NewGrantSecret()
	w.table.Put(protocol.RegistrationGrant{InstanceARN: arnPrefix + id, Grant: w.grants[id], ExpiresAt: expires, RunID: runID,
		Target: target, Label: label, UpdatedAt: protocol.FormatTime(w.now)}.Item())
}

// claimRecord writes run runID's claim record, as docs/guides/protocol.md
// ("Claim record") lays it out.
func (w *registrarWorld) claimRecord(runID, repository, label string, ids ...string) {
	doc, _ := json.Marshal(map[string]any{"label": label, "instanceCount": len(ids), "resourceClass": "large", "usageClass": protocol.UsageOnDemand,
		"repository": repository, "workflowRunId": 7, "workflowRunAttempt": 1, "state": "pending", "nonce": "n1"})
	item := protocol.BaseItem(protocol.TypeClaim, runID, protocol.FormatTime(w.now))
	item[protocol.AttrValue] = &types.AttributeValueMemberS{Value: string(doc)}
	item[protocol.AttrState] = &types.AttributeValueMemberS{Value: "pending"}
	item["instanceIds"] = &types.AttributeValueMemberSS{Value: ids}
	w.table.Put(item)
}

// ask is instance id's request op, with its own grant.
func (w *registrarWorld) ask(op, id string) AgentRequest {
	return AgentRequest{Operation: op, InstanceARN: arnPrefix + id, RunID: testRun, Grant: w.grants[id]}
}

// refusedWith checks that the answer refuses with kind, saying want.
func refusedWith(t *testing.T, name string, answer AgentResponse, kind, want string) {
	t.Helper()
	if answer.Runner != nil || answer.Error == nil || answer.Error.Kind != kind || !strings.Contains(answer.Error.Message, want) {
		t.Errorf("%s: answer %+v (error %+v), want a %s refusal saying %q", name, answer, answer.Error, kind, want)
	}
}

// The instance's agent, presenting its grant, gets a just-in-time runner
// of the grant's repository with the claim's label alone, named after the
// instance; each job another.
func TestRegistrarRegistersForTheGrantsRepository(t *testing.T) {
	w := newRegistrarWorld(t)
	var names []string
	for range 2 {
		answer := w.r.Serve(context.Background(), w.ask(OpRegister, instance))
		if answer.Error != nil || answer.Runner == nil {
			t.Fatalf("register: %+v", answer.Error)
		}
		got := answer.Runner
		runner, ok := w.gh.Runners()[got.RunnerName]
		if !ok || runner.ID != got.RunnerID || runner.Target != repository || runner.Labels != w.label || !runner.Ephemeral || got.EncodedJITConfig == "" {
			t.Fatalf("answer %+v; GitHub has %+v (found %v): want an ephemeral runner of %s with the claim's label alone", got, runner, ok, repository)
		}
		if !protocol.RunnerOfInstance(got.RunnerName, instance) || got.RunnerName == instance || len(got.RunnerName) > github.MaxRunnerNameLength {
			t.Errorf("runner name %q: want the instance id and a suffix, at most %d characters", got.RunnerName, github.MaxRunnerNameLength)
		}
		names = append(names, got.RunnerName)
	}
	if names[0] == names[1] {
		t.Errorf("both jobs got runner %s", names[0])
	}
}

// Whoever does not present the instance's own grant for its run, before it
// expires, gets nothing: not a wrong secret, not another instance's grant,
// not an expired one; nor does an instance whose record names another run
// (or none), or whose claim does not hold it; and a grant the instance
// wrote itself for another repository or label than its claim's is not
// followed. GitHub is never asked.
func TestRegistrarRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*registrarWorld, *AgentRequest)
		kind   string
		want   string
	}{
		"a wrong grant": {func(w *registrarWorld, req *AgentRequest) { req.Grant = protocol.NewGrantSecret() }, ErrorDenied, "is not instance"},
		"no grant":      {func(w *registrarWorld, req *AgentRequest) { req.Grant = "" }, ErrorDenied, "is not instance"},
		"another instance's grant": {func(w *registrarWorld, req *AgentRequest) { req.Grant = w.grants[neighbour] },
			ErrorDenied, "is not instance"},
		"its grant for another instance": {func(w *registrarWorld, req *AgentRequest) { req.InstanceARN = arnPrefix + neighbour },
			ErrorDenied, "is not instance"},
		"an expired grant": {func(w *registrarWorld, req *AgentRequest) { w.now = w.now.Add(time.Hour) }, ErrorDenied, "expired at 2026-11-01T13:00:00Z"},
		"a grant of another run": {func(w *registrarWorld, req *AgentRequest) {
			w.grant(instance, "run-0", repository, protocol.NewLabel("run-0"), w.now.Add(time.Hour))
			req.Grant = w.grants[instance]
		}, ErrorDenied, "grant is for run run-0, not run-1"},
		"a record naming another run": {func(w *registrarWorld, req *AgentRequest) { w.record(instance, protocol.StateRunning, "run-2") },
			ErrorDenied, `does not serve run run-1: its record names run "run-2"`},
		"an idle record": {func(w *registrarWorld, req *AgentRequest) { w.record(instance, protocol.StateIdle, testRun) },
			ErrorDenied, "does not serve run run-1"},
		"a claim without the instance": {func(w *registrarWorld, req *AgentRequest) { w.claimRecord(testRun, repository, w.label, neighbour) },
			ErrorDenied, "does not hold instance " + instance},
		"no claim": {func(w *registrarWorld, req *AgentRequest) {
			w.table.Mu.Lock()
			delete(w.table.Items, awsfake.ItemKey(protocol.Key(protocol.TypeClaim, testRun)))
			w.table.Mu.Unlock()
		}, ErrorDenied, "run run-1 has no claim"},
		"a grant for another repository": {func(w *registrarWorld, req *AgentRequest) {
			w.grant(instance, testRun, "octo/payroll", w.label, w.now.Add(time.Hour))
			req.Grant = w.grants[instance]
		}, ErrorDenied, "grant registers with octo/payroll, and the claim of run run-1 with octo/app"},
		"a grant with another label": {func(w *registrarWorld, req *AgentRequest) {
			w.grant(instance, testRun, repository, protocol.NewLabel(testRun), w.now.Add(time.Hour))
			req.Grant = w.grants[instance]
		}, ErrorDenied, "another label than the claim"},
		"not an agent's operation": {func(w *registrarWorld, req *AgentRequest) { req.Operation = OpClaim }, ErrorInvalid, `operation "claim"`},
		"not an instance":          {func(w *registrarWorld, req *AgentRequest) { req.InstanceARN = "AGENT#x" }, ErrorInvalid, "not an instance's ARN"},
	} {
		t.Run(name, func(t *testing.T) {
			w := newRegistrarWorld(t)
			req := w.ask(OpRegister, instance)
			tc.change(w, &req)
			refusedWith(t, name, w.r.Serve(context.Background(), req), tc.kind, tc.want)
			if calls := w.gh.APICalls(); len(calls) != 0 {
				t.Errorf("GitHub was asked %v", calls)
			}
		})
	}
}

// Leaving, the agent has its registration deleted, though its record no
// longer names the run; a registration GitHub removed after its job is
// gone already; another instance's runner is never deleted, nor any
// without the instance's grant.
func TestRegistrarDeregisters(t *testing.T) {
	w := newRegistrarWorld(t)
	ctx := context.Background()
	answer := w.r.Serve(ctx, w.ask(OpRegister, instance))
	if answer.Error != nil {
		t.Fatal(answer.Error)
	}
	mine := answer.Runner
	theirs := w.r.Serve(ctx, w.ask(OpRegister, neighbour)).Runner
	w.record(instance, protocol.StateIdle, "")

	leave := w.ask(OpDeregister, instance)
	leave.RunnerID = theirs.RunnerID
	refusedWith(t, "another instance's runner", w.r.Serve(ctx, leave), ErrorDenied, "not a runner of instance "+instance)
	leave.RunnerID, leave.Grant = mine.RunnerID, w.grants[neighbour]
	refusedWith(t, "another instance's grant", w.r.Serve(ctx, leave), ErrorDenied, "is not instance")
	if runners := w.gh.Runners(); len(runners) != 2 {
		t.Fatalf("runners %v after refused deletions, want both", runners)
	}

	leave.Grant = w.grants[instance]
	for range 2 { // the second finds it gone
		if answer := w.r.Serve(ctx, leave); answer.Error != nil || answer.Runner != nil {
			t.Fatalf("deregister: %+v", answer)
		}
	}
	if _, ok := w.gh.Runners()[mine.RunnerName]; ok {
		t.Errorf("runner %s is still registered", mine.RunnerName)
	}
	if _, ok := w.gh.Runners()[theirs.RunnerName]; !ok {
		t.Errorf("the neighbour's runner %s is gone", theirs.RunnerName)
	}
	if deletes := slices.DeleteFunc(w.gh.APICalls(), func(c string) bool { return !strings.HasPrefix(c, "delete-runner") }); len(deletes) != 1 {
		t.Errorf("deletions %v, want one", deletes)
	}
}

// What the broker does for a job's start: the reads of the table and
// GitHub's generate-jitconfig (here the stub GitHub, on this machine: the
// time is the broker's own, without GitHub's latency).
func BenchmarkRegistrarRegister(b *testing.B) {
	w := newRegistrarWorld(b)
	ctx := context.Background()
	req := w.ask(OpRegister, instance)
	for b.Loop() {
		if answer := w.r.Serve(ctx, req); answer.Error != nil {
			b.Fatal(answer.Error)
		}
	}
}
