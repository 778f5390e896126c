package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
)

// The provider hands its version to the GitHub access claims use, whose
// requests then name it in their User-Agent (the AWS clients' are checked in
// internal/awsconfig, and with a release build in internal/testworld/release).
func TestGitHubAccessCarriesProviderVersion(t *testing.T) {
	var agent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent = r.Header.Get("User-Agent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"token":"AABB","expires_at":"2030-01-01T00:00:00Z"}`))
	}))
	defer srv.Close()
	m := &githubModel{Token: types.StringValue("ghp_test"), BaseURL: types.StringValue(srv.URL), Owner: types.StringValue("octo")}
	gh, diags := m.access("9.9.9")
	if diags.HasError() || gh == nil {
		t.Fatalf("access: %v", diags)
	}
	if _, err := gh.Tokens.RegistrationToken(context.Background(), github.Target{Owner: "octo", Repository: "app"}); err != nil {
		t.Fatal(err)
	}
	if want := "terraform-provider-ec2runners/9.9.9"; agent != want {
		t.Errorf("User-Agent = %q, want %q", agent, want)
	}
}
