package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts the AWS API calls made through the SDK clients it is
// attached to, by service and action ("SQS/ReceiveMessage"), and the time
// they took. A call is one operation as the caller made it: the SDK's
// retries of it are counted apart, as attempts.
type Counter struct {
	mu       sync.Mutex
	calls    map[string]int
	took     map[string]time.Duration
	attempts int
}

// NewCounter returns an empty counter.
func NewCounter() *Counter {
	return &Counter{calls: map[string]int{}, took: map[string]time.Duration{}}
}

// Attach returns a copy of cfg whose clients count their calls here.
func (c *Counter) Attach(cfg aws.Config) aws.Config {
	counted := cfg.Copy()
	counted.APIOptions = append(slices.Clone(cfg.APIOptions), c.register)
	return counted
}

func (c *Counter) register(s *middleware.Stack) error {
	// Initialize runs once per operation, whatever the retries.
	err := s.Initialize.Add(middleware.InitializeMiddlewareFunc("bench.countCalls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			key := awsmiddleware.GetServiceID(ctx) + "/" + awsmiddleware.GetOperationName(ctx)
			start := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			c.Observe(key, time.Since(start))
			return out, md, err
		}), middleware.After)
	if err != nil {
		return err
	}
	// Finalize after the retry middleware runs once per HTTP attempt.
	return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("bench.countAttempts",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.attempts++
			c.mu.Unlock()
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// Observe counts one call of key ("SQS/ReceiveMessage") that took took:
// the SDK clients' middleware calls it, and so do clients that are not the
// SDK's (internal/testworld/latency's).
func (c *Counter) Observe(key string, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[key]++
	c.took[key] += took
}

// Snapshot returns the counts so far.
func (c *Counter) Snapshot() Calls {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Calls{ByAction: maps.Clone(c.calls), Took: maps.Clone(c.took), Attempts: c.attempts}
}

// Calls are call counts by "Service/Action", the time calls of each action
// took (summed: concurrent calls overlap), and the HTTP attempts they took.
type Calls struct {
	ByAction map[string]int
	Took     map[string]time.Duration
	Attempts int
}

// Sub returns the calls made between an earlier snapshot and c.
func (c Calls) Sub(earlier Calls) Calls {
	out := Calls{ByAction: map[string]int{}, Took: map[string]time.Duration{}, Attempts: c.Attempts - earlier.Attempts}
	for k, v := range c.ByAction {
		if d := v - earlier.ByAction[k]; d != 0 {
			out.ByAction[k] = d
			out.Took[k] = c.Took[k] - earlier.Took[k]
		}
	}
	return out
}

// Add returns the sum of c and o.
func (c Calls) Add(o Calls) Calls {
	out := Calls{ByAction: map[string]int{}, Took: map[string]time.Duration{}, Attempts: c.Attempts + o.Attempts}
	for _, x := range []Calls{c, o} {
		for k, v := range x.ByAction {
			out.ByAction[k] += v
			out.Took[k] += x.Took[k]
		}
	}
	return out
}

// Total is the number of calls of every action.
func (c Calls) Total() int {
	n := 0
	for _, v := range c.ByAction {
		n += v
	}
	return n
}

// Service is the number of calls to one service ("SQS", "DynamoDB", "EC2").
func (c Calls) Service(name string) int {
	n := 0
	for k, v := range c.ByAction {
		if strings.HasPrefix(k, name+"/") {
			n += v
		}
	}
	return n
}

// Per formats the calls of each action divided by n, most frequent first,
// with the mean time of one call: "DynamoDB/BatchGetItem=2.1 (4.2 ms)
// SQS/ReceiveMessage=0.1 (12 ms)".
func (c Calls) Per(n float64) string {
	keys := slices.Collect(maps.Keys(c.ByAction))
	slices.SortFunc(keys, func(a, b string) int {
		if d := c.ByAction[b] - c.ByAction[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		mean := c.Took[k] / time.Duration(max(1, c.ByAction[k]))
		parts[i] = fmt.Sprintf("%s=%s (%s ms)", k, trimFloat(float64(c.ByAction[k])/n), trimFloat(float64(mean.Microseconds())/1000))
	}
	return strings.Join(parts, " ")
}

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" || s == "-" {
		return "0"
	}
	return s
}
