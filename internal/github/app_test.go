package github

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	appID          = 123
	installationID = 42
	exchangePath   = "/app/installations/42/access_tokens"
	registerPath   = "/repos/octo/app/actions/runners/registration-token"
)

var start = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)

// appStub plays GitHub for App auth: it verifies each JWT, hands out
// numbered installation tokens valid for an hour, and accepts only the
// latest one for runner tokens.
type appStub struct {
	*stub
	t     *testing.T
	clock *clock
	key   *rsa.PublicKey

	mu        sync.Mutex
	exchanges int
	jwts      []string
	current   string
}

func newAppStub(t *testing.T, clk *clock, key *rsa.PublicKey) *appStub {
	a := &appStub{t: t, clock: clk, key: key}
	a.stub = newStub(t, a.serve)
	return a
}

func (a *appStub) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch r.URL.Path {
	case exchangePath:
		a.jwts = append(a.jwts, bearer)
		if err := a.verifyJWT(bearer); err != nil {
			a.t.Errorf("JWT rejected: %v", err)
			reply(w, http.StatusUnauthorized, `{"message":"A JSON web token could not be decoded"}`)
			return
		}
		a.exchanges++
		a.current = fmt.Sprintf("ghs_installation%d", a.exchanges)
		replyToken(w, a.current, a.clock.Now().Add(time.Hour).Format(time.RFC3339))
	case registerPath:
		if bearer != a.current {
			reply(w, http.StatusUnauthorized, `{"message":"Bad credentials"}`)
			return
		}
		replyToken(w, regSecret, expiresAt)
	default:
		reply(w, http.StatusNotFound, `{"message":"Not Found"}`)
	}
}

func (a *appStub) verifyJWT(jwt string) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return fmt.Errorf("%d parts, want 3", len(parts))
	}
	enc := base64.RawURLEncoding
	header, err := enc.DecodeString(parts[0])
	if err != nil || string(header) != `{"alg":"RS256","typ":"JWT"}` {
		return fmt.Errorf("header %q (%v)", header, err)
	}
	sig, err := enc.DecodeString(parts[2])
	if err != nil {
		return err
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(a.key, crypto.SHA256, digest[:], sig); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	payload, err := enc.DecodeString(parts[1])
	if err != nil {
		return err
	}
	var claims struct {
		IssuedAt  int64  `json:"iat"`
		ExpiresAt int64  `json:"exp"`
		Issuer    string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return fmt.Errorf("claims %s: %w", payload, err)
	}
	now := a.clock.Now()
	if claims.Issuer != "123" || claims.IssuedAt != now.Unix()-60 || claims.ExpiresAt != now.Unix()+9*60 {
		return fmt.Errorf("claims %s, want iss 123, iat %d, exp %d", payload, now.Unix()-60, now.Unix()+540)
	}
	return nil
}

func (a *appStub) exchangeCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exchanges
}

func TestAppAuth(t *testing.T) {
	key := testKey()
	for name, pemText := range map[string]string{"PKCS#1": pkcs1PEM(key), "PKCS#8": pkcs8PEM(t, key)} {
		t.Run(name, func(t *testing.T) {
			clk := &clock{now: start}
			s := newAppStub(t, clk, &key.PublicKey)
			c := newTestClient(t, Config{
				BaseURL: s.URL,
				App:     &AppAuth{AppID: appID, InstallationID: installationID, PrivateKeyPEM: pemText},
				Now:     clk.Now,
			})
			register := func(wantExchanges int, wantAuth string) {
				t.Helper()
				tok, err := c.RegistrationToken(context.Background(), Target{"octo", "app"})
				if err != nil {
					t.Fatal(err)
				}
				if tok.Value != regSecret || !tok.ExpiresAt.Equal(wantExpiry) {
					t.Errorf("token = %q expiring %v", tok.Value, tok.ExpiresAt)
				}
				if got := s.exchangeCount(); got != wantExchanges {
					t.Errorf("installation token exchanges = %d, want %d", got, wantExchanges)
				}
				reqs := s.requests()
				last := reqs[len(reqs)-1]
				if last.method != http.MethodPost || last.path != registerPath {
					t.Errorf("last request = %s %s", last.method, last.path)
				}
				assertHeaders(t, last.header, "Bearer "+wantAuth)
			}

			register(1, "ghs_installation1")
			exchange := s.requests()[0]
			if exchange.method != http.MethodPost || exchange.path != exchangePath {
				t.Errorf("exchange request = %s %s, want POST %s", exchange.method, exchange.path, exchangePath)
			}
			assertHeaders(t, exchange.header, "Bearer "+s.jwts[0])

			register(1, "ghs_installation1")
			clk.Set(start.Add(55*time.Minute - time.Second))
			register(1, "ghs_installation1")
			clk.Set(start.Add(55 * time.Minute))
			register(2, "ghs_installation2")
		})
	}
}

func TestAppAuthRefetchesAfterRevokedInstallationToken(t *testing.T) {
	key := testKey()
	clk := &clock{now: start}
	s := newAppStub(t, clk, &key.PublicKey)
	c := newTestClient(t, Config{
		BaseURL: s.URL,
		App:     &AppAuth{AppID: appID, InstallationID: installationID, PrivateKeyPEM: pkcs1PEM(key)},
		Now:     clk.Now,
	})
	target := Target{"octo", "app"}
	if _, err := c.RegistrationToken(context.Background(), target); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.current = "ghs_revoked"
	s.mu.Unlock()

	_, err := c.RegistrationToken(context.Background(), target)
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || strings.Contains(err.Error(), "ghs_installation1") {
		t.Fatalf("err = %v, want a 401 without the installation token", err)
	}
	if _, err := c.RegistrationToken(context.Background(), target); err != nil {
		t.Fatalf("after a 401 the next call should fetch a new installation token: %v", err)
	}
	if got := s.exchangeCount(); got != 2 {
		t.Errorf("exchanges = %d, want 2", got)
	}
}

func TestAppAuthExchangeError(t *testing.T) {
	key := testKey()
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusUnauthorized, `{"message":"'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"}`)
	})
	c := newTestClient(t, Config{
		BaseURL: s.URL,
		App:     &AppAuth{AppID: appID, InstallationID: installationID, PrivateKeyPEM: pkcs1PEM(key)},
		Now:     func() time.Time { return start },
	})
	_, err := c.RegistrationToken(context.Background(), Target{"octo", "app"})
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, want := range []string{
		"create a registration token for repository octo/app: create an installation access token for GitHub App 123 (installation 42): HTTP 401 Unauthorized",
		"'Issued at' claim",
		"check github.app_id and github.private_key",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("err = %q, want it to contain %q", msg, want)
		}
	}
	reqs := s.requests()
	if len(reqs) != 1 {
		t.Fatalf("sent %d requests, want 1 (no retry, no registration call)", len(reqs))
	}
	if jwt := strings.TrimPrefix(reqs[0].header.Get("Authorization"), "Bearer "); jwt == "" || strings.Contains(msg, jwt) {
		t.Errorf("err leaks the JWT: %q", msg)
	}
}
