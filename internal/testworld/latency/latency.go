// Package latency puts the per-call latency of the real AWS services in
// front of clients that answer at once (internal/testworld/awsfake), so that
// a benchmark sees what a claim waits for on AWS: every call takes a time
// drawn from its service's distribution, half before the call reaches the
// service and half after, and calls overlap freely, as on AWS (an emulator
// that answers on one core queues them instead).
//
// The figures, and where they come from:
//
//   - DynamoDB single-item reads and writes (GetItem, PutItem, UpdateItem,
//     DeleteItem): median 5 ms. AWS: "for most atomic operations, such as
//     GetItem and PutItem, you can expect an average latency in
//     single-digit milliseconds" (AWS Knowledge Center, "Why is my Amazon
//     DynamoDB request taking a long time?",
//     https://repost.aws/knowledge-center/dynamodb-high-latency). The 5 ms
//     within that range and the p99 of 20 ms are assumed.
//   - DynamoDB BatchGetItem, BatchWriteItem, Query: median 8 ms, p99 30 ms,
//     assumed (the batch calls "read and write items in parallel to
//     minimize response latencies", DynamoDB Developer Guide, Working with
//     items and attributes).
//   - DynamoDB TransactWriteItems: median 12 ms, p99 40 ms, assumed (a
//     transaction makes two writes of each item).
//   - SQS (every call): median 15 ms, p99 60 ms, assumed: AWS publishes no
//     figure; independent measurements report latencies in the tens of
//     milliseconds (SoftwareMill, "Amazon's SQS performance and latency",
//     2017, https://softwaremill.com/amazon-sqs-performance-latency/).
//   - EC2 describes (DescribeInstances, DescribeInstanceTypes,
//     DescribeLaunchTemplates, DescribeLaunchTemplateVersions,
//     DescribeImages): median 150 ms, p99 500 ms; CreateFleet, RunInstances,
//     StartInstances, StopInstances, TerminateInstances: median 1 s, p99
//     3 s. All assumed: AWS publishes no latency for the EC2 API.
//
// The semantics that go with them (SQS visibility on the machine's clock,
// in-flight counts that lag, EC2's eventual consistency) are the fakes'
// own (awsfake.WallClockSQS, SQS.CountLag, EC2.UnseenCalls).
package latency

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

// Latency is a call's distribution: log-normal with this median and 99th
// percentile.
type Latency struct {
	Median, P99 time.Duration
}

// sample draws one latency from a log-normal distribution.
func (l Latency) sample(r *rand.Rand) time.Duration {
	if l.Median <= 0 {
		return 0
	}
	sigma := 0.0
	if l.P99 > l.Median {
		sigma = math.Log(float64(l.P99)/float64(l.Median)) / 2.326 // z of the 99th percentile
	}
	return time.Duration(float64(l.Median) * math.Exp(sigma*r.NormFloat64()))
}

// Model is the latency of every call, by "Service/Action", with a default
// per service ("Service/").
type Model struct {
	Calls map[string]Latency

	mu  sync.Mutex
	rnd *rand.Rand
	off atomic.Bool
}

// AWS is the model of the package comment, seeded for reproducible runs.
func AWS(seed uint64) *Model {
	single := Latency{5 * time.Millisecond, 20 * time.Millisecond}
	batch := Latency{8 * time.Millisecond, 30 * time.Millisecond}
	describe := Latency{150 * time.Millisecond, 500 * time.Millisecond}
	mutate := Latency{time.Second, 3 * time.Second}
	return &Model{
		rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		Calls: map[string]Latency{
			"DynamoDB/":                   single,
			"DynamoDB/BatchGetItem":       batch,
			"DynamoDB/BatchWriteItem":     batch,
			"DynamoDB/Query":              batch,
			"DynamoDB/TransactWriteItems": {12 * time.Millisecond, 40 * time.Millisecond},
			"SQS/":                        {15 * time.Millisecond, 60 * time.Millisecond},
			"EC2/":                        describe,
			"EC2/CreateFleet":             mutate,
			"EC2/RunInstances":            mutate,
			"EC2/StartInstances":          mutate,
			"EC2/StopInstances":           mutate,
			"EC2/TerminateInstances":      mutate,
		},
	}
}

// Pause makes every call answer at once until Resume (a benchmark's setup).
func (m *Model) Pause() { m.off.Store(true) }

// Resume gives calls their latency again.
func (m *Model) Resume() { m.off.Store(false) }

// of is the latency of one call of key.
func (m *Model) of(key string) time.Duration {
	if m.off.Load() {
		return 0
	}
	l, ok := m.Calls[key]
	if !ok {
		l = m.Calls[key[:strings.Index(key, "/")+1]]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return l.sample(m.rnd)
}

// Observer hears of every call a wrapper made: "Service/Action" and how long
// it took, latency included.
type Observer func(key string, took time.Duration)

// call runs do as the service would answer it: half the latency there,
// half back.
func call[T any](ctx context.Context, m *Model, observe Observer, key string, do func() (T, error)) (T, error) {
	start := time.Now()
	d := m.of(key)
	var zero T
	if err := retry.Sleep(ctx, d/2); err != nil {
		return zero, err
	}
	out, err := do()
	if back := retry.Sleep(ctx, d-d/2); back != nil && err == nil {
		err = back
	}
	if observe != nil {
		observe(key, time.Since(start))
	}
	return out, err
}
