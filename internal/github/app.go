package github

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

const (
	// GitHub rejects App JWTs valid for more than 10 minutes; iat is backdated
	// to tolerate clock drift, as GitHub recommends.
	jwtBackdate = 60 * time.Second
	jwtLifetime = 9 * time.Minute
	// Refresh early so a token handed to a runner does not expire mid-use.
	installationTokenMargin = 5 * time.Minute
)

// appAuth authenticates as a GitHub App installation and caches the
// installation token.
type appAuth struct {
	appID          int64
	installationID int64
	key            *rsa.PrivateKey

	mu     sync.Mutex
	cached Token
}

func newAppAuth(cfg AppAuth) (*appAuth, error) {
	if cfg.AppID <= 0 {
		return nil, fmt.Errorf("github.app_id: must be a positive number, got %d", cfg.AppID)
	}
	if cfg.InstallationID <= 0 {
		return nil, fmt.Errorf("github.installation_id: must be a positive number, got %d", cfg.InstallationID)
	}
	key, err := parsePrivateKey(cfg.PrivateKeyPEM)
	if err != nil {
		return nil, err
	}
	return &appAuth{appID: cfg.AppID, installationID: cfg.InstallationID, key: key}, nil
}

func parsePrivateKey(text string) (*rsa.PrivateKey, error) {
	const notRSA = "github.private_key: not a PEM-encoded RSA private key"
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, errors.New(notRSA)
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", notRSA, err)
		}
		return key, nil
	case "PRIVATE KEY":
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", notRSA, err)
		}
		rsaKey, ok := key.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: the PKCS#8 key is a %T", notRSA, key)
		}
		return rsaKey, nil
	}
	return nil, fmt.Errorf("%s: found a %q PEM block", notRSA, block.Type)
}

// jwt signs the RS256 token that authenticates as the App itself.
func (a *appAuth) jwt(now time.Time) (string, error) {
	claims, err := json.Marshal(struct {
		IssuedAt  int64  `json:"iat"`
		ExpiresAt int64  `json:"exp"`
		Issuer    string `json:"iss"`
	}{now.Add(-jwtBackdate).Unix(), now.Add(jwtLifetime).Unix(), strconv.FormatInt(a.appID, 10)})
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(nil, a.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("sign the GitHub App JWT: %w", err)
	}
	return signed + "." + enc.EncodeToString(sig), nil
}

// installationToken returns the cached installation token, exchanging a new
// JWT for one when it is close to expiry. The lock is held across the
// exchange so concurrent callers share a single new token.
func (c *Client) installationToken(ctx context.Context) (string, error) {
	a := c.app
	a.mu.Lock()
	defer a.mu.Unlock()
	now := c.now()
	if a.cached.Value != "" && now.Before(a.cached.ExpiresAt.Add(-installationTokenMargin)) {
		return a.cached.Value, nil
	}
	jwt, err := a.jwt(now)
	if err != nil {
		return "", err
	}
	op := operation{
		what: fmt.Sprintf("create an installation access token for GitHub App %d (installation %d)", a.appID, a.installationID),
		hint: func(status int) string { return installationHint(a, status) },
	}
	tok, err := c.post(ctx, op, fmt.Sprintf("/app/installations/%d/access_tokens", a.installationID), jwt)
	if err != nil {
		return "", err
	}
	a.cached = tok
	return tok.Value, nil
}

// forget drops token from the cache if it is still the cached one.
func (a *appAuth) forget(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cached.Value == token {
		a.cached = Token{}
	}
}
