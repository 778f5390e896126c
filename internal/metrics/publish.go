package metrics

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
)

// LogsClient is the part of the CloudWatch Logs API publishing uses.
type LogsClient interface {
	PutLogEvents(context.Context, *cloudwatchlogs.PutLogEventsInput, ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.PutLogEventsOutput, error)
}

// StreamClient is the part of the CloudWatch Logs API that creates a
// pool's log stream (the pool's apply).
type StreamClient interface {
	CreateLogStream(context.Context, *cloudwatchlogs.CreateLogStreamInput, ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.CreateLogStreamOutput, error)
}

// Target is where a pool's metrics go: its namespace, and the log group
// and stream of their events.
type Target struct {
	Namespace string
	LogGroup  string
	Stream    string // the pool's name
}

// Enabled tells whether the pool publishes metrics.
func (t Target) Enabled() bool { return t.LogGroup != "" && t.Stream != "" }

// DefaultTimeout bounds one Publish: what is reported on waits for it.
const DefaultTimeout = 10 * time.Second

// Publisher publishes events with a CloudWatch Logs client.
type Publisher struct {
	Logs LogsClient
	// Timeout bounds a Publish (0: DefaultTimeout); it runs on after the
	// caller's context ends, as what it reports on has happened.
	Timeout time.Duration
}

// Publish writes events to t's log stream in the embedded metric format,
// in as few PutLogEvents calls as CloudWatch Logs' limits allow (one for a
// claim, a release or a scan). It does nothing when t is not enabled, and
// fails when p has no client.
func (p *Publisher) Publish(ctx context.Context, t Target, events []Event) error {
	if !t.Enabled() || len(events) == 0 {
		return nil
	}
	if p == nil || p.Logs == nil {
		return errors.New("no CloudWatch Logs client to publish metrics with")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(p.Timeout, DefaultTimeout))
	defer cancel()
	batches, err := Batches(t.Namespace, events)
	if err != nil {
		return err
	}
	for _, b := range batches {
		out, err := p.Logs.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{
			LogGroupName: aws.String(t.LogGroup), LogStreamName: aws.String(t.Stream), LogEvents: b,
		})
		if hasCode(err, "ResourceNotFoundException") {
			return fmt.Errorf("publishing metrics to log group %s: its log stream %s does not exist (the pool's apply creates it): %w", t.LogGroup, t.Stream, err)
		}
		if err != nil {
			return fmt.Errorf("publishing metrics to log group %s, stream %s: %w", t.LogGroup, t.Stream, err)
		}
		if r := out.RejectedLogEventsInfo; r != nil {
			return fmt.Errorf("publishing metrics to log group %s: CloudWatch Logs rejected events (too new before index %d, too old before %d, expired before %d)",
				t.LogGroup, aws.ToInt32(r.TooNewLogEventStartIndex), aws.ToInt32(r.TooOldLogEventEndIndex), aws.ToInt32(r.ExpiredLogEventEndIndex))
		}
	}
	return nil
}

// EnsureStream creates t's log stream unless it exists. The log group must
// exist: the pool's metrics settings name it, its owner manages it (its
// retention, its encryption).
func EnsureStream(ctx context.Context, c StreamClient, t Target) error {
	_, err := c.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(t.LogGroup), LogStreamName: aws.String(t.Stream)})
	switch {
	case err == nil, hasCode(err, "ResourceAlreadyExistsException"):
		return nil
	case hasCode(err, "ResourceNotFoundException"):
		return fmt.Errorf("log group %s does not exist: create it before the pool (for example with the AWS provider's aws_cloudwatch_log_group), or change metrics.log_group: %w", t.LogGroup, err)
	}
	return fmt.Errorf("creating the log stream %s in log group %s for the pool's metrics: %w", t.Stream, t.LogGroup, err)
}

// Batches encodes events and splits them into PutLogEvents batches within
// CloudWatch Logs' limits (events in chronological order, at most
// MaxLogEvents and MaxLogBatchBytes each, spanning at most MaxLogBatchSpan).
func Batches(namespace string, events []Event) ([][]types.InputLogEvent, error) {
	events = slices.Clone(events)
	sort.SliceStable(events, func(i, j int) bool { return events[i].Time.Before(events[j].Time) })
	var out [][]types.InputLogEvent
	var cur []types.InputLogEvent
	size := 0
	var first time.Time
	for _, e := range events {
		msg, err := Encode(namespace, e)
		if err != nil {
			return nil, err
		}
		n := len(msg) + awslimits.LogEventOverhead
		if n > awslimits.MaxLogEventBytes {
			return nil, fmt.Errorf("a metrics event of %d bytes is larger than CloudWatch Logs takes (%d)", n, awslimits.MaxLogEventBytes)
		}
		if len(cur) > 0 && (len(cur) == awslimits.MaxLogEvents || size+n > awslimits.MaxLogBatchBytes || e.Time.Sub(first) > awslimits.MaxLogBatchSpan) {
			out, cur, size = append(out, cur), nil, 0
		}
		if len(cur) == 0 {
			first = e.Time
		}
		cur = append(cur, types.InputLogEvent{Message: aws.String(msg), Timestamp: aws.Int64(e.Time.UnixMilli())})
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out, nil
}

// Encode writes an event as an EMF document: the _aws metadata (its time,
// one directive of namespace with the event's dimension set and metrics),
// then the dimensions, the metric values and the properties as members.
func Encode(namespace string, e Event) (string, error) {
	if len(e.Values) > awslimits.MaxEMFMetrics || len(e.Dimensions) > awslimits.MaxEMFDimensions {
		return "", fmt.Errorf("a metrics event of %d metrics and %d dimensions: EMF takes %d and %d", len(e.Values), len(e.Dimensions), awslimits.MaxEMFMetrics, awslimits.MaxEMFDimensions)
	}
	type metricDef struct {
		Name string `json:"Name"`
		Unit string `json:"Unit,omitempty"`
	}
	type directive struct {
		Namespace  string      `json:"Namespace"`
		Dimensions [][]string  `json:"Dimensions"`
		Metrics    []metricDef `json:"Metrics"`
	}
	dir := directive{Namespace: namespace, Dimensions: [][]string{{}}, Metrics: []metricDef{}}
	var b bytes.Buffer
	member := func(name string, v any) error {
		k, _ := json.Marshal(name)
		val, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.WriteByte(',')
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
		return nil
	}
	seen := map[string]bool{"_aws": true}
	for _, d := range e.Dimensions {
		dir.Dimensions[0] = append(dir.Dimensions[0], d.Name)
	}
	for _, v := range e.Values {
		dir.Metrics = append(dir.Metrics, metricDef{Name: v.Name, Unit: v.Unit})
	}
	meta, err := json.Marshal(map[string]any{"Timestamp": e.Time.UnixMilli(), "CloudWatchMetrics": []directive{dir}})
	if err != nil {
		return "", err
	}
	b.WriteString(`{"_aws":`)
	b.Write(meta)
	add := func(name string, v any) error {
		if seen[name] {
			return fmt.Errorf("a metrics event names %q twice", name)
		}
		seen[name] = true
		return member(name, v)
	}
	for _, d := range e.Dimensions {
		if err := add(d.Name, d.Value); err != nil {
			return "", err
		}
	}
	for _, v := range e.Values {
		if err := add(v.Name, v.Value); err != nil {
			return "", err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Properties)) {
		if err := add(k, e.Properties[k]); err != nil {
			return "", err
		}
	}
	b.WriteByte('}')
	return b.String(), nil
}

func hasCode(err error, code string) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == code
}
