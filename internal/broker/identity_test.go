package broker

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/actionsoidc"
)

// A token GitHub would issue to a job, for the broker's audience, gives
// the identity of that job's repository, run attempt and workflow.
func TestVerifyGivesTheJobsIdentity(t *testing.T) {
	t.Parallel()
	iss := actionsoidc.New(t)
	c := iss.Job("octo/app", 4242, DefaultAudience)
	c.RunAttempt = "3"
	c.JobWorkflowRef = "octo/shared/.github/workflows/build.yml@refs/tags/v1"
	c.EventName, c.Ref = "pull_request", "refs/pull/7/merge"
	id, err := NewVerifier(iss.URL, "").Verify(context.Background(), iss.Mint(c))
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{
		Repository: "octo/app", Owner: "octo", RunID: 4242, RunAttempt: 3,
		WorkflowRef: "octo/app/.github/workflows/ci.yml@refs/heads/main", JobWorkflowRef: "octo/shared/.github/workflows/build.yml@refs/tags/v1",
		Event: "pull_request", Ref: "refs/pull/7/merge",
	}
	if id != want {
		t.Errorf("identity %+v, want %+v", id, want)
	}
}

// Every token that is not GitHub's, for this audience and still valid, is
// refused (ErrorDenied), saying why.
func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	iss := actionsoidc.New(t)
	other := actionsoidc.New(t)
	job := iss.Job("octo/app", 4242, DefaultAudience)
	with := func(change func(*actionsoidc.Claims)) actionsoidc.Claims {
		c := job
		change(&c)
		return c
	}
	for _, tc := range []struct {
		name, token, wantErr string
	}{
		{"expired", iss.Expired(job), "token is expired"},
		{"wrong audience", iss.WrongAudience(job), `expected audience "ec2runners"`},
		{"another audience asked for", iss.Mint(with(func(c *actionsoidc.Claims) { c.Audience = "sts.amazonaws.com" })), `expected audience "ec2runners"`},
		{"wrong issuer", iss.Mint(with(func(c *actionsoidc.Claims) { c.Issuer = DefaultIssuer })), "issued by a different provider"},
		{"another issuer's token", other.Mint(with(func(c *actionsoidc.Claims) { c.Issuer = "" })), "failed to verify id token signature"},
		{"other key", iss.OtherKey(job), "failed to verify id token signature"},
		{"alg none", iss.AlgNone(job), `unexpected signature algorithm "none"`},
		{"HS256", iss.HS256(job), `unexpected signature algorithm "HS256"`},
		{"not yet valid", iss.Mint(with(func(c *actionsoidc.Claims) {
			c.NotBefore, c.Expiry = time.Now().Add(time.Hour).Unix(), time.Now().Add(2*time.Hour).Unix()
		})), "before the nbf"},
		{"issued in the future", iss.Mint(with(func(c *actionsoidc.Claims) {
			c.IssuedAt, c.NotBefore, c.Expiry = time.Now().Add(time.Hour).Unix(), time.Now().Unix(), time.Now().Add(2*time.Hour).Unix()
		})), "issued in the future"},
		{"no repository", iss.Mint(with(func(c *actionsoidc.Claims) { c.Repository = "" })), "its repository claim"},
		{"repository of another owner", iss.Mint(with(func(c *actionsoidc.Claims) { c.RepositoryOwner = "mallory" })), `not of its repository_owner claim "mallory"`},
		{"no run", iss.Mint(with(func(c *actionsoidc.Claims) { c.RunID = "" })), "run_id claim"},
		{"no run attempt", iss.Mint(with(func(c *actionsoidc.Claims) { c.RunAttempt = "0" })), "run_attempt claim"},
		{"none", "", "id-token: write"},
		{"not a JWT", "not.a.jwt", "malformed jwt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id, err := NewVerifier(iss.URL, DefaultAudience).Verify(context.Background(), tc.token)
			var e *Error
			if !errors.As(err, &e) || e.Kind != ErrorDenied || !strings.Contains(e.Message, tc.wantErr) {
				t.Fatalf("Verify = %+v, %v; want %s: %q", id, err, ErrorDenied, tc.wantErr)
			}
			if !strings.Contains(e.Message, "not a GitHub Actions OIDC token of "+iss.URL+` for audience "ec2runners"`) {
				t.Errorf("message %q names neither the issuer nor the audience", e.Message)
			}
		})
	}
}

// The issuer's keys are fetched once and kept: GitHub is asked once per
// Lambda container, not once per claim.
func TestVerifyCachesTheIssuersKeys(t *testing.T) {
	t.Parallel()
	iss := actionsoidc.New(t)
	v := NewVerifier(iss.URL, DefaultAudience)
	for run := int64(1); run <= 3; run++ {
		if _, err := v.Verify(context.Background(), iss.Mint(iss.Job("octo/app", run, DefaultAudience))); err != nil {
			t.Fatal(err)
		}
	}
	if n := iss.JWKSFetches(); n != 1 {
		t.Errorf("the keys were fetched %d times for 3 tokens, want once", n)
	}
}

// An issuer that cannot be reached is a failure to retry, not a refused
// token.
func TestVerifyWithoutIssuerFails(t *testing.T) {
	t.Parallel()
	gone := httptest.NewServer(nil)
	gone.Close()
	_, err := NewVerifier(gone.URL, DefaultAudience).Verify(context.Background(), "a.b.c")
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrorFailed || !strings.Contains(e.Message, "cannot read the discovery document of the OIDC issuer "+gone.URL) {
		t.Fatalf("Verify = %v, want %s naming the issuer", err, ErrorFailed)
	}
}
