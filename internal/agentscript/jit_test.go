package agentscript_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// brokerFunction is the name the pool's broker has in these tests.
const brokerFunction = "ci-runners-broker"

// brokerStandIn serves Lambda's Invoke API (POST
// /2015-03-31/functions/{name}/invocations) for the pool's broker, as far
// as agents invoke it: its Registrar, reading the emulator's table and
// minting at the stub GitHub.
type brokerStandIn struct {
	URL string

	mu      sync.Mutex
	minting []time.Duration // how long each register took the broker
}

func startBroker(t testing.TB, f *fixture) *brokerStandIn {
	gh, err := github.New(github.Config{BaseURL: f.env.GitHub.URL, Token: f.env.GitHub.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	registrar := &broker.Registrar{DynamoDB: clients.DynamoDB, Pool: f.pool, GitHub: func(context.Context) (claim.JITRunners, error) { return gh, nil }}
	b := &brokerStandIn{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{function}/invocations", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("function") != brokerFunction {
			w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException")
			http.Error(w, `{"Type":"User","message":"Function not found"}`, http.StatusNotFound)
			return
		}
		var req broker.AgentRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		began := time.Now()
		answer := registrar.Serve(r.Context(), req)
		if req.Operation == broker.OpRegister && answer.Error == nil {
			b.mu.Lock()
			b.minting = append(b.minting, time.Since(began))
			b.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

// brokerOptions renders the script with the pool's broker.
func (f *fixture) brokerOptions(b *brokerStandIn) agentscript.Options {
	o := f.options()
	o.BrokerFunction = brokerFunction
	o.Endpoints.Lambda = b.URL
	return o
}

// claimThroughBroker claims the instance for runID as a claim through the
// pool's broker does: the claim record names the repository and the label,
// and the runner holds a registration grant, handed before the record
// names the run. (The claimer, a direct claim's, hands a registration
// token too, which the agent leaves alone when a grant is there.)
func (f *fixture) claimThroughBroker(runID string) {
	f.t.Helper()
	f.labels[runID] = protocol.NewLabel(runID)
	grant := protocol.RegistrationGrant{InstanceARN: f.arn(), Grant: protocol.NewGrantSecret(), ExpiresAt: time.Now().Add(time.Hour),
		RunID: runID, Target: owner + "/" + repo, Label: f.labels[runID], UpdatedAt: protocol.FormatTime(time.Now())}
	if _, err := clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.pool), Item: grant.Item()}); err != nil {
		f.t.Fatal(err)
	}
	timings := claim.DefaultTimings()
	timings.RegistrationWait = await.Patience
	res, err := f.claimer.Revive(context.Background(), claim.Request{
		Pool: f.pool, RunID: runID, Label: f.labels[runID], Repository: owner + "/" + repo, InstanceCount: 1, ResourceClass: class,
		UsageClass: protocol.UsageOnDemand, AllowedTypes: []string{"*"}, Timings: timings,
	})
	if err != nil {
		f.t.Fatalf("claim %s: %v", runID, err)
	}
	if len(res.Instances) != 1 || res.Instances[0].ID != f.instanceID {
		f.t.Fatalf("claim %s = %+v, want the instance %s", runID, res, f.instanceID)
	}
}

// jitRunners are the instance's just-in-time runners GitHub saw
// registered, in order.
func jitRunners(f *fixture) []string {
	var names []string
	for _, e := range f.env.GitHub.Events() {
		if name, ok := strings.CutPrefix(e, "register "); ok {
			name, _, _ = strings.Cut(name, " ")
			if protocol.RunnerOfInstance(name, f.instanceID) && name != f.instanceID && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

// Two jobs of a run claimed through the broker, one after the other on one
// instance, run on two registrations, each used by its job alone, with the
// claim's label, and the runner user wiped between them: what the first
// job left in its home is gone for the second. Leaving the run deletes the
// registration the next job would have had, and the instance goes back to
// the pool warm.
func TestInstance_eachJobOnAFreshRegistration(t *testing.T) {
	f := newFixture(t, repo, nil)
	b := startBroker(t, f)
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	inst := f.start(f.brokerOptions(b), nil)
	f.awaitServing()
	f.claimThroughBroker("run-1")

	first := runJob(t, f, "run-1", `echo "$RUNNER_NAME"; echo left > "$HOME/left-by-the-first-job"`)
	second := runJob(t, f, "run-1", `echo "$RUNNER_NAME"; ls -A "$HOME"`)
	if first.ExitCode != 0 || second.ExitCode != 0 || first.Runner == second.Runner ||
		!protocol.RunnerOfInstance(first.Runner, f.instanceID) || !protocol.RunnerOfInstance(second.Runner, f.instanceID) {
		t.Fatalf("jobs ran on %q (exit %d) and %q (exit %d); want two runners of %s", first.Runner, first.ExitCode, second.Runner, second.ExitCode, f.instanceID)
	}
	if strings.Contains(second.Output, "left-by-the-first-job") || !strings.HasPrefix(second.Output, second.Runner+"\n") {
		t.Errorf("the second job saw:\n%s\nwant its own runner's name, and nothing the first job left in the runner user's home", second.Output)
	}
	registered := jitRunners(f)
	if len(registered) < 2 || registered[0] != first.Runner || registered[1] != second.Runner {
		t.Fatalf("GitHub registered %v; want the first job's runner, then the second's", registered)
	}
	for _, e := range f.env.GitHub.Events() {
		if name, labels, ok := strings.Cut(strings.TrimPrefix(e, "register "), " "); strings.HasPrefix(e, "register ") && ok && slices.Contains(registered, name) && labels != f.label("run-1") {
			t.Errorf("runner %s registered with labels %q, want the claim's alone", name, labels)
		}
	}
	if slices.ContainsFunc(f.env.GitHub.Events(), func(e string) bool { return e == "register "+f.instanceID+" "+f.label("run-1") }) {
		t.Error("the run's registration token was used")
	}

	// The third job's runner waits online on a registration no job used.
	await.True(t, "the next job's runner online", func() error {
		if names := jitRunners(f); len(names) < 3 || !f.env.GitHub.Runners()[names[2]].Running {
			return fmt.Errorf("runners registered: %v", names)
		}
		return nil
	})
	release(t, f, "run-1")
	if runners := f.env.GitHub.Runners(); len(runners) != 0 {
		t.Errorf("after the release GitHub still has %v: the unused registration of the next job must be deleted", runners)
	}
	if !slices.Contains(f.env.GitHub.APICalls(), "delete-runner "+owner+"/"+repo) {
		t.Errorf("the broker deleted no runner: %v", f.env.GitHub.APICalls())
	}
	if !strings.Contains(inst.Output(), "the runner user wiped while its registration was minted") {
		t.Errorf("the agent's log does not tell the next job's start:\n%s", inst.Output())
	}
	claimAgain(t, f, "run-2") // warm, and a direct claim as before
	checkJob(t, f, "run-2")
}

// A job's start on the instance, once the last job of the run is done: its
// runner exits, the agent ends the job's processes and wipes the runner
// user while the broker mints the next registration, and starts the
// runner, which comes online. Reported: the whole start (job-start-ms) and
// the broker's share (mint-ms, the registrar against the emulator and the
// stub GitHub, without GitHub's own latency). Each job takes 5 s, as real
// ones do at least: a runner that lives less is taken to have run no job,
// and the next one waits.
//
//	go test ./internal/agentscript/ -run '^$' -bench InstanceJobStart -benchtime 5x
func BenchmarkInstanceJobStart(b *testing.B) {
	f := setUpFixture(b, protocol.UsageOnDemand, repo, nil)
	bk := startBroker(b, f)
	f.putRecord(protocol.StateIdle, "", time.Now().Add(10*time.Minute))
	f.start(f.brokerOptions(bk), nil)
	f.awaitServing()
	f.claimThroughBroker("run-1")
	var starts time.Duration
	for b.Loop() {
		id := f.env.GitHub.QueueJob(f.label("run-1"), "sleep 5")
		await.True(b, "the job", func() error { return await.Bool(f.env.GitHub.JobResult(id).Done) })
		done, ran := time.Now(), f.env.GitHub.JobResult(id).Runner
		await.True(b, "the next job's runner online", func() error {
			for name, r := range f.env.GitHub.Runners() {
				if name != ran && r.Running {
					return nil
				}
			}
			return fmt.Errorf("no runner online after %s", ran)
		})
		starts += time.Since(done)
	}
	b.ReportMetric(float64(starts.Milliseconds())/float64(b.N), "job-start-ms")
	bk.mu.Lock()
	var minting time.Duration
	for _, d := range bk.minting {
		minting += d
	}
	b.ReportMetric(float64(minting.Milliseconds())/float64(len(bk.minting)), "mint-ms")
	bk.mu.Unlock()
}
