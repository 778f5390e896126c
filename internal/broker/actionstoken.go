package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// The variables GitHub Actions sets in a job that may request an OIDC
// token (permissions: id-token: write), and the one it sets in every job.
const (
	EnvTokenRequestURL   = "ACTIONS_ID_TOKEN_REQUEST_URL"
	EnvTokenRequestToken = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
	envGitHubActions     = "GITHUB_ACTIONS"
)

// ActionsToken fetches the job's GitHub Actions OIDC token, as GitHub
// documents it and the actions toolkit's getIDToken does: GET
// $ACTIONS_ID_TOKEN_REQUEST_URL&audience=<audience> with
// "Authorization: Bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN", answered with
// {"value": "<jwt>"}. The variables are read at each fetch, so a provider
// configured outside a job fails only when it calls the broker.
type ActionsToken struct {
	Getenv     func(string) string // nil: os.Getenv
	HTTPClient *http.Client        // nil: http.DefaultClient
}

// IDToken is the job's OIDC token for audience.
func (a ActionsToken) IDToken(ctx context.Context, audience string) (string, error) {
	getenv := a.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	requestURL, requestToken := getenv(EnvTokenRequestURL), getenv(EnvTokenRequestToken)
	if requestURL == "" || requestToken == "" {
		if getenv(envGitHubActions) != "true" {
			return "", fmt.Errorf("the broker needs the GitHub Actions job's OIDC token, and this is not a GitHub Actions job (%s and %s are not set): claims through a broker are made from a workflow's job", EnvTokenRequestURL, EnvTokenRequestToken)
		}
		return "", fmt.Errorf("the broker needs the job's OIDC token, and GitHub gave this job none (%s and %s are not set): give the job (or the workflow) `permissions: id-token: write`", EnvTokenRequestURL, EnvTokenRequestToken)
	}
	u, err := url.Parse(requestURL)
	if err != nil {
		return "", fmt.Errorf("%s is not a URL: %w", EnvTokenRequestURL, err)
	}
	// The URL GitHub gives carries a query (api-version) to keep.
	q := u.Query()
	q.Set("audience", audience)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+requestToken)
	req.Header.Set("Accept", "application/json")
	client := a.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("requesting the job's OIDC token from GitHub: %w", err)
	}
	defer resp.Body.Close()
	// A token is about 1 KB; GitHub's answers, even refusals, are small.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("reading the job's OIDC token from GitHub: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GitHub answered the request for the job's OIDC token (audience %q) with HTTP %d: %s", audience, resp.StatusCode, excerpt(body))
	}
	var answer struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return "", fmt.Errorf("GitHub's answer to the OIDC token request is not the documented {\"value\": ...}: %w", err)
	}
	if answer.Value == "" {
		return "", errors.New("GitHub answered the OIDC token request without a token")
	}
	return answer.Value, nil
}

// excerpt is the start of a body, for an error message.
func excerpt(body []byte) string {
	const most = 300
	s := strings.TrimSpace(string(body))
	if len(s) > most {
		s = s[:most] + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
