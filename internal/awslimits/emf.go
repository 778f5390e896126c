package awslimits

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// EMFUnits are the units a metric of an EMF document may name
// (CloudWatch's StandardUnit).
var EMFUnits = []string{
	"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
	"Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count",
	"Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second",
	"Bits/Second", "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None",
}

// EMFProblem says why CloudWatch would not extract metrics from a log
// event's message in the embedded metric format, or "" when it would:
// a JSON object whose _aws member has a Timestamp (epoch milliseconds) and
// CloudWatchMetrics directives, each with a Namespace, dimension sets of
// at most MaxEMFDimensions keys naming string members of at most
// MaxDimensionValueLength characters, and at most MaxEMFMetrics metrics
// naming numbers (or lists of at most MaxEMFValues numbers) with a
// standard unit.
func EMFProblem(message string) string {
	dec := json.NewDecoder(strings.NewReader(message))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return "not a JSON object: " + err.Error()
	}
	if dec.More() {
		return "more than one JSON value"
	}
	meta, ok := root["_aws"].(map[string]any)
	if !ok {
		return "no _aws object"
	}
	if ts, ok := meta["Timestamp"].(json.Number); !ok {
		return "_aws.Timestamp is not a number"
	} else if _, err := ts.Int64(); err != nil {
		return "_aws.Timestamp is not whole epoch milliseconds"
	}
	directives, ok := meta["CloudWatchMetrics"].([]any)
	if !ok || len(directives) == 0 {
		return "_aws.CloudWatchMetrics is not a list of directives"
	}
	for i, d := range directives {
		if problem := emfDirectiveProblem(root, d); problem != "" {
			return fmt.Sprintf("directive %d: %s", i, problem)
		}
	}
	return ""
}

func emfDirectiveProblem(root map[string]any, d any) string {
	dir, ok := d.(map[string]any)
	if !ok {
		return "not an object"
	}
	ns, _ := dir["Namespace"].(string)
	if ns == "" || len(ns) > MaxMetricNamespaceLength || strings.HasPrefix(ns, ":") {
		return fmt.Sprintf("namespace %q is not 1 to %d characters, not starting with ':'", ns, MaxMetricNamespaceLength)
	}
	sets, ok := dir["Dimensions"].([]any)
	if !ok {
		return "Dimensions is not a list of dimension sets"
	}
	for _, s := range sets {
		keys, ok := s.([]any)
		if !ok || len(keys) > MaxEMFDimensions {
			return fmt.Sprintf("a dimension set is not a list of at most %d keys", MaxEMFDimensions)
		}
		for _, k := range keys {
			name, _ := k.(string)
			value, ok := root[name].(string)
			if !ok || value == "" || len(value) > MaxDimensionValueLength {
				return fmt.Sprintf("dimension %q names no string member of 1 to %d characters", name, MaxDimensionValueLength)
			}
		}
	}
	metrics, ok := dir["Metrics"].([]any)
	if !ok || len(metrics) == 0 || len(metrics) > MaxEMFMetrics {
		return fmt.Sprintf("Metrics is not a list of 1 to %d metrics", MaxEMFMetrics)
	}
	for _, m := range metrics {
		def, _ := m.(map[string]any)
		name, _ := def["Name"].(string)
		if unit, ok := def["Unit"]; ok && !slices.Contains(EMFUnits, fmt.Sprint(unit)) {
			return fmt.Sprintf("metric %q: unit %v is not a CloudWatch unit", name, unit)
		}
		switch v := root[name].(type) {
		case json.Number:
		case []any:
			if len(v) == 0 || len(v) > MaxEMFValues || slices.ContainsFunc(v, func(x any) bool { _, ok := x.(json.Number); return !ok }) {
				return fmt.Sprintf("metric %q: not a list of 1 to %d numbers", name, MaxEMFValues)
			}
		default:
			return fmt.Sprintf("metric %q names no number", name)
		}
	}
	return ""
}
