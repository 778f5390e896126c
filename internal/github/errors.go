package github

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

const maxMessageRunes = 200

// apiError is a non-2xx answer from GitHub. It holds no credential: the
// message is redacted before it is stored.
type apiError struct {
	op       string
	status   int
	message  string // GitHub's "message", or the start of the body
	attempts int
	hint     string
	// rateLimited: GitHub refused the credentials for their rate limit.
	rateLimited bool
}

func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: HTTP %d", e.op, e.status)
	text := http.StatusText(e.status)
	if text != "" {
		b.WriteString(" " + text)
	}
	if e.message != "" && !strings.EqualFold(e.message, text) {
		b.WriteString(": " + e.message)
	}
	if e.attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.attempts)
	}
	if e.hint != "" {
		b.WriteString("; " + e.hint)
	}
	return b.String()
}

func newAPIError(op operation, status int, body []byte, plan retryPlan, attempts int, bearer string) *apiError {
	hint := op.hint(status)
	if plan.rateLimited || status >= 500 {
		hint = retryHint(plan)
	}
	return &apiError{
		op:          op.what,
		status:      status,
		message:     truncate(redact(errorMessage(body), bearer)),
		attempts:    attempts,
		hint:        hint,
		rateLimited: plan.rateLimited,
	}
}

func statusOf(err error) int {
	var apiErr *apiError
	if errors.As(err, &apiErr) {
		return apiErr.status
	}
	return 0
}

func errorMessage(body []byte) string {
	var resp struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &resp) == nil && resp.Message != "" {
		return resp.Message
	}
	return strings.Join(strings.Fields(string(body)), " ")
}

// redact is a safeguard in case an answer ever echoes the credential sent.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

func truncate(s string) string {
	r := []rune(s)
	if len(r) <= maxMessageRunes {
		return s
	}
	return string(r[:maxMessageRunes]) + "…"
}

func retryHint(plan retryPlan) string {
	later := "try again later"
	if !plan.retry && plan.wait > 0 {
		later = "GitHub asks to wait " + plan.wait.Round(time.Second).String()
	}
	if plan.rateLimited {
		return "rate limited by GitHub; " + later
	}
	return "GitHub had a server error; " + later
}

func targetHint(t Target, status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "the GitHub credentials are invalid or expired"
	case http.StatusForbidden:
		if t.Repository == "" {
			return `the credentials lack permission: a GitHub App or fine-grained token needs the organization permission "Self-hosted runners" (read and write); a classic token needs the "admin:org" scope`
		}
		return `the credentials lack permission: a GitHub App or fine-grained token needs the repository permission "Administration" (read and write); a classic token needs the "repo" scope`
	case http.StatusNotFound:
		return fmt.Sprintf("%s %s does not exist or is not visible to these credentials (GitHub also answers 404 when a permission is missing)", t.kind(), t)
	}
	return ""
}

func installationHint(a *appAuth, status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "GitHub rejected the App's JWT: check github.app_id and github.private_key, and that this machine's clock is correct"
	case http.StatusForbidden:
		return fmt.Sprintf("GitHub App %d may not create tokens for installation %d; is the installation suspended?", a.appID, a.installationID)
	case http.StatusNotFound:
		return fmt.Sprintf("GitHub App %d has no installation %d; check github.installation_id", a.appID, a.installationID)
	}
	return ""
}
