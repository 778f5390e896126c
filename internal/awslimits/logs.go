package awslimits

import (
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"
)

// CloudWatch Logs' limits (JSON 1.1 protocol: parameters as the JSON body
// names them, camelCase). The metrics of a pool are log events in the
// embedded metric format (EMF), written with PutLogEvents.
const (
	// MaxLogEvents is the most events a PutLogEvents takes.
	MaxLogEvents = 10000
	// MaxLogBatchBytes bounds a PutLogEvents batch: the events' messages
	// in UTF-8, plus LogEventOverhead bytes for each.
	MaxLogBatchBytes = 1 << 20
	// LogEventOverhead is what each event counts beyond its message.
	LogEventOverhead = 26
	// MaxLogEventBytes bounds one event, its overhead included: 1 MB
	// since 2025 (256 KB before).
	MaxLogEventBytes = 1 << 20
	// MaxLogBatchSpan is the most time a batch's events may span.
	MaxLogBatchSpan = 24 * time.Hour
	// MaxLogGroupNameLength and MaxLogStreamNameLength bound the names.
	MaxLogGroupNameLength  = 512
	MaxLogStreamNameLength = 512
)

// LogGroupNamePattern and LogStreamNamePattern are the names CloudWatch
// Logs takes (a stream's name has no ':' nor '*').
var (
	LogGroupNamePattern  = regexp.MustCompile(`^[.\-_/#A-Za-z0-9]+$`)
	LogStreamNamePattern = regexp.MustCompile(`^[^:*]+$`)
)

// The embedded metric format's limits: a log event CloudWatch does not
// turn into metrics is still stored, and counted in the AWS/Logs
// namespace's EMFValidationErrors, so these are not refusals (EMFProblem
// checks a document against them). Sources: the specification,
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html,
// and the constants of AWS's own EMF libraries,
// https://github.com/awslabs/aws-embedded-metrics-node/blob/master/src/Constants.ts;
// the namespace's, https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_Metric.html.
const (
	// MaxEMFMetrics is the most metrics one directive defines.
	MaxEMFMetrics = 100
	// MaxEMFDimensions is the most dimensions of one dimension set.
	MaxEMFDimensions = 30
	// MaxEMFValues is the most values one metric takes in one event.
	MaxEMFValues = 100
	// MaxMetricNamespaceLength bounds a namespace: CloudWatch's metrics
	// take 255 characters (EMF documents 1024).
	MaxMetricNamespaceLength = 255
	// MaxDimensionValueLength bounds a dimension's value.
	MaxDimensionValueLength = 1024
)

const logsAPI = "https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/"

// logsNameActions are the actions whose requests name a log group, and a
// stream, which this project and its tests call.
var logsNameActions = []string{"CreateLogGroup", "DeleteLogGroup", "CreateLogStream", "PutLogEvents", "GetLogEvents", "FilterLogEvents"}

var logsRules = []Rule{
	{
		ID: "logs-names", Service: "logs", Actions: logsNameActions,
		Limit: "A log group's name is 1 to 512 letters, digits, '.', '-', '_', '/' and '#'; a log stream's 1 to 512 characters but ':' and '*'.",
		Check: func(_ string, req map[string]any) *Refusal {
			if name, ok := str(field(req, "logGroupName")); ok {
				if problem := logsNameProblem(name, "logGroupName", MaxLogGroupNameLength, LogGroupNamePattern, `[\.\-_/#A-Za-z0-9]+`); problem != "" {
					return logsInvalid(problem)
				}
			}
			if name, ok := str(field(req, "logStreamName")); ok {
				if problem := logsNameProblem(name, "logStreamName", MaxLogStreamNameLength, LogStreamNamePattern, `[^:*]*`); problem != "" {
					return logsInvalid(problem)
				}
			}
			return nil
		},
		Wording: Reported,
		Source: logsAPI + "API_CreateLogGroup.html, API_CreateLogStream.html (the names); the answer: " +
			"https://github.com/awslabs/aws-embedded-metrics-java/issues/65, https://github.com/awslabs/aws-embedded-metrics-node/pull/160 (logGroupName's pattern; the others alike)",
	},
	{
		ID: "logs-batch-events", Service: "logs", Actions: []string{"PutLogEvents"},
		Limit: "PutLogEvents takes 1 to 10,000 events.",
		Check: func(_ string, req map[string]any) *Refusal {
			n := len(list(req, "logEvents"))
			prefix := "1 validation error detected: Value at 'logEvents' failed to satisfy constraint: "
			switch {
			case n == 0:
				return logsInvalid(prefix + "Member must have length greater than or equal to 1 (the test front's wording)")
			case n > MaxLogEvents:
				return logsInvalid(prefix + fmt.Sprintf("Member must have length less than or equal to %d (the test front's wording)", MaxLogEvents))
			}
			return nil
		},
		Wording: Ours,
		Source:  logsAPI + "API_PutLogEvents.html (\"The maximum number of log events in a batch is 10,000\"; logEvents has 1 to 10000 items), " + logsAPI + "CommonErrors.html",
	},
	{
		ID: "logs-batch-size", Service: "logs", Actions: []string{"PutLogEvents"},
		Limit: "A PutLogEvents batch is at most 1,048,576 bytes, its messages in UTF-8 and 26 bytes for each event; an event is at most 1 MB (256 KB before 2025).",
		Check: func(_ string, req map[string]any) *Refusal {
			total := 0
			for _, e := range list(req, "logEvents") {
				msg, _ := str(field(e, "message"))
				size := len(msg) + LogEventOverhead
				if size > MaxLogEventBytes {
					return logsInvalid(fmt.Sprintf("Log event too large: %d bytes exceeds limit of %d", size, MaxLogEventBytes))
				}
				total += size
			}
			if total > MaxLogBatchBytes {
				return logsInvalid(fmt.Sprintf("Upload too large: %d bytes exceeds limit of %d", total, MaxLogBatchBytes))
			}
			return nil
		},
		Wording: Reported,
		Source: logsAPI + "API_PutLogEvents.html (the sizes; the event's raised to 1 MB); the answers: https://github.com/nhs-england-tools/terraform-aws-opennext/issues/27, " +
			"https://github.com/cloudstax/firecamp/issues/82 (the batch), https://github.com/aws/aws-sdk-js-v3/issues/6164, https://github.com/maxbanton/cwh/issues/101 (the event, reported at 262144)",
	},
	{
		ID: "logs-event-order", Service: "logs", Actions: []string{"PutLogEvents"},
		Limit: "A PutLogEvents batch's events are in chronological order and span at most 24 hours.",
		Check: func(_ string, req map[string]any) *Refusal {
			var first, last int64
			for i, e := range list(req, "logEvents") {
				ts, ok := integer(field(e, "timestamp"))
				if !ok {
					continue
				}
				if i > 0 && ts < last {
					return logsInvalid("Log events in a single PutLogEvents request must be in chronological order.")
				}
				if i == 0 {
					first = ts
				}
				last = ts
			}
			if time.Duration(last-first)*time.Millisecond > MaxLogBatchSpan {
				return logsInvalid("The batch of log events in a single PutLogEvents request cannot span more than 24 hours.")
			}
			return nil
		},
		Wording: Reported,
		Source: logsAPI + "API_PutLogEvents.html; the answers: https://github.com/dibog/cloudwatch-logback-appender/issues/17, https://github.com/segmentio/ecs-logs/pull/22 (the order), " +
			"https://github.com/aws/amazon-cloudwatch-logs-for-fluent-bit/issues/29, https://github.com/maxbanton/cwh/issues/96 (the span)",
	},
}

// logsNameProblem says what CloudWatch Logs refuses in a name, or "".
func logsNameProblem(name, member string, maxLength int, pattern *regexp.Regexp, shown string) string {
	prefix := "1 validation error detected: Value '" + name + "' at '" + member + "' failed to satisfy constraint: "
	switch {
	case name == "":
		return prefix + "Member must have length greater than or equal to 1"
	case utf8.RuneCountInString(name) > maxLength:
		return prefix + fmt.Sprintf("Member must have length less than or equal to %d", maxLength)
	case !pattern.MatchString(name):
		return prefix + "Member must satisfy regular expression pattern: " + shown
	}
	return ""
}

// logsInvalid is CloudWatch Logs' InvalidParameterException (JSON 1.1:
// the bare shape name as __type).
func logsInvalid(message string) *Refusal {
	return &Refusal{Status: 400, Code: "InvalidParameterException", Type: "InvalidParameterException", Message: message}
}
