package github

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

const (
	maxAttempts = 3
	// A longer wait would stall a Terraform run; report the rate limit instead.
	maxRetryWait = 10 * time.Second
)

// retryPlan says whether a failed answer is worth another attempt, and when.
type retryPlan struct {
	retry       bool
	wait        time.Duration
	rateLimited bool
}

func (c *Client) planRetry(status int, h http.Header, attempt int) retryPlan {
	wait, told := c.serverWait(h)
	rateLimited := status == http.StatusTooManyRequests ||
		status == http.StatusForbidden && (h.Get("Retry-After") != "" || h.Get("X-RateLimit-Remaining") == "0")
	if status < 500 && !rateLimited {
		return retryPlan{}
	}
	if told {
		return retryPlan{retry: wait <= maxRetryWait, wait: wait, rateLimited: rateLimited}
	}
	return retryPlan{retry: true, wait: c.backoff << (attempt - 1), rateLimited: rateLimited}
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

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
