package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Scale of Read and Delete: a 1-runner claim's Read and Delete (Release)
// in a table that also holds 10 or 10,000 other instance records. Neither
// may scan the table: the calls must not depend on its size.

var scaleSizes = []int{10, 10000}

// seedRecords writes n instance records of other runners (BatchWriteItem,
// 25 per call): half running for other runs, a quarter idle, a quarter
// terminated.
func seedRecords(b *testing.B, e *env, table string, n int) {
	b.Helper()
	ctx := context.Background()
	now := time.Now()
	prefix := "i-o" + randomSuffix()
	var reqs []ddbtypes.WriteRequest
	for i := range n {
		inst := protocol.Instance{
			ID: fmt.Sprintf("%s%05d", prefix, i), State: protocol.StateRunning, RunID: fmt.Sprintf("other-run-%d", i%97),
			Threshold: protocol.FormatTime(now.Add(poolRuntime)), ResourceClass: "large", InstanceType: "c6i.large",
			UsageClass: protocol.UsageOnDemand, UpdatedAt: protocol.FormatTime(now),
		}
		switch i % 4 {
		case 1:
			inst.State, inst.RunID, inst.Threshold = protocol.StateIdle, "", protocol.FormatTime(now.Add(poolIdle))
		case 3:
			inst.State, inst.Threshold = protocol.StateTerminated, protocol.FormatTime(now)
		}
		reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: inst.Item()}})
	}
	for batch := range slices.Chunk(reqs, 25) {
		pending := map[string][]ddbtypes.WriteRequest{table: batch}
		for len(pending[table]) > 0 {
			out, err := e.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				b.Fatal(err)
			}
			pending = out.UnprocessedItems
		}
	}
}

// scaleResult is one operation's measurement at one table size.
type scaleResult struct {
	calls   Calls
	ops     int
	elapsed time.Duration
}

func (r scaleResult) perOp() float64 { return float64(r.calls.Total()) / float64(r.ops) }

func (r scaleResult) describe() string {
	return fmt.Sprintf("%.1f calls (%s), %s", r.perOp(), r.calls.Per(float64(r.ops)), (r.elapsed / time.Duration(r.ops)).Round(time.Millisecond))
}

// scans counts the calls that read more than named items.
func (r scaleResult) scans() int {
	return r.calls.ByAction["DynamoDB/Scan"] + r.calls.ByAction["DynamoDB/Query"]
}

var (
	scaleMu      sync.Mutex
	scaleResults = map[string]scaleResult{} // "read/10", "delete/10000"
)

// BenchmarkScale: Read and Delete of a 1-runner claim with 10 and 10,000
// other instance records in the table.
func BenchmarkScale(b *testing.B) {
	for _, records := range scaleSizes {
		b.Run(fmt.Sprintf("records=%d", records), func(b *testing.B) {
			parent := b
			var (
				once    sync.Once
				p       *warmPool
				readRun string
				setup   = func(b *testing.B) (*env, *warmPool) {
					e := getEnv(b)
					once.Do(func() {
						// Two warm runners: one for the claim Read reads, one
						// for the claims Delete releases.
						p = newWarmPool(b, parent, e, 2)
						p.dropRaw = true
						seedRecords(b, e, p.name, records)
						req := p.request(1)
						res, err := e.claimer(nil).Create(context.Background(), req)
						if err != nil {
							b.Fatal(err)
						}
						p.waitAgents(b, req.RunID, instanceIDsOf(res.Instances), false)
						readRun = req.RunID
					})
					if p == nil || readRun == "" {
						b.Fatal("no pool")
					}
					return e, p
				}
			)
			b.Run("read", func(b *testing.B) {
				e, p := setup(b)
				ctx := context.Background()
				var r scaleResult
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					counter := NewCounter()
					c := e.claimer(counter)
					b.StartTimer()
					start := time.Now()
					_, live, ok, err := c.Read(ctx, p.name, readRun)
					elapsed := time.Since(start)
					b.StopTimer()
					if err != nil || !ok || len(live) != 1 {
						b.Fatalf("read: ok %t, %d live, %v", ok, len(live), err)
					}
					r.ops++
					r.elapsed += elapsed
					r.calls = r.calls.Add(counter.Snapshot())
					b.StartTimer()
				}
				b.StopTimer()
				reportScale(b, "read", records, r)
			})
			for _, op := range []string{"delete", "delete-reaping"} {
				b.Run(op, func(b *testing.B) {
					e, p := setup(b)
					benchScaleDelete(b, e, p, records, op)
				})
			}
		})
	}
}

// benchScaleDelete releases 1-runner claims. op "delete-reaping" leaves the
// claimer's opportunistic reaping on, as the provider runs it, with the
// pool's reaper lease removed first so that the reap is due.
func benchScaleDelete(b *testing.B, e *env, p *warmPool, records int, op string) {
	ctx := context.Background()
	var r scaleResult
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		req := p.request(1)
		res, err := e.claimer(nil).Create(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		ids := instanceIDsOf(res.Instances)
		p.waitAgents(b, req.RunID, ids, false)
		p.writeSignals(b, e, protocol.SignalReleased, req.RunID, ids) // agents confirm at once
		counter := NewCounter()
		c := e.claimer(counter)
		if op == "delete-reaping" {
			c.ReapInterval = 0 // the default
			_, err := e.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &p.name, Key: protocol.Key(protocol.TypeLease, protocol.ReaperLeaseID)})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start := time.Now()
		maintained := maintenance.Alongside(ctx, c, p.name)
		outcomes, err := c.Release(ctx, p.name, req.RunID)
		maintained()
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil || len(outcomes) != 1 || !strings.HasSuffix(outcomes[0], "released to the pool") {
			b.Fatalf("release: %v %v", outcomes, err)
		}
		r.ops++
		r.elapsed += elapsed
		r.calls = r.calls.Add(counter.Snapshot())
		p.waitAgents(b, req.RunID, ids, true)
		b.StartTimer()
	}
	b.StopTimer()
	reportScale(b, op, records, r)
}

func reportScale(b *testing.B, op string, records int, r scaleResult) {
	b.ReportMetric(r.perOp(), "calls/op")
	b.ReportMetric(float64(r.scans()), "scans")
	b.Logf("%s with %d other records: %s", op, records, r.describe())
	scaleMu.Lock()
	scaleResults[fmt.Sprintf("%s/%d", op, records)] = r
	small, haveSmall := scaleResults[fmt.Sprintf("%s/%d", op, scaleSizes[0])]
	scaleMu.Unlock()
	name := map[string]string{"read": "Read", "delete": "Delete (Release)", "delete-reaping": "Delete with the default opportunistic reap, reap due (not a target)"}[op]
	row := summaryRow{
		Section:  "4. Scale of Read and Delete (a 1-runner claim; other instance records in the table)",
		Scenario: fmt.Sprintf("%s, %d other records", name, records),
		Ours:     r.describe(),
	}
	if records == scaleSizes[len(scaleSizes)-1] && haveSmall && op != "delete-reaping" {
		row.Baseline = fmt.Sprintf("(with %d records: %.1f calls)", scaleSizes[0], small.perOp())
		row.Ratio = fmt.Sprintf("calls ×%.2f", r.perOp()/small.perOp())
		row.Target = "same calls as with 10 records, no Query/Scan"
		same := r.perOp() == small.perOp() && r.scans() == 0 && small.scans() == 0
		row.Met = yesNo(same)
		if !same {
			row.Met += fmt.Sprintf(" (%.1f vs %.1f calls, %d Query/Scan)", r.perOp(), small.perOp(), r.scans())
		}
	}
	summary.add(row)
}
