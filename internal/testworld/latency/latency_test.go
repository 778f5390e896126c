package latency

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// The samples of a call's latency have the model's median and 99th
// percentile.
func TestLatencySampleHasTheMedianAndP99(t *testing.T) {
	m := AWS(1)
	const n = 20000
	samples := make([]time.Duration, n)
	for i := range samples {
		samples[i] = m.of("SQS/ReceiveMessage")
	}
	slices.Sort(samples)
	want := m.Calls["SQS/"]
	within := func(got, want time.Duration) bool { return got > want*9/10 && got < want*11/10 }
	if got := samples[n/2]; !within(got, want.Median) {
		t.Errorf("median %s, want about %s", got, want.Median)
	}
	if got := samples[n*99/100]; !within(got, want.P99) {
		t.Errorf("p99 %s, want about %s", got, want.P99)
	}
}

// A call takes its latency, answers what the service answered, and is
// observed once; paused, it answers at once.
func TestCallTakesItsLatencyAndIsObserved(t *testing.T) {
	table := awsfake.NewTable("table")
	table.Put(protocol.Key("x", "y"))
	m := &Model{Calls: map[string]Latency{"DynamoDB/": {Median: 40 * time.Millisecond}}, rnd: AWS(1).rnd}
	var (
		seen []string
		took []time.Duration
	)
	db := DynamoDB{Inner: table, Model: m, Observe: func(key string, d time.Duration) {
		seen = append(seen, key)
		took = append(took, d)
	}}
	get := func() time.Duration {
		start := time.Now()
		out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("table"), Key: protocol.Key("x", "y")})
		if err != nil || out.Item == nil {
			t.Fatalf("GetItem: %v, %v", out, err)
		}
		return time.Since(start)
	}
	if took := get(); took < 40*time.Millisecond {
		t.Errorf("a call took %s, want at least 40 ms", took)
	}
	if !slices.Equal(seen, []string{"DynamoDB/GetItem"}) || took[0] < 40*time.Millisecond {
		t.Errorf("observed %v taking %v, want one DynamoDB/GetItem of at least 40 ms", seen, took)
	}
	m.Pause()
	if took := get(); took >= 40*time.Millisecond {
		t.Errorf("paused, a call took %s", took)
	}
}
