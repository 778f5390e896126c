package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/actionsoidc"
)

// fakeClaims is the pool logic in memory: claim records by run id, made
// as claim.Claimer makes them (pending while Create runs, complete with
// the time it got its runners).
type fakeClaims struct {
	mu      sync.Mutex
	records map[string]claim.Record
	clock   time.Time // each complete record is written one second after the last
	created []claim.Request
	release []string // run ids released
	// begin, when set, runs when a Create begins, before it writes its
	// record; during while it is under way, its record pending.
	begin, during func(req claim.Request)
	// warnings are reported by each Create.
	warnings  [][2]string
	createErr error
	corrupt   []string // records List skips
	warn      func(summary, detail string)
}

func newFakeClaims() *fakeClaims {
	return &fakeClaims{records: map[string]claim.Record{}, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// record writes a complete claim of n runners for repository made through
// the broker, at the next second.
func (f *fakeClaims) record(runID, repository string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records[runID] = f.completeLocked(claim.Request{Pool: "builds", RunID: runID, Repository: repository, InstanceCount: n, RegisterWithRepository: true})
}

func (f *fakeClaims) completeLocked(req claim.Request) claim.Record {
	f.clock = f.clock.Add(time.Second)
	rec := claim.Record{Request: req, State: claim.StateComplete, Nonce: "n-" + req.RunID, UpdatedAt: protocol.FormatTime(f.clock)}
	for i := range req.InstanceCount {
		rec.Instances = append(rec.Instances, claim.Instance{ID: fmt.Sprintf("i-%s-%d", req.RunID, i), Source: claim.SourcePool})
	}
	return rec
}

// pendingLocked is the record of a claim under way, its lease refreshed
// later than any complete record was written.
func (f *fakeClaims) pendingLocked(req claim.Request) claim.Record {
	return claim.Record{Request: req, State: claim.StatePending, Nonce: "n-" + req.RunID, UpdatedAt: protocol.FormatTime(f.clock.Add(time.Hour))}
}

func (f *fakeClaims) Create(_ context.Context, req claim.Request) (*claim.Result, error) {
	if f.begin != nil {
		f.begin(req)
	}
	f.mu.Lock()
	f.created = append(f.created, req)
	for _, w := range f.warnings {
		f.warn(w[0], w[1])
	}
	if f.createErr != nil {
		defer f.mu.Unlock()
		return nil, f.createErr
	}
	if _, taken := f.records[req.RunID]; taken {
		defer f.mu.Unlock()
		return nil, fmt.Errorf("run %s: %w", req.RunID, claim.ErrOtherRepository)
	}
	f.records[req.RunID] = f.pendingLocked(req)
	during := f.during
	f.mu.Unlock()
	if during != nil {
		during(req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := f.completeLocked(req)
	f.records[req.RunID] = rec
	return &claim.Result{Instances: rec.Instances, Label: req.RunID + "-secret", Reused: req.InstanceCount}, nil
}

func (f *fakeClaims) Read(_ context.Context, _, runID string) (claim.Record, []claim.Instance, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.records[runID]
	return rec, rec.Instances, ok, nil
}

func (f *fakeClaims) Release(_ context.Context, _, runID string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.release = append(f.release, runID)
	var outcomes []string
	for _, inst := range f.records[runID].Instances {
		outcomes = append(outcomes, inst.ID+": released to the pool")
	}
	delete(f.records, runID)
	return outcomes, nil
}

func (f *fakeClaims) List(context.Context, string, claim.ListFilter) ([]claim.Listed, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []claim.Listed
	for _, rec := range f.records {
		out = append(out, claim.Listed{Record: rec, Live: rec.Instances})
	}
	slices.SortFunc(out, func(a, b claim.Listed) int { return strings.Compare(a.Request.RunID, b.Request.RunID) })
	return out, f.corrupt, nil
}

// held is the runners the records of repository hold, by run id.
func (f *fakeClaims) held(repository string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for id, rec := range f.records {
		if rec.Request.Repository == repository {
			out[id] = rec.Request.InstanceCount
		}
	}
	return out
}

// configItem is a table that holds the pool config item cfg.
type configItem struct{ cfg protocol.PoolConfig }

func (c configItem) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{Item: c.cfg.Item(protocol.FormatTime(time.Now()))}, nil
}

// broker is a Handler for pool builds, with a local issuer, and its fake
// claims.
type broker struct {
	*Handler
	iss    *actionsoidc.Issuer
	claims *fakeClaims
}

// newBroker serves pool builds, whose access lets octo/app and octo/web claim
// (octo/app at most 4 runners at once).
func newBroker(t *testing.T) *broker {
	t.Helper()
	cfg := poolWithAccess(protocol.RepositoryAccess{Repository: "octo/app", MaxRunners: 4}, protocol.RepositoryAccess{Repository: "octo/web"})
	return newBrokerOf(t, cfg)
}

func newBrokerOf(t *testing.T, cfg protocol.PoolConfig) *broker {
	t.Helper()
	b := &broker{iss: actionsoidc.New(t), claims: newFakeClaims()}
	b.Handler = &Handler{Pool: "builds", Verifier: NewVerifier(b.iss.URL, ""), DynamoDB: configItem{cfg},
		Claimer: func(warn func(string, string)) Claimer {
			b.claims.mu.Lock()
			defer b.claims.mu.Unlock()
			b.claims.warn = warn
			return b.claims
		},
		Log: func(msg string, kv ...any) { t.Log(append([]any{msg}, kv...)...) }}
	return b
}

// token is the ID token of a job of workflow run 4242 of repository.
func (b *broker) token(repository string) string {
	return b.iss.Mint(b.iss.Job(repository, 4242, DefaultAudience))
}

// claimFor asks for n large runners for runID as a job of repository.
func (b *broker) claimFor(repository, runID string, n int) Response {
	return b.Handle(context.Background(), Request{Operation: OpClaim, IDToken: b.token(repository), Pool: "builds", RunID: runID,
		Claim: &claim.Request{Pool: "builds", RunID: runID, InstanceCount: n, ResourceClass: "large"}})
}

func (b *broker) call(op, repository, runID string) Response {
	return b.Handle(context.Background(), Request{Operation: op, IDToken: b.token(repository), Pool: "builds", RunID: runID})
}

func assertResponseError(t *testing.T, resp Response, kind, message string) {
	t.Helper()
	if resp.Error == nil || resp.Error.Kind != kind || !strings.Contains(resp.Error.Message, message) {
		t.Errorf("response %+v (error %+v), want %s: %q", resp, resp.Error, kind, message)
	}
}

// A claim acts for the repository and workflow run its token names,
// whatever its request says, and registers its runners with that
// repository.
func TestClaimActsForTheTokensRepository(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	resp := b.Handle(context.Background(), Request{Operation: OpClaim, IDToken: b.token("octo/app"), Pool: "builds", RunID: "run-1",
		Claim: &claim.Request{Pool: "builds", RunID: "run-1", InstanceCount: 2, ResourceClass: "large",
			Repository: "octo/web", WorkflowRun: claim.WorkflowRun{ID: 1, Attempt: 9}, RegisterWithRepository: false}})
	if resp.Error != nil || resp.Result == nil || len(resp.Result.Instances) != 2 {
		t.Fatalf("response %+v (error %+v), want 2 runners", resp, resp.Error)
	}
	got := b.claims.created[0]
	if got.Repository != "octo/app" || got.WorkflowRun != (claim.WorkflowRun{ID: 4242, Attempt: 1}) || !got.RegisterWithRepository {
		t.Errorf("claimed %+v, want for octo/app's run 4242 attempt 1, registered with octo/app", got)
	}
}

// Only a token of a repository the pool's access lists, for a workflow
// it lists, gets anything; the pool logic is not even asked.
func TestRefusedCallers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		cfg        protocol.PoolConfig
		token      func(*actionsoidc.Issuer) string
		kind, want string
	}{
		{"expired token", poolWithAccess(protocol.RepositoryAccess{Repository: "octo/app"}),
			func(iss *actionsoidc.Issuer) string { return iss.Expired(iss.Job("octo/app", 1, DefaultAudience)) }, ErrorDenied, "token is expired"},
		{"token for another audience", poolWithAccess(protocol.RepositoryAccess{Repository: "octo/app"}),
			func(iss *actionsoidc.Issuer) string {
				return iss.WrongAudience(iss.Job("octo/app", 1, DefaultAudience))
			}, ErrorDenied, "expected audience"},
		{"no access policy", poolWithAccess(),
			func(iss *actionsoidc.Issuer) string { return iss.Mint(iss.Job("octo/app", 1, DefaultAudience)) }, ErrorDenied, "pool builds has no access policy"},
		{"repository not listed", poolWithAccess(protocol.RepositoryAccess{Repository: "octo/web"}),
			func(iss *actionsoidc.Issuer) string { return iss.Mint(iss.Job("octo/app", 1, DefaultAudience)) }, ErrorDenied, "repository octo/app may not claim runners of pool builds"},
		{"workflow not listed", poolWithAccess(protocol.RepositoryAccess{Repository: "octo/app", Workflows: []string{"octo/app/.github/workflows/release.yml@*"}}),
			func(iss *actionsoidc.Issuer) string { return iss.Mint(iss.Job("octo/app", 1, DefaultAudience)) }, ErrorDenied, "workflow octo/app/.github/workflows/ci.yml@refs/heads/main of repository octo/app may not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBrokerOf(t, tc.cfg)
			b.claims.record("run-1", "octo/app", 1)
			for _, req := range []Request{
				{Operation: OpClaim, Pool: "builds", RunID: "run-2", Claim: &claim.Request{RunID: "run-2", InstanceCount: 1, ResourceClass: "large"}},
				{Operation: OpRead, Pool: "builds", RunID: "run-1"},
				{Operation: OpRelease, Pool: "builds", RunID: "run-1"},
			} {
				req.IDToken = tc.token(b.iss)
				resp := b.Handle(context.Background(), req)
				assertResponseError(t, resp, tc.kind, tc.want)
				if resp.Record != nil || resp.Result != nil {
					t.Errorf("%s answered %+v", req.Operation, resp)
				}
			}
			if len(b.claims.created) != 0 || len(b.claims.release) != 0 {
				t.Errorf("claimed %v, released %v: want nothing done", b.claims.created, b.claims.release)
			}
		})
	}
}

// A repository reads and releases its own claims; another repository's
// claim (or a claim made directly, without the broker) answers exactly
// as no claim does, and is left alone.
func TestReadAndReleaseOnlyOwnClaims(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	b.claims.record("run-app", "octo/app", 2)
	b.claims.record("run-web", "octo/web", 1)
	b.claims.mu.Lock()
	direct := b.claims.records["run-app"]
	direct.Request.RunID, direct.Request.RegisterWithRepository = "run-direct", false
	b.claims.records["run-direct"] = direct
	b.claims.mu.Unlock()

	if resp := b.call(OpRead, "octo/app", "run-app"); resp.Error != nil || resp.Record == nil || resp.Record.Request.RunID != "run-app" || len(resp.Live) != 2 {
		t.Errorf("read of its own claim: %+v (error %+v)", resp, resp.Error)
	}
	for _, op := range []string{OpRead, OpRelease} {
		for _, runID := range []string{"run-web", "run-direct"} {
			resp := b.call(op, "octo/app", runID)
			if resp.Error != nil || resp.Record != nil || resp.Outcomes != nil {
				t.Errorf("%s of %s: %+v (error %+v), want what a missing claim answers: not found, nothing released", op, runID, resp, resp.Error)
			}
			// The same answer once no such claim exists.
			b.claims.mu.Lock()
			rec := b.claims.records[runID]
			delete(b.claims.records, runID)
			b.claims.mu.Unlock()
			if missing := b.call(op, "octo/app", runID); !reflect.DeepEqual(missing, resp) {
				t.Errorf("%s of a missing %s: %+v, want the same answer as for another's claim, %+v", op, runID, missing, resp)
			}
			b.claims.mu.Lock()
			b.claims.records[runID] = rec
			b.claims.mu.Unlock()
		}
	}
	if len(b.claims.release) != 0 {
		t.Errorf("released %v, want none of them", b.claims.release)
	}
	resp := b.call(OpRelease, "octo/app", "run-app")
	if resp.Error != nil || len(resp.Outcomes) != 2 || !slices.Equal(b.claims.release, []string{"run-app"}) {
		t.Errorf("release of its own claim: %+v (error %+v), released %v", resp, resp.Error, b.claims.release)
	}
}

// A repository holding runners up to its cap is refused more before any
// is claimed, told the cap; other repositories' claims do not count.
func TestClaimOverCapRefusedBeforeClaiming(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	b.claims.record("run-a", "octo/app", 2)
	b.claims.record("run-b", "octo/app", 1)
	b.claims.record("run-w", "octo/web", 10)
	resp := b.claimFor("octo/app", "run-c", 2)
	assertResponseError(t, resp, ErrorOverCap, "repository octo/app may hold at most 4 runners of pool builds at once (access max_runners = 4); it holds 3 and asks for 2")
	if len(b.claims.created) != 0 {
		t.Errorf("claimed %+v, want nothing", b.claims.created)
	}
	if resp := b.claimFor("octo/app", "run-c", 1); resp.Error != nil {
		t.Errorf("a claim within the cap: %+v", resp.Error)
	}
}

// Claims of one repository made at the same time pass the pre-check
// together; the post-check, over the repository's claims in a fixed order
// (under way first, then by when they got their runners), keeps the
// earlier ones and releases the one over the cap.
func TestClaimOverCapReleasedAfterClaiming(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// meanwhile is what another claim of octo/app (3 runners) did
		// while this claim (2 runners) was under way.
		meanwhile func(f *fakeClaims)
		over      bool
	}{
		{"earlier claim complete", func(f *fakeClaims) {
			rec := f.completeLocked(claim.Request{Pool: "builds", RunID: "run-other", Repository: "octo/app", InstanceCount: 3, RegisterWithRepository: true})
			f.records["run-other"] = rec
		}, true},
		{"claim under way", func(f *fakeClaims) {
			f.records["run-other"] = f.pendingLocked(claim.Request{Pool: "builds", RunID: "run-other", Repository: "octo/app", InstanceCount: 3, RegisterWithRepository: true})
		}, true},
		{"later claim complete", func(f *fakeClaims) {
			rec := f.completeLocked(claim.Request{Pool: "builds", RunID: "run-other", Repository: "octo/app", InstanceCount: 3, RegisterWithRepository: true})
			rec.UpdatedAt = protocol.FormatTime(f.clock.Add(time.Hour)) // it got its runners after this claim
			f.records["run-other"] = rec
		}, false},
		{"another repository's claim", func(f *fakeClaims) {
			f.records["run-other"] = f.completeLocked(claim.Request{Pool: "builds", RunID: "run-other", Repository: "octo/web", InstanceCount: 3, RegisterWithRepository: true})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBroker(t)
			b.claims.during = func(claim.Request) {
				b.claims.mu.Lock()
				defer b.claims.mu.Unlock()
				tc.meanwhile(b.claims)
			}
			resp := b.claimFor("octo/app", "run-1", 2)
			if !tc.over {
				if resp.Error != nil || resp.Result == nil || len(b.claims.release) != 0 {
					t.Errorf("response %+v (error %+v), released %v; want the claim kept", resp, resp.Error, b.claims.release)
				}
				return
			}
			assertResponseError(t, resp, ErrorOverCap,
				"repository octo/app may hold at most 4 runners of pool builds at once (access max_runners = 4); it holds 3 and asks for 2; claims the repository made at the same time hold the rest, so this claim's runners were released")
			if resp.Result != nil || !slices.Equal(b.claims.release, []string{"run-1"}) || len(resp.Outcomes) != 2 {
				t.Errorf("response %+v, released %v; want run-1's 2 runners released", resp, b.claims.release)
			}
		})
	}
}

// However many claims of one repository run at once, the runners its
// successful claims keep never exceed its max_runners. All pass the
// pre-check together (none records its claim before all have begun), then
// get their runners in a random order.
func TestConcurrentClaimsNeverExceedMaxRunners(t *testing.T) {
	t.Parallel()
	const claims, maxRunners = 24, 4
	b := newBroker(t)
	var begun sync.WaitGroup
	begun.Add(claims)
	b.claims.begin = func(claim.Request) {
		begun.Done()
		begun.Wait()
	}
	b.claims.during = func(claim.Request) {
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	}
	var wg sync.WaitGroup
	responses := make([]Response, claims)
	for i := range claims {
		wg.Go(func() { responses[i] = b.claimFor("octo/app", fmt.Sprintf("run-%02d", i), 1) })
	}
	wg.Wait()
	kept := 0
	for i, resp := range responses {
		runID := fmt.Sprintf("run-%02d", i)
		switch {
		case resp.Error == nil:
			kept += len(resp.Result.Instances)
		case resp.Error.Kind != ErrorOverCap:
			t.Errorf("%s: %+v, want over_cap", runID, resp.Error)
		case !slices.Contains(b.claims.release, runID):
			t.Errorf("%s failed over its cap but was not released", runID)
		}
	}
	held := b.claims.held("octo/app")
	total := 0
	for _, n := range held {
		total += n
	}
	t.Logf("%d claims at once: %d kept %d runners", claims, len(held), kept)
	if kept > maxRunners || total != kept {
		t.Errorf("the claims kept %d runners and the records hold %d (%v), want at most max_runners = %d, all of them reported", kept, total, held, maxRunners)
	}
}

// Every warning the pool logic reports during the call reaches the
// caller, each once; claim.ErrOtherClaimant is its own kind, and a run id
// another repository's claim holds is denied.
func TestClaimWarningsAndErrors(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	b.claims.warnings = [][2]string{{"Metrics not published", "AccessDenied"}, {"Metrics not published", "AccessDenied"}, {"Spot", "on-demand instead"}}
	b.claims.corrupt = []string{"claim record run-x is not valid: bad JSON"}
	resp := b.claimFor("octo/app", "run-1", 1)
	if resp.Error != nil {
		t.Fatal(resp.Error)
	}
	want := [][2]string{{"Claim records of pool builds skipped", "Not counted against the repositories' max_runners: claim record run-x is not valid: bad JSON"},
		{"Metrics not published", "AccessDenied"}, {"Spot", "on-demand instead"}}
	if !slices.Equal(resp.Warnings, want) {
		t.Errorf("warnings %q, want %q", resp.Warnings, want)
	}

	b.claims.warnings = nil
	resp = b.claimFor("octo/web", "run-1", 1)
	assertResponseError(t, resp, ErrorDenied, "run run-1: claimed for another repository: give the claim a run id of its own")

	b.claims.createErr = fmt.Errorf("run run-2 in pool builds is %w, \"job-a\"", claim.ErrOtherClaimant)
	assertResponseError(t, b.claimFor("octo/app", "run-2", 1), ErrorOtherClaimant, "claimed by another claimant")
	b.claims.createErr = errors.New("EC2 has no capacity")
	assertResponseError(t, b.claimFor("octo/app", "run-2", 1), ErrorFailed, "EC2 has no capacity")
}

// A claim's resource class and runtime are checked against the
// repository's entry before the pool logic is asked.
func TestClaimCapsCheckedBeforeClaiming(t *testing.T) {
	t.Parallel()
	b := newBrokerOf(t, poolWithAccess(protocol.RepositoryAccess{Repository: "octo/app", ResourceClasses: []string{"xlarge"}}))
	assertResponseError(t, b.claimFor("octo/app", "run-1", 1), ErrorDenied, `may not claim resource class "large" of pool builds: its access entry's resource_classes = ["xlarge"]`)
	if len(b.claims.created) != 0 {
		t.Errorf("claimed %+v", b.claims.created)
	}
}

// Malformed requests are invalid: a pool this broker does not serve, an
// unknown operation, a claim without its claim or run id.
func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	tok := b.token("octo/app")
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{Operation: OpRead, IDToken: tok, Pool: "other", RunID: "run-1"}, `this broker serves pool builds, not "other"`},
		{Request{Operation: "delete", IDToken: tok, Pool: "builds", RunID: "run-1"}, `operation "delete": want claim, read or release`},
		{Request{Operation: OpClaim, IDToken: tok, Pool: "builds", RunID: "run-1"}, "operation claim needs its claim"},
		{Request{Operation: OpClaim, IDToken: tok, Pool: "builds", RunID: "run-1", Claim: &claim.Request{RunID: "run-2"}}, `the request's run id "run-1" and its claim's "run-2" differ`},
		{Request{Operation: OpClaim, IDToken: tok, Pool: "builds", Claim: &claim.Request{Pool: "other", RunID: "run-2"}}, `this broker serves pool builds, not "other"`},
		{Request{Operation: OpRelease, IDToken: tok, Pool: "builds"}, "operation release needs the claim's run id"},
	} {
		assertResponseError(t, b.Handle(context.Background(), tc.req), ErrorInvalid, tc.want)
	}
}
