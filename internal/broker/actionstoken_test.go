package broker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
)

// env is a job's environment.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestActionsToken: the token is requested as GitHub documents, for the
// audience asked, keeping the query GitHub's URL carries.
func TestActionsToken(t *testing.T) {
	var asked *http.Request
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r
		if r.Header.Get("Authorization") != "Bearer request-token" {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"count":1,"value":"eyJ.jwt.` + r.URL.Query().Get("audience") + `"}`))
	}))
	defer server.Close()
	src := broker.ActionsToken{Getenv: env(map[string]string{
		"GITHUB_ACTIONS":                 "true",
		"ACTIONS_ID_TOKEN_REQUEST_URL":   server.URL + "/_apis/token?api-version=2.0",
		"ACTIONS_ID_TOKEN_REQUEST_TOKEN": "request-token",
	})}
	token, err := src.IDToken(context.Background(), "ec2runners")
	if err != nil {
		t.Fatal(err)
	}
	if token != "eyJ.jwt.ec2runners" {
		t.Errorf("token %q", token)
	}
	if asked.Method != http.MethodGet || asked.URL.Path != "/_apis/token" || asked.URL.Query().Get("api-version") != "2.0" || asked.URL.Query().Get("audience") != "ec2runners" {
		t.Errorf("asked %s %s", asked.Method, asked.URL)
	}
}

// TestActionsTokenRefusals: each way a job gets no token says why.
func TestActionsTokenRefusals(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("audience") {
		case "empty":
			_, _ = w.Write([]byte(`{"value":""}`))
		case "html":
			_, _ = w.Write([]byte(`<html>`))
		default:
			http.Error(w, `{"message":"Token expired"}`, http.StatusUnauthorized)
		}
	}))
	defer server.Close()
	inJob := map[string]string{"GITHUB_ACTIONS": "true", "ACTIONS_ID_TOKEN_REQUEST_URL": server.URL + "/token?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"}
	for name, tc := range map[string]struct {
		vars     map[string]string
		audience string
		want     string
	}{
		"outside Actions":         {map[string]string{}, "ec2runners", "this is not a GitHub Actions job"},
		"without id-token: write": {map[string]string{"GITHUB_ACTIONS": "true"}, "ec2runners", "give the job (or the workflow) `permissions: id-token: write`"},
		"request token refused":   {inJob, "ec2runners", `HTTP 401: {"message":"Token expired"}`},
		"answer without a token":  {inJob, "empty", "without a token"},
		"answer that is not JSON": {inJob, "html", `not the documented {"value": ...}`},
		"request URL not a URL":   {map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": "http://[::1", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"}, "ec2runners", "ACTIONS_ID_TOKEN_REQUEST_URL is not a URL"},
		"request token alone":     {map[string]string{"GITHUB_ACTIONS": "true", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"}, "ec2runners", "id-token: write"},
		"request URL unreachable": {map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": "http://127.0.0.1:1/token", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"}, "ec2runners", "requesting the job's OIDC token from GitHub"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := broker.ActionsToken{Getenv: env(tc.vars)}.IDToken(context.Background(), tc.audience)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
