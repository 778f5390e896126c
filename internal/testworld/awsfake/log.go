package awsfake

import (
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The account and region of the fakes' ARNs and queue URLs.
const (
	Account = "123456789012"
	Region  = "eu-west-1"
)

// Log is the calls made to a set of fakes, across services, in the order
// they were made: a test gives every fake the same Log (their Log field)
// and asserts which calls its code made, and in which order. A refused
// call (internal/awslimits) is not recorded, as it changes nothing.
type Log struct {
	mu    sync.Mutex
	calls []Logged
}

// Logged is one call a Log recorded.
type Logged struct {
	Service, Action string
	// Target is what the call named: an item's key (PK|SK), a table's
	// name or ARN, a queue's URL (its name, for CreateQueue and
	// GetQueueUrl), instance ids (comma-separated), a log group and
	// stream; "" for a call of many items.
	Target string
	In     any
}

func (c Logged) String() string { return strings.TrimSpace(c.Action + " " + c.Target) }

// Mutates tells whether the call changes something (any action but a read).
func (c Logged) Mutates() bool {
	for _, read := range []string{"Get", "Describe", "List", "Query", "BatchGet"} {
		if strings.HasPrefix(c.Action, read) {
			return false
		}
	}
	return true
}

// record notes a call; a nil Log records nothing.
func (l *Log) record(service, action string, in any) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, Logged{Service: service, Action: action, Target: target(in), In: in})
}

// Calls are the calls recorded, in order.
func (l *Log) Calls() []Logged {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// Mutating are the calls recorded that change something, as "Action
// Target", in order.
func (l *Log) Mutating() []string {
	var out []string
	for _, c := range l.Calls() {
		if c.Mutates() {
			out = append(out, c.String())
		}
	}
	return out
}

// Reset forgets the calls recorded so far.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = nil
}

// target is what an SDK input names (see Logged.Target): the first of its
// fields below that it sets.
func target(in any) string {
	v := reflect.ValueOf(in)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	v = v.Elem()
	for _, name := range []string{"Key", "Item", "QueueName", "QueueUrl", "InstanceIds", "ResourceArn", "TableName", "LogGroupName"} {
		f := v.FieldByName(name)
		if !f.IsValid() || f.IsZero() {
			continue
		}
		switch f := f.Interface().(type) {
		case map[string]types.AttributeValue:
			k, _ := keyString(item{"PK": f["PK"], "SK": f["SK"]})
			return k
		case *string:
			if stream := v.FieldByName("LogStreamName"); name == "LogGroupName" && stream.IsValid() && !stream.IsNil() {
				return *f + "/" + *stream.Interface().(*string)
			}
			return *f
		case []string:
			return strings.Join(f, ",")
		}
	}
	return ""
}
