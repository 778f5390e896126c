package awsfake

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

type qmsg struct {
	msgID, body, receipt string
	visibleAt            time.Time
	hidings              []hiding // since it was first received, for counts that lag
}

// hiding is a change of a received message's visibility: from then on, it
// is hidden until until.
type hiding struct{ from, until time.Time }

// hide hides a received message until until, from the clock's now.
func (m *qmsg) hide(now, until time.Time) {
	m.visibleAt = until
	m.hidings = append(m.hidings, hiding{from: now, until: until})
}

// inFlightAt tells whether the message was received and hidden at t.
func (m *qmsg) inFlightAt(t time.Time) bool {
	for i := len(m.hidings) - 1; i >= 0; i-- {
		if !m.hidings[i].from.After(t) {
			return m.hidings[i].until.After(t)
		}
	}
	return false
}

type SentEntry struct {
	Body  string
	Delay int32
	At    time.Time // real time of the call
}

// queueState is one standard queue with its own clock: received messages are
// invisible for their visibility timeout, sent ones for their delay.
type queueState struct {
	url, name string
	// attributes are those CreateQueue set, tags the queue's tags.
	attributes, tags map[string]string
	messages         []*qmsg
}

func newQueue(url string) *queueState {
	return &queueState{url: url, name: path.Base(url), attributes: map[string]string{}, tags: map[string]string{}}
}

// byReceipt is the index of the message last received with handle h, or -1.
func (q *queueState) byReceipt(h *string) int {
	return slices.IndexFunc(q.messages, func(m *qmsg) bool { return m.receipt != "" && m.receipt == aws.ToString(h) })
}

// SQS holds queues by URL and records every call.
type SQS struct {
	Mu     sync.Mutex
	Clock  time.Time
	Queues map[string]*queueState
	// Log, when set, records the calls with other fakes'.
	Log *Log
	// deleted are the names of the queues DeleteQueue deleted, with when
	// (on Clock).
	deleted map[string]time.Time
	// BeforeCreateQueue, when set, runs (without the lock) at the start
	// of every CreateQueue: another party creating a queue in between.
	BeforeCreateQueue func(name string)
	seq               int
	// AdvancePerReceive moves the clock on at every receive (0: never).
	AdvancePerReceive time.Duration
	// CountLag: GetQueueAttributes counts the messages in flight as they
	// were this long ago on the queue's clock (SQS's counts are
	// approximate, and may lag); deleted messages are not counted.
	CountLag time.Duration

	Receives []*sqs.ReceiveMessageInput
	Received []string // bodies, in order
	Deletes  []*sqs.DeleteMessageBatchInput
	Sends    []*sqs.SendMessageBatchInput
	Sent     []SentEntry

	VisibilityChanges []*sqs.ChangeMessageVisibilityBatchInput

	counts  map[string]int
	failNth map[string]map[int]error
	// FailDelete makes DeleteMessageBatch report the entry of a message
	// with this instance id as failed.
	FailDelete map[string]bool
	// FailSendEntries: this many SendMessageBatch calls report their first
	// entry as failed.
	FailSendEntries int
	// ReceiveHook runs (without the lock) before every receive.
	ReceiveHook func(n int, in *sqs.ReceiveMessageInput)
}

// NewSQS holds an empty standard queue per URL.
func NewSQS(urls ...string) *SQS {
	s := &SQS{Clock: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Queues: map[string]*queueState{},
		counts: map[string]int{}, failNth: map[string]map[int]error{}, FailDelete: map[string]bool{}, deleted: map[string]time.Time{}}
	for _, u := range urls {
		s.Queues[u] = newQueue(u)
	}
	return s
}

// Fail makes the n-th call of op fail with err.
func (s *SQS) Fail(op string, n int, err error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.failNth[op] == nil {
		s.failNth[op] = map[int]error{}
	}
	s.failNth[op][n] = err
}

func (s *SQS) enter(ctx context.Context, op string, in any) error {
	if err := ctx.Err(); err != nil { // as the SDK: a cancelled call is not sent
		return err
	}
	s.Log.record("sqs", op, in)
	s.counts[op]++
	return s.failNth[op][s.counts[op]]
}

func (s *SQS) queue(url *string) (*queueState, error) {
	q := s.Queues[aws.ToString(url)]
	if q == nil {
		return nil, queueMissing()
	}
	return q, nil
}

// Add puts a message in a queue, visible at once (test setup).
func (s *SQS) Add(url, body string) {
	s.Mu.Lock()
	now := s.Clock
	s.Mu.Unlock()
	s.AddAt(url, body, now)
}

// AddAt puts a message in a queue, visible from at on the queue's clock
// (test setup).
func (s *SQS) AddAt(url, body string, at time.Time) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.seq++
	s.Queues[url].messages = append(s.Queues[url].messages, &qmsg{msgID: "m" + strconv.Itoa(s.seq), body: body, visibleAt: at})
}

func (s *SQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if err := limits(ctx, "sqs", "ReceiveMessage", in, func(ctx context.Context) error { return sdkErr(sqsLimits.ReceiveMessage(ctx, in)) }); err != nil {
		return nil, err
	}
	s.Mu.Lock()
	hook := s.ReceiveHook
	n := len(s.Receives) + 1
	s.Mu.Unlock()
	if hook != nil {
		hook(n, in)
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Receives = append(s.Receives, in)
	if err := s.enter(ctx, "ReceiveMessage", in); err != nil {
		return nil, err
	}
	q, err := s.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	most := max(1, int(in.MaxNumberOfMessages)) // unsent (0): SQS's default, 1
	s.Clock = s.Clock.Add(s.AdvancePerReceive)
	visible := func() []*qmsg {
		var v []*qmsg
		for _, m := range q.messages {
			if !m.visibleAt.After(s.Clock) && len(v) < most {
				v = append(v, m)
			}
		}
		return v
	}
	got := visible()
	if len(got) == 0 && in.WaitTimeSeconds > 0 {
		// Long poll: wait (on the fake clock) for the first message to
		// become visible, at most WaitTimeSeconds.
		end := s.Clock.Add(time.Duration(in.WaitTimeSeconds) * time.Second)
		next := end
		for _, m := range q.messages {
			if m.visibleAt.Before(next) {
				next = m.visibleAt
			}
		}
		s.Clock = next
		got = visible()
	}
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range got {
		s.seq++
		m.receipt = fmt.Sprintf("rh-%s-%d", m.msgID, s.seq)
		m.hide(s.Clock, s.Clock.Add(time.Duration(in.VisibilityTimeout)*time.Second))
		s.Received = append(s.Received, m.body)
		out.Messages = append(out.Messages, sqstypes.Message{MessageId: aws.String(m.msgID), ReceiptHandle: aws.String(m.receipt), Body: aws.String(m.body)})
	}
	return out, nil
}

// ChangeMessageVisibilityBatch sets when received messages become visible.
func (s *SQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if err := limits(ctx, "sqs", "ChangeMessageVisibilityBatch", in, func(ctx context.Context) error { return sdkErr(sqsLimits.ChangeMessageVisibilityBatch(ctx, in)) }); err != nil {
		return nil, err
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.VisibilityChanges = append(s.VisibilityChanges, in)
	if err := s.enter(ctx, "ChangeMessageVisibilityBatch", in); err != nil {
		return nil, err
	}
	q, err := s.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		if idx := q.byReceipt(e.ReceiptHandle); idx >= 0 {
			q.messages[idx].hide(s.Clock, s.Clock.Add(time.Duration(e.VisibilityTimeout)*time.Second))
			out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
		} else {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("no such receipt handle"), SenderFault: true})
		}
	}
	return out, nil
}

// GetQueueAttributes answers the queue's ARN, the attributes CreateQueue
// set, and its message counts: visible now, in flight (received and not
// visible again yet, as CountLag ago) and delayed (sent, not visible yet).
func (s *SQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return queueCall(ctx, s, "GetQueueAttributes", in.QueueUrl, in, sqsLimits.GetQueueAttributes, func(q *queueState) (*sqs.GetQueueAttributesOutput, error) {
		all := maps.Clone(q.attributes)
		all[string(sqstypes.QueueAttributeNameQueueArn)] = "arn:aws:sqs:" + Region + ":" + Account + ":" + q.name
		var visible, inFlight, delayed int
		for _, m := range q.messages {
			switch {
			case !m.visibleAt.After(s.Clock):
				visible++
			case len(m.hidings) == 0:
				delayed++
			}
			if m.inFlightAt(s.Clock.Add(-s.CountLag)) {
				inFlight++
			}
		}
		all[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)] = strconv.Itoa(visible)
		all[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)] = strconv.Itoa(inFlight)
		all[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)] = strconv.Itoa(delayed)
		out := &sqs.GetQueueAttributesOutput{Attributes: map[string]string{}}
		for _, name := range in.AttributeNames {
			if name == sqstypes.QueueAttributeNameAll {
				out.Attributes = all
				break
			}
			if v, ok := all[string(name)]; ok {
				out.Attributes[string(name)] = v
			}
		}
		return out, nil
	})
}

func (s *SQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if err := limits(ctx, "sqs", "DeleteMessageBatch", in, func(ctx context.Context) error { return sdkErr(sqsLimits.DeleteMessageBatch(ctx, in)) }); err != nil {
		return nil, err
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Deletes = append(s.Deletes, in)
	if err := s.enter(ctx, "DeleteMessageBatch", in); err != nil {
		return nil, err
	}
	q, err := s.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		idx := q.byReceipt(e.ReceiptHandle)
		if idx >= 0 && s.FailDelete[BodyID(q.messages[idx].body)] {
			idx = -1
		}
		if idx < 0 {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("invalid receipt handle")})
			continue
		}
		q.messages = slices.Delete(q.messages, idx, idx+1)
		out.Successful = append(out.Successful, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (s *SQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := limits(ctx, "sqs", "SendMessageBatch", in, func(ctx context.Context) error { return sdkErr(sqsLimits.SendMessageBatch(ctx, in)) }); err != nil {
		return nil, err
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Sends = append(s.Sends, in)
	if err := s.enter(ctx, "SendMessageBatch", in); err != nil {
		return nil, err
	}
	q, err := s.queue(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	out := &sqs.SendMessageBatchOutput{}
	// The entries SQS fails alone (awslimits.CheckEntries): the others are
	// sent.
	failed := map[string]awslimits.EntryFailure{}
	for _, f := range awslimits.CheckEntries("sqs", "SendMessageBatch", Document("sqs", in)) {
		failed[f.ID] = f
	}
	for i, e := range in.Entries {
		if f, ok := failed[aws.ToString(e.Id)]; ok {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String(f.Code), Message: aws.String(f.Message), SenderFault: f.SenderFault})
			continue
		}
		if i == 0 && s.FailSendEntries > 0 {
			s.FailSendEntries--
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected entry failure")})
			continue
		}
		s.seq++
		q.messages = append(q.messages, &qmsg{msgID: "m" + strconv.Itoa(s.seq), body: aws.ToString(e.MessageBody), visibleAt: s.Clock.Add(time.Duration(e.DelaySeconds) * time.Second)})
		s.Sent = append(s.Sent, SentEntry{Body: aws.ToString(e.MessageBody), Delay: e.DelaySeconds, At: time.Now()})
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m" + strconv.Itoa(s.seq))})
	}
	return out, nil
}

// BodyID is the instance id of a message body, or the body when it has none.
func BodyID(body string) string {
	m, err := protocol.ParseMessage(body)
	if err != nil || m.ID == "" {
		return body
	}
	return m.ID
}

// SentEntries are the messages SendMessageBatch queued, in order.
func (s *SQS) SentEntries() []SentEntry {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return slices.Clone(s.Sent)
}

// ReceiveInputs are the ReceiveMessage calls, in order.
func (s *SQS) ReceiveInputs() []*sqs.ReceiveMessageInput {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return slices.Clone(s.Receives)
}

// Bodies are the bodies of the messages in a queue, visible or not, in
// the order they were sent.
func (s *SQS) Bodies(url string) []string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	var out []string
	for _, m := range s.Queues[url].messages {
		out = append(out, m.body)
	}
	return out
}

// Count is how many calls of op the fake answered or failed.
func (s *SQS) Count(op string) int {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.counts[op]
}

// VisibleIDs are the instance ids (or raw bodies) of the messages a receive
// could return now, sorted.
func (s *SQS) VisibleIDs(url string) []string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	var ids []string
	for _, m := range s.Queues[url].messages {
		if !m.visibleAt.After(s.Clock) {
			ids = append(ids, BodyID(m.body))
		}
	}
	sort.Strings(ids)
	return ids
}

// CallCount is how many calls the fake answered or failed, of any kind.
func (s *SQS) CallCount() int {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	n := 0
	for _, c := range s.counts {
		n += c
	}
	return n
}
