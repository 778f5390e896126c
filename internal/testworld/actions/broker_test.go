package actions

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/providermirror"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/tfcli"
)

// TestActions_broker runs the claim and release actions as a job runs them
// (runAction: their action.yml's steps, if: and env: evaluated), with the
// inputs broker-function and broker-audience, the real Terraform CLI and
// the provider built from this checkout. Every AWS call goes to a stub
// that answers Lambda's Invoke of that function as the pool's broker
// would, and refuses every other call, as the CI role does. It shows the
// inputs reach the provider: the claim, the release's import and its
// destroy each invoke the broker once, with the job's OIDC token for that
// audience; the claim's outputs are the broker's answer; and nothing else
// reaches AWS, so the actions need no access to the pool's table.
func TestActions_broker(t *testing.T) {
	requireAcceptance(t)
	tf := tfcli.Must(t)
	const (
		function = "ci-runners-broker"
		audience = "ec2runners-test"
		pool     = "ci-runners"
	)
	stub := &brokerStub{function: function, claims: map[string]claim.Record{}}
	aws := httptest.NewServer(stub)
	defer aws.Close()
	// GitHub's OIDC token endpoint, for a job with id-token: write.
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer request-token" {
			http.Error(w, "bad request token", http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"value": "token-for-" + r.URL.Query().Get("audience")})
	}))
	defer tokens.Close()

	bin := t.TempDir()
	if err := os.Symlink(tf, filepath.Join(bin, "terraform")); err != nil {
		t.Fatal(err)
	}
	mirror, _ := providermirror.Build(t)
	env := map[string]string{
		"PATH":                  bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"AWS_ENDPOINT_URL":      aws.URL,
		"AWS_REGION":            "us-east-1",
		"AWS_ACCESS_KEY_ID":     "ci-role",
		"AWS_SECRET_ACCESS_KEY": "test",
		"TF_CLI_CONFIG_FILE":    providermirror.CLIConfig(t, mirror),
		"EC2RUNNERS_CACHE_DIR":  filepath.Join(t.TempDir(), "cache"),
		"GITHUB_ACTIONS":        "true",
		// What GitHub sets in a job with id-token: write.
		broker.EnvTokenRequestURL:   tokens.URL + "/token?api-version=2.0",
		broker.EnvTokenRequestToken: "request-token",
	}
	inputs := map[string]string{
		"pool": pool, "broker-function": function, "broker-audience": audience, "provider-version": providermirror.Version(t),
	}

	claimInputs, releaseInputs := maps.Clone(inputs), maps.Clone(inputs)
	claimInputs["instance-count"] = "2"
	claimInputs["github-token"] = "ghp_not-for-a-broker"
	out, log := newJob(t, env).runAction("claim", claimInputs)
	stub.mu.Lock()
	answer := stub.claims[pool+"/4242-1"]
	stub.mu.Unlock()
	if out["claimed"] != "true" || out["run-id"] != "4242-1" || out["label"] != answer.Request.Label || out["runs-on"] != out["label"] ||
		out["instance-ids"] != `["i-hot","i-launched"]` {
		t.Errorf("claim outputs %v, want the broker's claim 4242-1: label %s, instances i-hot and i-launched", out, answer.Request.Label)
	}
	if !strings.Contains(log, "(1 reused, 0 started from stopped, 1 launched)") || !strings.Contains(log, "through broker "+function) {
		t.Errorf("the claim's log does not give the broker's counts and name")
	}
	if !strings.Contains(log, "the github-token input is not used") {
		t.Errorf("the claim did not say that a broker does not use github-token")
	}

	releaseInputs["run-id"] = out["run-id"]
	newJob(t, env).runAction("release", releaseInputs)
	stub.mu.Lock()
	defer stub.mu.Unlock()
	if ops := stub.operations(); !slices.Equal(ops, []string{"claim 4242-1", "read 4242-1", "release 4242-1"}) {
		t.Errorf("the broker was asked %v, want the claim of 4242-1, the release's read (import) and its release", ops)
	}
	for _, req := range stub.calls {
		if req.IDToken != "token-for-"+audience || req.Pool != pool {
			t.Errorf("%s of %s/%s with token %q, want pool %s and the job's token for audience %s", req.Operation, req.Pool, req.RunID, req.IDToken, pool, audience)
		}
	}
	if len(stub.claims) != 0 {
		t.Errorf("the release left claims %v", stub.claims)
	}
	if len(stub.refused) > 0 {
		t.Errorf("the actions made AWS calls other than invoking the broker: %v", stub.refused)
	}
}

// brokerStub answers Lambda's Invoke of one function as a pool's broker
// does (internal/broker's wire protocol), from memory: a claim gets one hot
// and one launched runner. Every other AWS request is refused and kept.
type brokerStub struct {
	function string
	mu       sync.Mutex
	calls    []broker.Request
	claims   map[string]claim.Record // by pool/run id
	refused  []string
}

func (s *brokerStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	var req broker.Request
	if r.Method != http.MethodPost || r.URL.Path != "/2015-03-31/functions/"+s.function+"/invocations" || json.Unmarshal(body, &req) != nil {
		s.refused = append(s.refused, strings.TrimSpace(fmt.Sprintf("%s %s %s", r.Method, r.URL.Path, r.Header.Get("X-Amz-Target"))))
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type": "AccessDeniedException", "message": "the CI role may only invoke the broker"}`)
		return
	}
	s.calls = append(s.calls, req)
	key := req.Pool + "/" + req.RunID
	var resp broker.Response
	switch req.Operation {
	case broker.OpClaim:
		q := *req.Claim
		q.Label = q.RunID + "-brokerstub123"
		rec := claim.Record{Request: q, State: "complete", Instances: []claim.Instance{
			{ID: "i-hot", InstanceType: "c7i.large", UsageClass: "on-demand", Source: claim.SourcePool},
			{ID: "i-launched", InstanceType: "c7i.large", UsageClass: "on-demand", Source: claim.SourceFleet},
		}}
		s.claims[key] = rec
		resp.Result = &claim.Result{Label: q.Label, Instances: rec.Instances, Reused: 1, Created: 1}
	case broker.OpRead:
		if rec, ok := s.claims[key]; ok {
			resp.Record, resp.Live = &rec, rec.Instances
		}
	case broker.OpRelease:
		delete(s.claims, key)
		resp.Outcomes = []string{"i-hot: released", "i-launched: released"}
	default:
		resp.Error = &broker.Error{Kind: broker.ErrorInvalid, Message: "unknown operation " + req.Operation}
	}
	_ = json.NewEncoder(w).Encode(resp)
}

// operations are the broker's calls, as "<operation> <run id>".
func (s *brokerStub) operations() []string {
	var ops []string
	for _, req := range s.calls {
		ops = append(ops, req.Operation+" "+req.RunID)
	}
	return ops
}
