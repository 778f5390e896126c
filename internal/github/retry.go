package github

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

const (
	maxAttempts = 3
	// A longer wait would stall a Terraform run; report the rate limit instead.
	maxRetryWait = 10 * time.Second
)

// retryPlan says whether a failed answer is worth another attempt, and when.
type retryPlan struct {
	retry bool
	// wait is how long GitHub asked us to wait (told); without its word,
	// the client's backoff decides.
	wait        time.Duration
	told        bool
	rateLimited bool
}

func (c *Client) planRetry(status int, h http.Header) retryPlan {
	wait, told := c.serverWait(h)
	rateLimited := status == http.StatusTooManyRequests ||
		status == http.StatusForbidden && (h.Get("Retry-After") != "" || h.Get("X-RateLimit-Remaining") == "0")
	if status < 500 && !rateLimited {
		return retryPlan{}
	}
	return retryPlan{retry: !told || wait <= maxRetryWait, wait: wait, told: told, rateLimited: rateLimited}
}

// retryable marks err, the error of an answer planned so, for retry.Do.
func (p retryPlan) retryable(err error) error {
	switch {
	case !p.retry:
		return retry.Permanent(err)
	case p.told:
		return retry.After(p.wait, err)
	}
	return err
}

// serverWait reads how long GitHub asks us to wait: Retry-After (seconds or
// an HTTP date), else the primary rate limit's reset time when it is spent.
func (c *Client) serverWait(h http.Header) (time.Duration, bool) {
	if ra := h.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(ra); err == nil && secs >= 0 {
			return time.Duration(secs) * time.Second, true
		}
		if at, err := http.ParseTime(ra); err == nil {
			return max(at.Sub(c.now()), 0), true
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if epoch, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return max(time.Unix(epoch, 0).Sub(c.now()), 0), true
		}
	}
	return 0, false
}
