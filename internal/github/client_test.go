package github

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

func TestEndpoints(t *testing.T) {
	cases := []struct {
		name   string
		target Target
		remove bool
		path   string
	}{
		{"repository registration", Target{"octo", "app"}, false, "/repos/octo/app/actions/runners/registration-token"},
		{"repository remove", Target{"octo", "app"}, true, "/repos/octo/app/actions/runners/remove-token"},
		{"organization registration", Target{"octo", ""}, false, "/orgs/octo/actions/runners/registration-token"},
		{"organization remove", Target{"octo", ""}, true, "/orgs/octo/actions/runners/remove-token"},
		{"escaped segments", Target{"oc to", "a/b?c"}, false, "/repos/oc%20to/a%2Fb%3Fc/actions/runners/registration-token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStub(t, func(w http.ResponseWriter, r *http.Request) { replyToken(w, regSecret, expiresAt) })
			c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
			call := c.RegistrationToken
			if tc.remove {
				call = c.RemoveToken
			}
			tok, err := call(context.Background(), tc.target)
			if err != nil {
				t.Fatal(err)
			}
			if tok.Value != regSecret || !tok.ExpiresAt.Equal(wantExpiry) {
				t.Errorf("token = %q expiring %v, want %q expiring %v", tok.Value, tok.ExpiresAt, regSecret, wantExpiry)
			}
			reqs := s.requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			if reqs[0].method != http.MethodPost || reqs[0].path != tc.path {
				t.Errorf("request = %s %s, want POST %s", reqs[0].method, reqs[0].path, tc.path)
			}
			assertHeaders(t, reqs[0].header, "Bearer "+pat)
		})
	}
}

func assertHeaders(t *testing.T, h http.Header, auth string) {
	t.Helper()
	want := map[string]string{
		"Accept":               "application/vnd.github+json",
		"X-Github-Api-Version": "2022-11-28",
		"User-Agent":           "terraform-provider-ec2runners",
		"Authorization":        auth,
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

func TestEnterpriseBaseURL(t *testing.T) {
	for _, suffix := range []string{"/api/v3", "/api/v3/"} {
		t.Run(suffix, func(t *testing.T) {
			s := newStub(t, func(w http.ResponseWriter, r *http.Request) { replyToken(w, regSecret, expiresAt) })
			c := newTestClient(t, Config{BaseURL: s.URL + suffix, Token: pat})
			if _, err := c.RemoveToken(context.Background(), Target{"octo", "app"}); err != nil {
				t.Fatal(err)
			}
			if got, want := s.requests()[0].path, "/api/v3/repos/octo/app/actions/runners/remove-token"; got != want {
				t.Errorf("path = %s, want %s", got, want)
			}
		})
	}
}

func TestDefaultBaseURL(t *testing.T) {
	c := newTestClient(t, Config{Token: pat})
	if c.baseURL != "https://api.github.com" {
		t.Errorf("baseURL = %q", c.baseURL)
	}
}

func TestTargetString(t *testing.T) {
	if got := (Target{"octo", "app"}).String(); got != "octo/app" {
		t.Errorf("repository target = %q", got)
	}
	if got := (Target{Owner: "octo"}).String(); got != "octo" {
		t.Errorf("organization target = %q", got)
	}
}

func TestEmptyOwnerIsRejectedWithoutARequest(t *testing.T) {
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) { replyToken(w, regSecret, expiresAt) })
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	_, err := c.RegistrationToken(context.Background(), Target{Repository: "app"})
	if err == nil || !strings.Contains(err.Error(), "owner is empty") {
		t.Fatalf("err = %v, want an empty-owner error", err)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("sent %d requests, want 0", n)
	}
}

func TestNewValidation(t *testing.T) {
	key := pkcs1PEM(testKey())
	app := func(appID, installationID int64, pemText string) *AppAuth {
		return &AppAuth{AppID: appID, InstallationID: installationID, PrivateKeyPEM: pemText}
	}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"both credentials", Config{Token: pat, App: app(1, 2, key)}, "both github.token and github.app_id are set"},
		{"no credential", Config{}, "neither github.token nor github.app_id is set"},
		{"zero app id", Config{App: app(0, 2, key)}, "github.app_id: must be a positive number, got 0"},
		{"negative installation id", Config{App: app(1, -2, key)}, "github.installation_id: must be a positive number, got -2"},
		{"not PEM", Config{App: app(1, 2, "-----BEGIN nonsense")}, "github.private_key: not a PEM-encoded RSA private key"},
		{"wrong PEM type", Config{App: app(1, 2, strings.ReplaceAll(key, "RSA PRIVATE KEY", "CERTIFICATE"))}, `github.private_key: not a PEM-encoded RSA private key: found a "CERTIFICATE" PEM block`},
		{"corrupt PKCS#1", Config{App: app(1, 2, strings.ReplaceAll(key, "RSA PRIVATE KEY", "PRIVATE KEY"))}, "github.private_key: not a PEM-encoded RSA private key: x509"},
		{"ECDSA PKCS#8", Config{App: app(1, 2, pkcs8PEM(t, ecdsaKey(t)))}, "github.private_key: not a PEM-encoded RSA private key: the PKCS#8 key is a *ecdsa.PrivateKey"},
		{"base URL scheme", Config{Token: pat, BaseURL: "ftp://github.example.com"}, "github.base_url:"},
		{"base URL without host", Config{Token: pat, BaseURL: "https:///api/v3"}, "github.base_url:"},
		{"base URL not a URL", Config{Token: pat, BaseURL: "github.example.com/api/v3"}, "github.base_url:"},
		{"base URL with query", Config{Token: pat, BaseURL: "https://github.example.com/api/v3?x=1"}, "github.base_url:"},
		{"base URL over plain http", Config{Token: pat, BaseURL: "http://github.example.com/api/v3"}, "github.base_url: \"http://github.example.com/api/v3\" uses plain http://"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cfg)
			if err == nil {
				t.Fatalf("New succeeded (%+v), want error containing %q", c, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), pat) || strings.Contains(err.Error(), "PRIVATE KEY-----") {
				t.Errorf("err leaks a secret: %q", err)
			}
		})
	}
}

// Every request, the App's token exchange included, names the provider's
// version in its User-Agent.
func TestUserAgentCarriesVersion(t *testing.T) {
	t.Run("token", func(t *testing.T) {
		s := newStub(t, func(w http.ResponseWriter, r *http.Request) { replyToken(w, regSecret, expiresAt) })
		c := newTestClient(t, Config{BaseURL: s.URL, Token: pat, Version: "1.2.3"})
		if _, err := c.RegistrationToken(context.Background(), Target{"octo", "app"}); err != nil {
			t.Fatal(err)
		}
		if got, want := s.requests()[0].header.Get("User-Agent"), "terraform-provider-ec2runners/1.2.3"; got != want {
			t.Errorf("User-Agent = %q, want %q", got, want)
		}
	})
	t.Run("app", func(t *testing.T) {
		key := testKey()
		clk := &clock{now: start}
		s := newAppStub(t, clk, &key.PublicKey)
		c := newTestClient(t, Config{
			BaseURL: s.URL, Version: "1.2.3", Now: clk.Now,
			App: &AppAuth{AppID: appID, InstallationID: installationID, PrivateKeyPEM: pkcs1PEM(key)},
		})
		if _, err := c.RegistrationToken(context.Background(), Target{"octo", "app"}); err != nil {
			t.Fatal(err)
		}
		reqs := s.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d requests, want the exchange and the registration token", len(reqs))
		}
		for _, r := range reqs {
			if got, want := r.header.Get("User-Agent"), "terraform-provider-ec2runners/1.2.3"; got != want {
				t.Errorf("%s: User-Agent = %q, want %q", r.path, got, want)
			}
		}
	})
}
