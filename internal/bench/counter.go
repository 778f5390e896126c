package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts the AWS API calls made through the SDK clients it is
// attached to, by service and action ("SQS/ReceiveMessage"). A call is one
// operation as the caller made it: the SDK's retries of it are counted
// apart, as attempts.
type Counter struct {
	mu       sync.Mutex
	calls    map[string]int
	attempts int
}

// NewCounter returns an empty counter.
func NewCounter() *Counter { return &Counter{calls: map[string]int{}} }

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
			c.mu.Lock()
			c.calls[key]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
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

// Snapshot returns the counts so far.
func (c *Counter) Snapshot() Calls {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Calls{ByAction: maps.Clone(c.calls), Attempts: c.attempts}
}

// Calls are call counts by "Service/Action", and the HTTP attempts they took.
type Calls struct {
	ByAction map[string]int
	Attempts int
}

// Sub returns the calls made between an earlier snapshot and c.
func (c Calls) Sub(earlier Calls) Calls {
	out := Calls{ByAction: map[string]int{}, Attempts: c.Attempts - earlier.Attempts}
	for k, v := range c.ByAction {
		if d := v - earlier.ByAction[k]; d != 0 {
			out.ByAction[k] = d
		}
	}
	return out
}

// Add returns the sum of c and o.
func (c Calls) Add(o Calls) Calls {
	out := Calls{ByAction: maps.Clone(c.ByAction), Attempts: c.Attempts + o.Attempts}
	if out.ByAction == nil {
		out.ByAction = map[string]int{}
	}
	for k, v := range o.ByAction {
		out.ByAction[k] += v
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

// Per formats the calls of each action divided by n, most frequent first:
// "DynamoDB/BatchGetItem=2.10 SQS/ReceiveMessage=0.10".
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
		parts[i] = fmt.Sprintf("%s=%s", k, trimFloat(float64(c.ByAction[k])/n))
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
