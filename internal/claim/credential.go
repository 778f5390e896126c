package claim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// SSMClient is the part of the SSM API that reads a pool's GitHub
// credential.
type SSMClient interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// SecretsManagerClient is the part of the Secrets Manager API that reads a
// pool's GitHub credential.
type SecretsManagerClient interface {
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// storedCredential is the value of a pool's GitHub credential, JSON: the
// owner it mints runner tokens for (and the repository, when only one),
// with a token or a GitHub App installation's key. The owner is the
// credential's, not the table's, for the reason of GitHubAccess.
type storedCredential struct {
	Owner          string `json:"owner"`
	Repository     string `json:"repository,omitempty"`
	Token          string `json:"token,omitempty"`
	AppID          int64  `json:"app_id,omitempty"`
	InstallationID int64  `json:"installation_id,omitempty"`
	PrivateKey     string `json:"private_key,omitempty"`
}

// parseStoredCredential reads a credential's value; its errors never quote
// the value.
func parseStoredCredential(value string) (storedCredential, error) {
	var c storedCredential
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			err = fmt.Errorf("not JSON (at byte %d)", syntax.Offset)
		}
		return c, fmt.Errorf(`it must be a JSON object {"owner", "repository", and "token" or "app_id", "installation_id" and "private_key"}: %w`, err)
	}
	app := c.AppID != 0 || c.InstallationID != 0 || c.PrivateKey != ""
	switch {
	case !protocol.GitHubOwnerPattern.MatchString(c.Owner):
		return c, fmt.Errorf(`its "owner" must be a GitHub user or organization, got %q`, c.Owner)
	case c.Repository != "" && !protocol.GitHubRepositoryPattern.MatchString(c.Repository):
		return c, fmt.Errorf(`its "repository" must be a repository name of the owner, got %q`, c.Repository)
	case (c.Token != "") == app:
		return c, errors.New(`it must hold either "token" or "app_id", "installation_id" and "private_key"`)
	case app && (c.AppID <= 0 || c.InstallationID <= 0 || c.PrivateKey == ""):
		return c, errors.New(`a GitHub App's credential needs "app_id", "installation_id" (positive numbers) and "private_key"`)
	}
	return c, nil
}

// StoredGitHub reads the GitHub credentials pools keep in their account
// (protocol.GitHubCredential), for a provider with none of its own. What
// it read it keeps for its life (a Terraform run), so that a claim, its
// fills and releases read each credential once.
type StoredGitHub struct {
	SSM            SSMClient
	SecretsManager SecretsManagerClient
	// Client is the GitHub client's settings but the credential (BaseURL,
	// Version).
	Client github.Config

	mu   sync.Mutex
	read map[protocol.GitHubCredential]*GitHubAccess
}

// Access is what the credential at cred allows.
func (s *StoredGitHub) Access(ctx context.Context, cred protocol.GitHubCredential) (*GitHubAccess, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.read[cred]; a != nil {
		return a, nil
	}
	value, err := s.value(ctx, cred)
	if err != nil {
		return nil, err
	}
	c, err := parseStoredCredential(value)
	if err != nil {
		return nil, fmt.Errorf("the GitHub credential in %s: %w", cred, err)
	}
	cfg := s.Client
	if c.Token != "" {
		cfg.Token = c.Token
	} else {
		cfg.App = &github.AppAuth{AppID: c.AppID, InstallationID: c.InstallationID, PrivateKeyPEM: c.PrivateKey}
	}
	client, err := github.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("the GitHub credential in %s: %w", cred, err)
	}
	a := &GitHubAccess{Tokens: client, Releases: client, Runs: client, Groups: client, JIT: client, Owner: c.Owner, Repository: c.Repository, From: "the GitHub credential in " + cred.String()}
	if s.read == nil {
		s.read = map[protocol.GitHubCredential]*GitHubAccess{}
	}
	s.read[cred] = a
	return a, nil
}

// value reads the credential's text.
func (s *StoredGitHub) value(ctx context.Context, cred protocol.GitHubCredential) (string, error) {
	if cred.SSMParameter != "" {
		out, err := s.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(cred.SSMParameter), WithDecryption: aws.Bool(true)})
		if err != nil {
			return "", readError(cred, "ssm:GetParameter on it (and kms:Decrypt on its key, when that is a customer managed key)", err)
		}
		if out.Parameter == nil || out.Parameter.Value == nil {
			return "", fmt.Errorf("%s has no value", cred)
		}
		return *out.Parameter.Value, nil
	}
	out, err := s.SecretsManager.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(cred.SecretsManagerSecret)})
	if err != nil {
		return "", readError(cred, "secretsmanager:GetSecretValue on it (and kms:Decrypt on its key, when that is a customer managed key)", err)
	}
	if out.SecretString == nil {
		return "", fmt.Errorf("%s holds no text (SecretString): store the credential's JSON as text", cred)
	}
	return *out.SecretString, nil
}

// readError says why the credential could not be read, and for a denied
// read, which permissions the role lacks.
func readError(cred protocol.GitHubCredential, permissions string, err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && strings.Contains(apiErr.ErrorCode(), "AccessDenied") {
		return fmt.Errorf("this provider's AWS role may not read the pool's GitHub credential, %s: grant the role %s, or configure the provider's github block: %w", cred, permissions, err)
	}
	return fmt.Errorf("cannot read the pool's GitHub credential, %s: %w", cred, err)
}
