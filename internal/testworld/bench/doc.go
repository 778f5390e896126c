// Package bench holds the performance benchmarks of issue 6: the claim code
// (internal/claim) against the AWS emulator, side by side with a baseline
// that implements the original system's algorithms (baseline.go, from the
// seeds' design documents) on the same emulator and the same data.
//
// Every AWS call is counted in the client, by service and action (Counter,
// an SDK middleware), and every benchmark reports calls per unit of work
// and time with b.ReportMetric. After the run, TestMain prints a summary
// table in Markdown (also written to $EC2RUNNERS_BENCH_SUMMARY when set):
// scenario, ours, baseline, ratio, target, met.
//
//	go test ./internal/testworld/bench/ -run '^$' -bench . -benchtime 1x -timeout 30m
//
// Benchmarks (sub-benchmarks select with -bench, e.g. 'Pickup/pool=100$'):
//
//   - BenchmarkPickup: the Pickup Manager alone, pools of 100 and 1000 idle
//     runner messages, 0/50/90/99 % unsuitable, claims of 1 and 10 runners
//     and a run to exhaustion: calls/msg, msgs/s, examined/msg,
//     ratio-vs-baseline; plus the emulator's own cost of a receive.
//   - BenchmarkClaim: a whole Create of 1, 10 and 50 warm runners (ours and
//     the baseline's) and ours' Release: calls/runner, time.
//   - BenchmarkScale: a claim's Read and Delete with 10 and 10,000 other
//     instance records in the table: the same calls, no Query or Scan.
//   - BenchmarkEndToEnd: terraform apply of a one-runner claim from a warm
//     pool, wall time, with the provider built from this tree.
//
// Nothing runs without -bench: the emulator is started (or joined) by the
// first benchmark that needs it, so `go test ./...` only compiles this
// package. The emulator is internal/testworld/emulator's (AWS_ENDPOINT_URL selects
// another one); benchmarks create uniquely named pools and queues and delete
// them afterwards. Runs of pools of 1000 messages are capped (see
// examineCap) because the emulator's receive costs grow with the queue.
package bench
