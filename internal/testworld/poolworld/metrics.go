package poolworld

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// MetricsLogGroup is the log group of the pool's metrics (Metrics).
const MetricsLogGroup = "/ec2runners/metrics"

// Metrics gives the pool metrics settings (cfg, written), and its log
// stream in a fake CloudWatch Logs, which it returns.
func (w *World) Metrics(cfg *protocol.PoolConfig) *awsfake.Logs {
	w.T.Helper()
	logs := awsfake.NewLogs(MetricsLogGroup)
	cfg.Metrics = &protocol.MetricsConfig{Namespace: "CI/Runners", LogGroup: MetricsLogGroup}
	w.WriteConfig(*cfg)
	target := metrics.Target{Namespace: cfg.Metrics.Namespace, LogGroup: MetricsLogGroup, Stream: protocol.MetricsStream(cfg.Name)}
	if err := metrics.EnsureStream(w.T.Context(), logs, target); err != nil {
		w.T.Fatal(err)
	}
	return logs
}

// Published are the metric values of the pool's events, one line per
// event ("Dim=value ... Metric=value"), sorted; every event must be EMF
// CloudWatch extracts metrics from.
func Published(t *testing.T, logs *awsfake.Logs) []string {
	t.Helper()
	var out []string
	for _, msg := range logs.Messages(MetricsLogGroup, Pool) {
		if problem := awslimits.EMFProblem(msg); problem != "" {
			t.Fatalf("not EMF (%s): %s", problem, msg)
		}
		var doc map[string]any
		_ = json.Unmarshal([]byte(msg), &doc)
		dir := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		if dir["Namespace"] != "CI/Runners" {
			t.Errorf("namespace %v", dir["Namespace"])
		}
		var parts []string
		for _, k := range dir["Dimensions"].([]any)[0].([]any) {
			if k != metrics.DimPool {
				parts = append(parts, fmt.Sprintf("%s=%v", k, doc[k.(string)]))
			}
		}
		for _, m := range dir["Metrics"].([]any) {
			name := m.(map[string]any)["Name"].(string)
			if name == metrics.TimeToRunner {
				parts = append(parts, name+">0="+fmt.Sprint(doc[name].(float64) > 0))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s=%v", name, doc[name]))
		}
		out = append(out, strings.Join(parts, " "))
	}
	slices.Sort(out)
	return out
}

// WantPublished fails t unless the pool's events are want (Published).
func WantPublished(t *testing.T, logs *awsfake.Logs, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := Published(t, logs); !slices.Equal(got, want) {
		t.Errorf("published:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
