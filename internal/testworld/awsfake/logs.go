package awsfake

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/smithy-go"
)

// Logs is an in-memory CloudWatch Logs: log groups of streams of events,
// as pools publish their metrics to them (CreateLogStream, PutLogEvents).
// Log groups are made by the test (AddGroup), as their owners make them.
type Logs struct {
	mu     sync.Mutex
	groups map[string]map[string][]types.InputLogEvent
	counts map[string]int
	fail   map[string]error
	// Log, when set, records the calls with other fakes'.
	Log *Log
}

// NewLogs holds the named, empty log groups.
func NewLogs(groups ...string) *Logs {
	l := &Logs{groups: map[string]map[string][]types.InputLogEvent{}, counts: map[string]int{}, fail: map[string]error{}}
	for _, g := range groups {
		l.AddGroup(g)
	}
	return l
}

// AddGroup makes an empty log group (test setup).
func (l *Logs) AddGroup(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.groups[name] == nil {
		l.groups[name] = map[string][]types.InputLogEvent{}
	}
}

// Fail makes every call of op fail with err (nil: succeed again).
func (l *Logs) Fail(op string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail[op] = err
}

// Calls is how many calls of op were made (refused ones not counted).
func (l *Logs) Calls(op string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[op]
}

// Streams are the names of a log group's streams, sorted.
func (l *Logs) Streams(group string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.groups[group]))
}

// Messages are the messages of a stream's events, in order.
func (l *Logs) Messages(group, stream string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.groups[group][stream] {
		out = append(out, aws.ToString(e.Message))
	}
	return out
}

func (l *Logs) enter(ctx context.Context, op string, in any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.Log.record("logs", op, in)
	l.counts[op]++
	return l.fail[op]
}

func logsError(code, message string) error {
	return &smithy.GenericAPIError{Code: code, Message: message, Fault: smithy.FaultClient}
}

// CreateLogStream makes a stream in an existing log group.
func (l *Logs) CreateLogStream(ctx context.Context, in *cloudwatchlogs.CreateLogStreamInput, _ ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.CreateLogStreamOutput, error) {
	if err := limits(ctx, "logs", "CreateLogStream", in, func(ctx context.Context) error { return sdkErr(logsLimits.CreateLogStream(ctx, in)) }); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.enter(ctx, "CreateLogStream", in); err != nil {
		return nil, err
	}
	g := l.groups[aws.ToString(in.LogGroupName)]
	switch {
	case g == nil:
		return nil, logsError("ResourceNotFoundException", "The specified log group does not exist.")
	case g[aws.ToString(in.LogStreamName)] != nil:
		return nil, logsError("ResourceAlreadyExistsException", "The specified log stream already exists")
	}
	g[aws.ToString(in.LogStreamName)] = []types.InputLogEvent{}
	return &cloudwatchlogs.CreateLogStreamOutput{}, nil
}

// PutLogEvents appends events to an existing stream.
func (l *Logs) PutLogEvents(ctx context.Context, in *cloudwatchlogs.PutLogEventsInput, _ ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.PutLogEventsOutput, error) {
	if err := limits(ctx, "logs", "PutLogEvents", in, func(ctx context.Context) error { return sdkErr(logsLimits.PutLogEvents(ctx, in)) }); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.enter(ctx, "PutLogEvents", in); err != nil {
		return nil, err
	}
	g := l.groups[aws.ToString(in.LogGroupName)]
	if g == nil {
		return nil, logsError("ResourceNotFoundException", "The specified log group does not exist.")
	}
	s, ok := g[aws.ToString(in.LogStreamName)]
	if !ok {
		return nil, logsError("ResourceNotFoundException", "The specified log stream does not exist.")
	}
	g[aws.ToString(in.LogStreamName)] = append(s, in.LogEvents...)
	return &cloudwatchlogs.PutLogEventsOutput{}, nil
}
