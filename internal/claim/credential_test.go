package claim

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// fakeParameters is SSM holding parameters by name (or refusing every
// read with err), counting the reads.
type fakeParameters struct {
	mu     sync.Mutex
	values map[string]string
	err    error
	reads  int
}

func (f *fakeParameters) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	v, ok := f.values[aws.ToString(in.Name)]
	if !ok || !aws.ToBool(in.WithDecryption) {
		return nil, &smithy.GenericAPIError{Code: "ParameterNotFound", Message: ""}
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: in.Name, Value: aws.String(v)}}, nil
}

// fakeSecrets is Secrets Manager holding one secret.
type fakeSecrets struct{ id, value string }

func (f fakeSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	if aws.ToString(in.SecretId) != f.id {
		return nil, &smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "Secrets Manager can't find the specified secret."}
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(f.value)}, nil
}

// tokenServer is GitHub's REST API minting runner tokens for octo/app to
// whoever shows token; it records the tokens it minted.
func tokenServer(t *testing.T, token string) (url string, minted func() []string) {
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		kind := strings.TrimPrefix(r.URL.Path, "/repos/octo/app/actions/runners/")
		if r.Method != http.MethodPost || kind == r.URL.Path {
			http.NotFound(w, r) // the runner's releases: not needed
			return
		}
		mu.Lock()
		calls = append(calls, kind)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"token": "AREG-" + kind, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), calls...) }
}

// A provider without GitHub credentials mints the runners' tokens with
// the one the pool keeps in SSM, read once for the claim and its release.
func TestStoredCredentialMintsTheTokens(t *testing.T) {
	t.Parallel()
	url, minted := tokenServer(t, "ghp_stored")
	params := &fakeParameters{values: map[string]string{"/ec2runners/testpool/github": `{"owner": "octo", "repository": "app", "token": "ghp_stored"}`}}
	e := tokenEnv(t, nil)
	e.cfg.GitHubCredential = &protocol.GitHubCredential{SSMParameter: "/ec2runners/testpool/github"}
	e.writeConfig()
	e.c.StoredGitHub = &StoredGitHub{SSM: params, Client: github.Config{BaseURL: url}}
	e.seedIdle("i-1", healthy)
	if _, err := e.create(1); err != nil {
		t.Fatal(err)
	}
	e.assertToken(t, "i-1", protocol.SortKeyRegistrationToken, "AREG-registration-token")
	if _, err := e.c.Release(context.Background(), testPool, testRun); err != nil {
		t.Fatal(err)
	}
	if got := minted(); strings.Join(got, ",") != "registration-token,remove-token" {
		t.Errorf("GitHub minted %v, want a registration and a removal token", got)
	}
	if params.reads != 1 {
		t.Errorf("the parameter was read %d times, want once", params.reads)
	}
}

// The provider's own credentials win over the pool's: the stored one is
// not even read.
func TestProviderCredentialsWinOverTheStoredOne(t *testing.T) {
	t.Parallel()
	params := &fakeParameters{}
	tokens := &fakeTokens{}
	e := tokenEnv(t, tokens)
	e.cfg.GitHubCredential = &protocol.GitHubCredential{SSMParameter: "/ec2runners/testpool/github"}
	e.writeConfig()
	e.c.StoredGitHub = &StoredGitHub{SSM: params}
	e.seedIdle("i-1", healthy)
	if _, err := e.create(1); err != nil {
		t.Fatal(err)
	}
	if params.reads != 0 || len(tokens.Issued()) != 1 {
		t.Errorf("%d reads of the stored credential and tokens %v, want none and one from the provider's", params.reads, tokens.Issued())
	}
}

// A claim fails before it touches a runner when the stored credential
// cannot be read or used, and says why; never with the credential's text.
func TestStoredCredentialRefused(t *testing.T) {
	t.Parallel()
	const param = "/ec2runners/testpool/github"
	denied := &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User: arn:aws:sts::000000000000:assumed-role/ci/run is not authorized to perform: ssm:GetParameter"}
	for _, tc := range []struct {
		name    string
		cred    protocol.GitHubCredential
		store   *StoredGitHub
		wantErr []string
	}{
		{"denied", protocol.GitHubCredential{SSMParameter: param}, &StoredGitHub{SSM: &fakeParameters{err: denied}},
			[]string{"pool testpool registers its runners with GitHub octo/app", "may not read the pool's GitHub credential, SSM parameter " + param,
				"grant the role ssm:GetParameter on it (and kms:Decrypt on its key", "AccessDeniedException"}},
		{"missing", protocol.GitHubCredential{SSMParameter: param}, &StoredGitHub{SSM: &fakeParameters{}},
			[]string{"cannot read the pool's GitHub credential, SSM parameter " + param, "ParameterNotFound"}},
		{"notJSON", protocol.GitHubCredential{SSMParameter: param}, &StoredGitHub{SSM: &fakeParameters{values: map[string]string{param: "ghp_secretvalue"}}},
			[]string{"the GitHub credential in SSM parameter " + param + ": it must be a JSON object", "not JSON"}},
		{"otherOwner", protocol.GitHubCredential{SecretsManagerSecret: "ec2runners/testpool"},
			&StoredGitHub{SecretsManager: fakeSecrets{id: "ec2runners/testpool", value: `{"owner": "mallory", "token": "ghp_secretvalue"}`}},
			[]string{`the GitHub credential in Secrets Manager secret ec2runners/testpool mints tokens only for its owner "mallory"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := tokenEnv(t, nil)
			e.cfg.GitHubCredential = &tc.cred
			e.writeConfig()
			e.c.StoredGitHub = tc.store
			e.seedIdle("i-1", healthy)
			_, err := e.create(1)
			for _, want := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("claim error = %v, want it to say %q", err, want)
				}
			}
			if err != nil && strings.Contains(err.Error(), "secretvalue") {
				t.Errorf("the error quotes the credential: %v", err)
			}
			if r := e.db.instance(t, "i-1"); r.State != protocol.StateIdle || r.RunID != "" {
				t.Errorf("i-1 is %s for %q: touched by a claim that had no token", r.State, r.RunID)
			}
		})
	}
}

func TestParseStoredCredential(t *testing.T) {
	for _, tc := range []struct {
		value, wantErr string
	}{
		{`{"owner": "octo", "token": "ghp_x"}`, ""},
		{`{"owner": "octo", "repository": "app", "app_id": 1, "installation_id": 2, "private_key": "PEM"}`, ""},
		{`{"owner": "octo", "token": "ghp_x", "app_id": 1}`, `either "token" or "app_id"`},
		{`{"owner": "octo"}`, `either "token" or "app_id"`},
		{`{"owner": "octo", "app_id": 1, "private_key": "PEM"}`, `"installation_id" (positive numbers)`},
		{`{"token": "ghp_x"}`, `"owner" must be a GitHub user or organization`},
		{`{"owner": "octo", "repository": "a b", "token": "ghp_x"}`, `"repository" must be a repository name`},
		{`{"owner": "octo", "tokn": "ghp_x"}`, `unknown field "tokn"`},
		{`ghp_x`, "not JSON (at byte 1)"},
	} {
		_, err := parseStoredCredential(tc.value)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.value, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want it to say %q", tc.value, err, tc.wantErr)
		case err != nil && strings.Contains(err.Error(), "ghp_x"):
			t.Errorf("%s: the error quotes the credential: %v", tc.value, err)
		}
	}
}
