package protocol

import (
	"fmt"
	"strings"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
)

// MetricsConfig is where a pool publishes its metrics: events in
// CloudWatch's embedded metric format, in the log stream named after the
// pool (MetricsStream) of LogGroup, whose metrics CloudWatch files under
// Namespace. Claims, releases and scans of the pool read it from the pool
// config item.
type MetricsConfig struct {
	Namespace string `json:"namespace"`
	LogGroup  string `json:"logGroup"`
}

// MetricsStream is the log stream of a pool's metrics: the pool's name.
func MetricsStream(pool string) string { return pool }

// ValidateMetricsNamespace checks a CloudWatch namespace of custom
// metrics: 1 to 255 printable ASCII characters, not starting with ':',
// and not AWS's own (AWS/).
func ValidateMetricsNamespace(ns string) error {
	switch {
	case ns == "" || len(ns) > awslimits.MaxMetricNamespaceLength:
		return fmt.Errorf("must be 1 to %d characters", awslimits.MaxMetricNamespaceLength)
	case strings.HasPrefix(ns, ":"):
		return fmt.Errorf("must not start with ':'")
	case strings.HasPrefix(ns, "AWS/"):
		return fmt.Errorf("must not start with AWS/, which AWS's own namespaces use")
	}
	for _, r := range ns {
		if r < 0x20 || r > 0x7e {
			return fmt.Errorf("must be printable ASCII characters")
		}
	}
	return nil
}

// ValidateLogGroupName checks a CloudWatch Logs log group's name: 1 to
// 512 letters, digits, '.', '-', '_', '/' and '#'.
func ValidateLogGroupName(name string) error {
	if len(name) > awslimits.MaxLogGroupNameLength || !awslimits.LogGroupNamePattern.MatchString(name) {
		return fmt.Errorf("must be 1 to %d letters, digits, '.', '-', '_', '/' and '#'", awslimits.MaxLogGroupNameLength)
	}
	return nil
}
