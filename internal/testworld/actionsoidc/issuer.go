// Package actionsoidc is a local stand-in for GitHub Actions' OIDC
// provider, for tests: an issuer that publishes its discovery document
// (/.well-known/openid-configuration) and its keys (/.well-known/jwks),
// mints RS256 tokens with the claims GitHub gives a job, and serves the
// token request endpoint a job calls (ACTIONS_ID_TOKEN_REQUEST_URL with
// ACTIONS_ID_TOKEN_REQUEST_TOKEN). It also mints the tokens a verifier
// must refuse: expired, for another audience, signed with a key it does
// not publish, unsigned (alg none) or HMAC-signed (HS256).
//
// The claims follow GitHub's "OIDC token claims" reference: every custom
// claim is a string, numbers included (run_id, run_attempt, repository_id).
package actionsoidc

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Lifetime is how long a minted token is valid: GitHub's are valid for
// minutes.
const Lifetime = 5 * time.Minute

// Claims are a GitHub Actions OIDC token's claims.
type Claims struct {
	Issuer    string `json:"iss"`
	Subject   string `json:"sub"`
	Audience  string `json:"aud"`
	IssuedAt  int64  `json:"iat"`
	NotBefore int64  `json:"nbf"`
	Expiry    int64  `json:"exp"`
	JWTID     string `json:"jti"`

	Repository           string `json:"repository"` // owner/name
	RepositoryID         string `json:"repository_id"`
	RepositoryOwner      string `json:"repository_owner"`
	RepositoryOwnerID    string `json:"repository_owner_id"`
	RepositoryVisibility string `json:"repository_visibility"`
	Actor                string `json:"actor"`
	ActorID              string `json:"actor_id"`
	RunID                string `json:"run_id"`
	RunNumber            string `json:"run_number"`
	RunAttempt           string `json:"run_attempt"`
	Workflow             string `json:"workflow"`
	// WorkflowRef is the run's workflow, owner/name/path@ref;
	// JobWorkflowRef the job's, which differs in a reusable workflow.
	WorkflowRef       string `json:"workflow_ref"`
	WorkflowSHA       string `json:"workflow_sha"`
	JobWorkflowRef    string `json:"job_workflow_ref"`
	JobWorkflowSHA    string `json:"job_workflow_sha"`
	EventName         string `json:"event_name"`
	Ref               string `json:"ref"`
	RefType           string `json:"ref_type"`
	SHA               string `json:"sha"`
	HeadRef           string `json:"head_ref"`
	BaseRef           string `json:"base_ref"`
	Environment       string `json:"environment,omitempty"`
	RunnerEnvironment string `json:"runner_environment"`
}

// Issuer is a running OIDC issuer; New starts one.
type Issuer struct {
	// URL is the issuer (the tokens' iss) and the server's base URL.
	URL string
	// RequestURL and RequestToken are a job's ACTIONS_ID_TOKEN_REQUEST_URL
	// and ACTIONS_ID_TOKEN_REQUEST_TOKEN, for the job SetJob names.
	RequestURL, RequestToken string

	key         *rsa.PrivateKey
	otherKey    func() *rsa.PrivateKey // made when first asked for
	keyID       string
	jwksFetches atomic.Int64

	mu  sync.Mutex
	job *Claims
}

// New starts an issuer, stopped when the test ends.
func New(tb testing.TB) *Issuer {
	tb.Helper()
	i := &Issuer{key: newKey(), otherKey: sync.OnceValue(newKey), keyID: "actionsoidc-1", RequestToken: rand.Text()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", i.serveDiscovery)
	mux.HandleFunc("GET /.well-known/jwks", i.serveJWKS)
	mux.HandleFunc("GET /idtoken", i.serveTokenRequest)
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	i.URL = srv.URL
	// GitHub's request URL carries a query already: callers append
	// "&audience=...".
	i.RequestURL = srv.URL + "/idtoken?api-version=2.0"
	return i
}

// Setenv sets the job's ACTIONS_ID_TOKEN_REQUEST_URL and
// ACTIONS_ID_TOKEN_REQUEST_TOKEN for the test (testing.T.Setenv).
func (i *Issuer) Setenv(t *testing.T) {
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_URL", i.RequestURL)
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", i.RequestToken)
}

// JWKSFetches counts the requests for the issuer's keys.
func (i *Issuer) JWKSFetches() int { return int(i.jwksFetches.Load()) }

// Job returns the claims GitHub gives a job of attempt 1 of workflow run
// runID of repository ("owner/name"), from .github/workflows/ci.yml on
// main, pushed by octocat, for audience: a starting point tests change.
func (i *Issuer) Job(repository string, runID int64, audience string) Claims {
	owner, _, _ := strings.Cut(repository, "/")
	workflow := repository + "/.github/workflows/ci.yml@refs/heads/main"
	return Claims{
		Issuer: i.URL, Subject: "repo:" + repository + ":ref:refs/heads/main", Audience: audience,
		Repository: repository, RepositoryID: "74", RepositoryOwner: owner, RepositoryOwnerID: "65", RepositoryVisibility: "private",
		Actor: "octocat", ActorID: "12", RunID: strconv.FormatInt(runID, 10), RunNumber: "10", RunAttempt: "1",
		Workflow: "CI", WorkflowRef: workflow, WorkflowSHA: strings.Repeat("a", 40), JobWorkflowRef: workflow, JobWorkflowSHA: strings.Repeat("a", 40),
		EventName: "push", Ref: "refs/heads/main", RefType: "branch", SHA: strings.Repeat("a", 40), RunnerEnvironment: "self-hosted",
	}
}

// Mint signs c with the issuer's key (RS256). Zero times are filled in: issued
// now, valid for Lifetime; an empty issuer and token id too.
func (i *Issuer) Mint(c Claims) string {
	return i.sign(i.complete(c), "RS256", i.key)
}

// Expired mints c as Mint does, issued two lifetimes ago: it expired a
// lifetime ago.
func (i *Issuer) Expired(c Claims) string {
	issued := time.Now().Add(-2 * Lifetime)
	c.IssuedAt, c.NotBefore, c.Expiry = issued.Unix(), issued.Unix(), issued.Add(Lifetime).Unix()
	return i.Mint(c)
}

// WrongAudience mints c for GitHub's default audience, the URL of the
// repository's owner: the token a job gets that asks for no audience.
func (i *Issuer) WrongAudience(c Claims) string {
	c.Audience = "https://github.com/" + c.RepositoryOwner
	return i.Mint(c)
}

// OtherKey mints c signed with a key the issuer does not publish, under
// the key id of the one it does.
func (i *Issuer) OtherKey(c Claims) string {
	return i.sign(i.complete(c), "RS256", i.otherKey())
}

// AlgNone mints c unsigned, its header saying alg "none".
func (i *Issuer) AlgNone(c Claims) string {
	return i.sign(i.complete(c), "none", nil)
}

// HS256 mints c signed with HMAC-SHA256 keyed with the issuer's public key
// (the key confusion a verifier that trusts the header's alg falls for).
func (i *Issuer) HS256(c Claims) string {
	return i.sign(i.complete(c), "HS256", nil)
}

// SetJob makes the token request endpoint mint for the job of c, with the
// audience each request asks for (GitHub's default audience when it asks
// for none).
func (i *Issuer) SetJob(c Claims) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.job = &c
}

func (i *Issuer) complete(c Claims) Claims {
	now := time.Now()
	if c.IssuedAt == 0 {
		c.IssuedAt = now.Unix()
	}
	if c.NotBefore == 0 {
		c.NotBefore = c.IssuedAt
	}
	if c.Expiry == 0 {
		c.Expiry = time.Unix(c.IssuedAt, 0).Add(Lifetime).Unix()
	}
	if c.Issuer == "" {
		c.Issuer = i.URL
	}
	if c.JWTID == "" {
		c.JWTID = strconv.FormatInt(now.UnixNano(), 36)
	}
	return c
}

// sign makes the compact JWS of c: RS256 with key, HS256 keyed with the
// published public key, or none.
func (i *Issuer) sign(c Claims, alg string, key *rsa.PrivateKey) string {
	header, _ := json.Marshal(map[string]string{"typ": "JWT", "alg": alg, "kid": i.keyID})
	payload, _ := json.Marshal(c)
	input := b64(header) + "." + b64(payload)
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	switch alg {
	case "RS256":
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:]); err != nil {
			panic(err) // a 2048-bit key signs any digest
		}
	case "HS256":
		mac := hmac.New(sha256.New, x509.MarshalPKCS1PublicKey(&i.key.PublicKey))
		mac.Write([]byte(input))
		sig = mac.Sum(nil)
	}
	return input + "." + b64(sig)
}

func (i *Issuer) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"issuer": i.URL, "jwks_uri": i.URL + "/.well-known/jwks",
		"subject_types_supported": []string{"public", "pairwise"}, "response_types_supported": []string{"id_token"},
		"id_token_signing_alg_values_supported": []string{"RS256"}, "scopes_supported": []string{"openid"},
		"claims_supported": []string{"sub", "aud", "exp", "iat", "iss", "jti", "nbf", "ref", "repository", "repository_id",
			"repository_owner", "repository_owner_id", "run_id", "run_number", "run_attempt", "actor", "actor_id", "workflow",
			"workflow_ref", "workflow_sha", "head_ref", "base_ref", "event_name", "ref_type", "environment", "job_workflow_ref",
			"job_workflow_sha", "repository_visibility", "runner_environment"},
	})
}

func (i *Issuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	i.jwksFetches.Add(1)
	pub := i.key.PublicKey
	writeJSON(w, map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": i.keyID,
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

// serveTokenRequest answers a job's token request as GitHub does:
// {"value": "<jwt>"} for the request token, 401 for any other.
func (i *Issuer) serveTokenRequest(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+i.RequestToken {
		http.Error(w, "Bad credentials: the request token is not this job's", http.StatusUnauthorized)
		return
	}
	i.mu.Lock()
	job := i.job
	i.mu.Unlock()
	if job == nil {
		http.Error(w, "actionsoidc: no job set (Issuer.SetJob)", http.StatusNotFound)
		return
	}
	c := *job
	c.Audience = r.URL.Query().Get("audience")
	if c.Audience == "" {
		c.Audience = "https://github.com/" + c.RepositoryOwner
	}
	writeJSON(w, map[string]string{"value": i.Mint(c)})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // a failed write is the client's to notice
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func newKey() *rsa.PrivateKey {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return key
}
