package actionsoidc_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/actionsoidc"
)

// requestToken asks the token request endpoint for a token for audience
// ("": none), with bearer, as a job's step does; it returns the status
// and the token.
func requestToken(t *testing.T, iss *actionsoidc.Issuer, bearer, audience string) (int, string) {
	t.Helper()
	u := iss.RequestURL
	if audience != "" {
		u += "&audience=" + url.QueryEscape(audience)
	}
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Value string `json:"value"`
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, body.Value
}

// The token request endpoint mints, for the job's request token, a token
// of the job the test set, for the audience asked for (GitHub's default
// without one), which a verifier of the issuer takes; another bearer gets
// 401.
func TestTokenRequestEndpoint(t *testing.T) {
	t.Parallel()
	iss := actionsoidc.New(t)
	if status, _ := requestToken(t, iss, iss.RequestToken, "ec2runners"); status != http.StatusNotFound {
		t.Errorf("before SetJob: HTTP %d, want 404", status)
	}
	iss.SetJob(iss.Job("octo/app", 4242, ""))

	status, tok := requestToken(t, iss, iss.RequestToken, "ec2runners")
	if status != http.StatusOK {
		t.Fatalf("HTTP %d", status)
	}
	id, err := broker.NewVerifier(iss.URL, "ec2runners").Verify(context.Background(), tok)
	if err != nil || id.Repository != "octo/app" || id.RunID != 4242 {
		t.Errorf("the minted token verifies as %+v (%v), want octo/app's run 4242", id, err)
	}

	if _, tok := requestToken(t, iss, iss.RequestToken, ""); tok == "" {
		t.Error("no token without an audience")
	} else if _, err := broker.NewVerifier(iss.URL, "ec2runners").Verify(context.Background(), tok); err == nil {
		t.Error("a token requested without an audience is for the broker's")
	}
	if status, tok := requestToken(t, iss, "not-the-job's", "ec2runners"); status != http.StatusUnauthorized || tok != "" {
		t.Errorf("another bearer: HTTP %d, token %q; want 401", status, tok)
	}
}
