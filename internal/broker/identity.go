package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The token a broker takes, unless configured otherwise.
const (
	// DefaultIssuer is GitHub Actions' OIDC issuer on github.com.
	DefaultIssuer = "https://token.actions.githubusercontent.com"
	// DefaultAudience is the audience a job asks its token for.
	DefaultAudience = "ec2runners"
)

// Identity is what a verified GitHub Actions OIDC token says a call acts
// for: GitHub sets these claims, no workflow can.
type Identity struct {
	// Repository is "owner/name", as GitHub spells it when it issues the
	// token: the pool's access names repositories by name, so a renamed
	// repository needs its new name there.
	Repository string
	Owner      string
	RunID      int64 // GITHUB_RUN_ID
	RunAttempt int   // GITHUB_RUN_ATTEMPT
	// WorkflowRef is the run's workflow ("owner/name/.github/workflows/ci.yml@refs/heads/main");
	// JobWorkflowRef the job's, another repository's in a reusable workflow.
	WorkflowRef    string
	JobWorkflowRef string
	Event          string // event_name: push, pull_request, ...
	Ref            string // refs/heads/main, refs/pull/1/merge, ...
}

// WorkflowRun is the workflow run attempt the token was issued to.
func (id Identity) WorkflowRun() claim.WorkflowRun {
	return claim.WorkflowRun{ID: id.RunID, Attempt: id.RunAttempt}
}

// actionsClaims are the claims of a GitHub Actions token that Identity
// holds: GitHub sends the numbers as strings.
type actionsClaims struct {
	Repository      string `json:"repository"`
	RepositoryOwner string `json:"repository_owner"`
	RunID           string `json:"run_id"`
	RunAttempt      string `json:"run_attempt"`
	WorkflowRef     string `json:"workflow_ref"`
	JobWorkflowRef  string `json:"job_workflow_ref"`
	EventName       string `json:"event_name"`
	Ref             string `json:"ref"`
}

// issuedAtLeeway is how far in the future a token's iat may be: the
// leeway go-oidc gives nbf, for the issuer's clock.
const issuedAtLeeway = 5 * time.Minute

// discoveryTimeout bounds each request to the issuer (its discovery
// document and its keys).
const discoveryTimeout = 10 * time.Second

// Verifier verifies GitHub Actions OIDC tokens for one audience.
//
// What it relies on from GitHub: the issuer publishes its discovery
// document at <issuer>/.well-known/openid-configuration and its signing
// keys at the jwks_uri it names; tokens are RS256-signed with a key of
// that set (identified by kid), short-lived (valid for minutes, checked
// once, when an invocation begins: a claim that then runs for minutes is
// not cut short), and carry the audience the job asked for. The discovery
// document is read at the first token, and the keys are cached for the
// Verifier's life (a Lambda container's): a token signed with a key not in
// the cache makes go-oidc fetch the keys again (once at a time, however
// many tokens wait), which is how GitHub's key rotation is followed. Each
// such fetch is one request to GitHub, which publishes no rate limit for
// it; only callers that may invoke the broker can cause one.
type Verifier struct {
	issuer, audience string

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier // nil until the discovery document is read
}

// NewVerifier verifies the tokens of issuer ("": DefaultIssuer) for
// audience ("": DefaultAudience).
func NewVerifier(issuer, audience string) *Verifier {
	if issuer == "" {
		issuer = DefaultIssuer
	}
	if audience == "" {
		audience = DefaultAudience
	}
	return &Verifier{issuer: issuer, audience: audience}
}

// Verify checks a token: signed (RS256 only) by a key the issuer
// publishes, issued by it, for the audience, not expired, not before its
// nbf nor issued in the future; and returns the identity it carries. A
// refused token is an *Error of kind ErrorDenied; an issuer that cannot be
// reached, of ErrorFailed.
func (v *Verifier) Verify(ctx context.Context, rawToken string) (Identity, error) {
	verifier, err := v.idTokenVerifier(ctx)
	if err != nil {
		return Identity{}, &Error{Kind: ErrorFailed, Message: err.Error()}
	}
	denied := func(why error) (Identity, error) {
		return Identity{}, &Error{Kind: ErrorDenied, Message: fmt.Sprintf("the ID token is not a GitHub Actions OIDC token of %s for audience %q: %v", v.issuer, v.audience, why)}
	}
	if rawToken == "" {
		return denied(errors.New("there is none (the job needs `permissions: id-token: write`)"))
	}
	tok, err := verifier.Verify(ctx, rawToken)
	if err != nil {
		return denied(err)
	}
	if tok.IssuedAt.After(time.Now().Add(issuedAtLeeway)) {
		return denied(fmt.Errorf("it was issued in the future (iat %s)", tok.IssuedAt.UTC().Format(time.RFC3339)))
	}
	var c actionsClaims
	if err := tok.Claims(&c); err != nil {
		return denied(err)
	}
	id, err := c.identity()
	if err != nil {
		return denied(err)
	}
	return id, nil
}

// identity checks that the claims name a repository and a run attempt.
func (c actionsClaims) identity() (Identity, error) {
	owner, _, err := protocol.ParseRepository(c.Repository)
	if err != nil {
		return Identity{}, fmt.Errorf("its repository claim: %w", err)
	}
	if !strings.EqualFold(owner, c.RepositoryOwner) {
		return Identity{}, fmt.Errorf("its repository claim %q is not of its repository_owner claim %q", c.Repository, c.RepositoryOwner)
	}
	runID, err := strconv.ParseInt(c.RunID, 10, 64)
	if err != nil || runID <= 0 {
		return Identity{}, fmt.Errorf("its run_id claim %q is not a workflow run id", c.RunID)
	}
	attempt, err := strconv.Atoi(c.RunAttempt)
	if err != nil || attempt <= 0 {
		return Identity{}, fmt.Errorf("its run_attempt claim %q is not a run attempt", c.RunAttempt)
	}
	return Identity{
		Repository: c.Repository, Owner: owner, RunID: runID, RunAttempt: attempt,
		WorkflowRef: c.WorkflowRef, JobWorkflowRef: c.JobWorkflowRef, Event: c.EventName, Ref: c.Ref,
	}, nil
}

// idTokenVerifier reads the issuer's discovery document the first time,
// and keeps the verifier it makes (with its cache of the issuer's keys).
// A failed read is tried again at the next token.
func (v *Verifier) idTokenVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	ctx = v.httpContext(ctx)
	provider, err := oidc.NewProvider(ctx, v.issuer)
	if err != nil {
		return nil, fmt.Errorf("cannot read the discovery document of the OIDC issuer %s: %w", v.issuer, err)
	}
	// The key set outlives this call's context: it fetches keys for later
	// tokens too.
	v.verifier = provider.VerifierContext(context.WithoutCancel(ctx), &oidc.Config{
		ClientID: v.audience, SupportedSigningAlgs: []string{oidc.RS256},
	})
	return v.verifier, nil
}

// httpContext makes go-oidc's requests with a bounded client.
func (v *Verifier) httpContext(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, &http.Client{Timeout: discoveryTimeout})
}
