package scripttest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Collector is a server a hostile job sends what it got to, or that it
// makes the runner send something to (a server of the job's choice): it
// keeps every request, for the test to look for secrets in. An instance
// reaches it when its URL is in InstanceConfig.Reach.
type Collector struct {
	URL string

	mu       sync.Mutex
	requests []string
}

// NewCollector starts a collector.
func NewCollector(t testing.TB) *Collector {
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		c.mu.Lock()
		c.requests = append(c.requests, r.Method+" "+r.URL.Path+" "+r.Form.Encode())
		c.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// Requests are the requests it got: method, path and form.
func (c *Collector) Requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.requests...)
}

// Holds tells whether any request held s.
func (c *Collector) Holds(s string) bool {
	for _, r := range c.Requests() {
		if strings.Contains(r, s) {
			return true
		}
	}
	return false
}
