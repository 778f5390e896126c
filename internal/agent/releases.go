package agent

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// GitHubReleases asks GitHub's REST API for the newest runner release
// (GET /repos/actions/runner/releases/latest), with the digests GitHub
// computes for every asset. Unauthenticated, it shares GitHub's limit of 60
// requests an hour per address, which is why the agent asks only when the
// pool told it of no release.
type GitHubReleases struct {
	URL       string
	HTTP      *http.Client
	UserAgent string
}

// Newest is the newest runner release.
func (g GitHubReleases) Newest(ctx context.Context) (protocol.RunnerRelease, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL, nil)
	if err != nil {
		return protocol.RunnerRelease{}, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", cmp.Or(g.UserAgent, "ec2runners-agent"))
	client := g.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return protocol.RunnerRelease{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return protocol.RunnerRelease{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return protocol.RunnerRelease{}, fmt.Errorf("GET %s: HTTP %d: %.200s", g.URL, resp.StatusCode, body)
	}
	return github.ParseRunnerRelease(body)
}
