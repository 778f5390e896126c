package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
)

// The dashboard of examples/complete graphs every metric a pool publishes,
// with its dimensions, in the namespace the pool publishes to (terraform
// validate cannot check it here: it needs the AWS provider).
func TestCompleteDashboard_graphsEveryMetric(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(examplesDir, "complete", "metrics.tf"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	graph := regexp.MustCompile(`metric\s*=\s*\[([^\]]*)\],\s*dimensions\s*=\s*"([^"]*)"`)
	graphed := map[string]bool{}
	for _, m := range graph.FindAllStringSubmatch(text, -1) {
		for _, name := range regexp.MustCompile(`"(\w+)"`).FindAllStringSubmatch(m[1], -1) {
			graphed[name[1]+" Pool,Class"+m[2]] = true
		}
	}
	for _, d := range metrics.Definitions {
		key := d.Name + " " + strings.Join(d.Dimensions, ",")
		if !graphed[key] {
			t.Errorf("metric %s with dimensions %v: no graph of the dashboard (graphs: %v)", d.Name, d.Dimensions, graphed)
		}
	}
	if !strings.Contains(text, `metrics_namespace = "`+metrics.DefaultNamespace+`"`) {
		t.Errorf("the example's namespace is not the default, %s", metrics.DefaultNamespace)
	}
	if !strings.Contains(text, `Pool,Class${g.dimensions}} MetricName=\"${m}\" Pool=\"${local.pool}\"`) {
		t.Error("the dashboard's SEARCH does not select the pool's metrics by their dimensions")
	}
}
