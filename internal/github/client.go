// Package github is a small GitHub REST client that creates the registration
// and removal tokens self-hosted Actions runners need. It authenticates with a
// personal access token or as a GitHub App installation, and its errors never
// contain a credential or a token.
package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

const (
	defaultBaseURL = "https://api.github.com"
	// Product is the User-Agent's product token; Config.Version follows it.
	Product    = "terraform-provider-ec2runners"
	apiVersion = "2022-11-28"
	// Token responses are tiny; the limit only guards against a misbehaving proxy.
	maxBodyBytes = 1 << 20
)

// Config says how to authenticate. Exactly one of Token or App must be set.
type Config struct {
	BaseURL    string // REST API root; "" means https://api.github.com. GitHub Enterprise Server: https://HOST/api/v3
	Token      string // personal access token or fine-grained token
	Version    string // the provider's version, sent as User-Agent: terraform-provider-ec2runners/<Version>
	App        *AppAuth
	HTTPClient *http.Client     // nil: a client with a 30s timeout
	Now        func() time.Time // nil: time.Now; used for JWT claims and token cache expiry
}

// AppAuth authenticates as one installation of a GitHub App.
type AppAuth struct {
	AppID          int64
	InstallationID int64
	PrivateKeyPEM  string // PKCS#1 ("RSA PRIVATE KEY") or PKCS#8 ("PRIVATE KEY") PEM
}

// Target is where runners register: a repository, or an organization when
// Repository is "".
type Target struct{ Owner, Repository string }

// String returns "owner/repo" for a repository and "owner" for an organization.
func (t Target) String() string {
	if t.Repository == "" {
		return t.Owner
	}
	return t.Owner + "/" + t.Repository
}

func (t Target) kind() string {
	if t.Repository == "" {
		return "organization"
	}
	return "repository"
}

func (t Target) runnersPath() string {
	if t.Repository == "" {
		return "/orgs/" + url.PathEscape(t.Owner) + "/actions/runners"
	}
	return "/repos/" + url.PathEscape(t.Owner) + "/" + url.PathEscape(t.Repository) + "/actions/runners"
}

// Token is a short-lived token returned by GitHub.
type Token struct {
	Value     string
	ExpiresAt time.Time
}

// Client creates runner tokens. It is safe for concurrent use.
type Client struct {
	baseURL string // without trailing slash
	http    *http.Client
	now     func() time.Time
	agent   string // User-Agent
	pat     string
	app     *appAuth      // nil when authenticating with pat
	backoff time.Duration // first retry wait; doubles each attempt
}

// New validates cfg and returns a client; errors name the offending setting.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.Token != "" && cfg.App != nil:
		return nil, errors.New("github: both github.token and github.app_id are set; set exactly one")
	case cfg.Token == "" && cfg.App == nil:
		return nil, errors.New("github: neither github.token nor github.app_id is set; set exactly one")
	}
	base, err := parseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{
		baseURL: base,
		http:    cfg.HTTPClient,
		now:     cfg.Now,
		agent:   userAgent(cfg.Version),
		pat:     cfg.Token,
		backoff: time.Second,
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	if c.now == nil {
		c.now = time.Now
	}
	if cfg.App != nil {
		if c.app, err = newAppAuth(*cfg.App); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// userAgent names the provider and its version, as GitHub asks of every
// client: the version tells which releases a GitHub-side problem affects.
func userAgent(version string) string {
	if version == "" {
		return Product
	}
	return Product + "/" + version
}

func parseBaseURL(raw string) (string, error) {
	if raw == "" {
		return defaultBaseURL, nil
	}
	if err := CheckURL(raw); err != nil {
		return "", fmt.Errorf("github.base_url: %w", err)
	}
	u, _ := url.Parse(raw) // checked
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("github.base_url: %q must not contain credentials, a query or a fragment", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// RegistrationToken creates a token with which a runner registers at t.
func (c *Client) RegistrationToken(ctx context.Context, t Target) (Token, error) {
	return c.runnerToken(ctx, t, "registration", "/registration-token")
}

// RemoveToken creates a token with which a runner unregisters from t.
func (c *Client) RemoveToken(ctx context.Context, t Target) (Token, error) {
	return c.runnerToken(ctx, t, "remove", "/remove-token")
}

func (c *Client) runnerToken(ctx context.Context, t Target, name, suffix string) (Token, error) {
	op := operation{
		what: fmt.Sprintf("create a %s token for %s %s", name, t.kind(), t),
		hint: func(status int) string { return targetHint(t, status) },
	}
	if t.Owner == "" {
		return Token{}, fmt.Errorf("%s: the owner is empty", op.what)
	}
	bearer, err := c.bearer(ctx)
	if err != nil {
		return Token{}, fmt.Errorf("%s: %w", op.what, err)
	}
	tok, err := c.post(ctx, op, t.runnersPath()+suffix, bearer)
	c.forgetRevoked(bearer, err)
	return tok, err
}

func (c *Client) bearer(ctx context.Context) (string, error) {
	if c.app == nil {
		return c.pat, nil
	}
	return c.installationToken(ctx)
}

// forgetRevoked drops an App's installation token GitHub answered 401
// to: revoked, it would otherwise stay cached until it expires.
func (c *Client) forgetRevoked(bearer string, err error) {
	if c.app != nil && statusOf(err) == http.StatusUnauthorized {
		c.app.forget(bearer)
	}
}

// operation describes an API call for error messages.
type operation struct {
	what string                  // e.g. "create a registration token for repository octo/app"
	hint func(status int) string // advice for a 4xx answer, "" for none
}

// post sends an authenticated POST without a body and decodes the token
// GitHub answers with, retrying server errors and rate limits.
func (c *Client) post(ctx context.Context, op operation, path, bearer string) (Token, error) {
	body, status, err := c.call(ctx, op, http.MethodPost, path, bearer)
	if err != nil {
		return Token{}, err
	}
	return decodeToken(op, status, body)
}

// call sends an authenticated request without a body and returns the body
// of a 2xx answer, retrying server errors and rate limits.
func (c *Client) call(ctx context.Context, op operation, method, path, bearer string) ([]byte, int, error) {
	return c.callWith(ctx, op, method, path, bearer, nil)
}

// callWith is call with a JSON request body (nil: none).
func (c *Client) callWith(ctx context.Context, op operation, method, path, bearer string, request []byte) ([]byte, int, error) {
	var (
		attempts, status int
		body             []byte
	)
	policy := retry.Policy{Backoff: retry.Backoff{First: c.backoff}, Attempts: maxAttempts}
	err := retry.Do(ctx, policy, func() error {
		attempts++
		var header http.Header
		var err error
		status, header, body, err = c.send(ctx, method, path, bearer, request)
		if err != nil {
			return retry.Permanent(fmt.Errorf("%s: %w", op.what, err))
		}
		if status >= 200 && status < 300 {
			return nil
		}
		plan := c.planRetry(status, header)
		return plan.retryable(newAPIError(op, status, body, plan, attempts, bearer))
	})
	var cut *retry.Interrupted
	switch {
	case errors.As(err, &cut):
		return nil, status, fmt.Errorf("%s: gave up waiting to retry after HTTP %d: %w", op.what, status, cut.Err)
	case err != nil:
		return nil, status, err
	}
	return body, status, nil
}

func (c *Client) send(ctx context.Context, method, path, bearer string, request []byte) (int, http.Header, []byte, error) {
	var reqBody io.Reader
	if request != nil {
		reqBody = bytes.NewReader(request)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, reqBody)
	if err != nil {
		return 0, nil, nil, err
	}
	if request != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", apiVersion)
	req.Header.Set("User-Agent", c.agent)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read the HTTP %d response: %w", resp.StatusCode, err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

// decodeToken never quotes the body: it holds the token.
func decodeToken(op operation, status int, body []byte) (Token, error) {
	var resp struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return Token{}, fmt.Errorf("%s: HTTP %d response is not the expected JSON object", op.what, status)
	}
	if resp.Token == "" {
		return Token{}, fmt.Errorf("%s: HTTP %d response has no token", op.what, status)
	}
	if resp.ExpiresAt == "" {
		return Token{}, fmt.Errorf("%s: HTTP %d response has no expires_at", op.what, status)
	}
	expires, err := time.Parse(time.RFC3339, resp.ExpiresAt)
	if err != nil {
		return Token{}, fmt.Errorf("%s: HTTP %d response has expires_at %q, which is not an RFC 3339 time", op.what, status, resp.ExpiresAt)
	}
	return Token{Value: resp.Token, ExpiresAt: expires}, nil
}
