package awsfake

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// A queue's life: CreateQueue, GetQueueUrl, DeleteQueue and its tags. The
// errors carry the codes the SDK reports: SQS's query-compatible ones,
// which it answers in x-amzn-query-error (as internal/awslimits'
// refusals do).

// queueDeletedFor is how long SQS refuses the name of a deleted queue
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_CreateQueue.html:
// "After you delete a queue, you must wait at least 60 seconds before
// creating a queue with the same name").
const queueDeletedFor = 60 * time.Second

func queueMissing() error {
	return &sqstypes.QueueDoesNotExist{Message: aws.String("The specified queue does not exist."),
		ErrorCodeOverride: aws.String("AWS.SimpleQueueService.NonExistentQueue")}
}

// queueCall is one call of SQS's: AWS's limits, then under the lock the
// call's record, then answer with the queue at url (nil: none named).
func queueCall[In, Out any](ctx context.Context, s *SQS, op string, url *string, in In,
	sdk func(context.Context, In, ...func(*sqs.Options)) (Out, error), answer func(q *queueState) (Out, error)) (Out, error) {
	var none Out
	if err := limits(ctx, "sqs", op, in, func(ctx context.Context) error { return sdkErr(sdk(ctx, in)) }); err != nil {
		return none, err
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if err := s.enter(ctx, op, in); err != nil {
		return none, err
	}
	var q *queueState
	if url != nil {
		var err error
		if q, err = s.queue(url); err != nil {
			return none, err
		}
	}
	return answer(q)
}

// QueueURL is the URL SQS gives the queue named name.
func QueueURL(name string) string {
	return "https://sqs." + Region + ".amazonaws.com/" + Account + "/" + name
}

// AddQueue makes a queue named name with tags, in place of any of that
// name, and returns its URL (test setup).
func (s *SQS) AddQueue(name string, tags map[string]string) string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.addQueue(name, nil, tags).url
}

// addQueue makes a queue. Called with mu held.
func (s *SQS) addQueue(name string, attributes, tags map[string]string) *queueState {
	q := newQueue(QueueURL(name))
	maps.Copy(q.attributes, attributes)
	maps.Copy(q.tags, tags)
	s.Queues[q.url] = q
	return q
}

// byName is the queue named name, or nil. Called with mu held.
func (s *SQS) byName(name string) *queueState {
	for _, q := range s.Queues {
		if q.name == name {
			return q
		}
	}
	return nil
}

// URLOf is the URL of the queue named name; "" when there is none.
func (s *SQS) URLOf(name string) string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if q := s.byName(name); q != nil {
		return q.url
	}
	return ""
}

// QueueNames are the names of the queues, sorted.
func (s *SQS) QueueNames() []string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	var names []string
	for _, q := range s.Queues {
		names = append(names, q.name)
	}
	slices.Sort(names)
	return names
}

// Tags are the tags of the queue at url; nil when there is none.
func (s *SQS) Tags(url string) map[string]string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if q := s.Queues[url]; q != nil {
		return maps.Clone(q.tags)
	}
	return nil
}

// AddInFlight puts a message in a queue as received, hidden for hiddenFor
// (test setup).
func (s *SQS) AddInFlight(url, body string, hiddenFor time.Duration) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.seq++
	m := &qmsg{msgID: "m" + strconv.Itoa(s.seq), body: body, receipt: "rh-setup-" + strconv.Itoa(s.seq)}
	m.hide(s.Clock, s.Clock.Add(hiddenFor))
	s.Queues[url].messages = append(s.Queues[url].messages, m)
}

// CreateQueue makes a standard queue, or returns the URL of the queue of
// that name when the request gives exactly its attributes and tags, and
// otherwise fails with QueueNameExists
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_CreateQueue.html:
// "If you provide the name of an existing queue along with the exact names
// and values of all the queue's attributes, CreateQueue returns the queue
// URL for the existing queue. If the queue name, attribute names, or
// attribute values don't match an existing queue, CreateQueue returns an
// error"). Tags count as attributes here, which the page does not say and
// SQS does (reported in https://github.com/Bogdanp/dramatiq_sqs/pull/13
// and https://github.com/awslabs/amazon-sqs-java-temporary-queues-client/pull/70).
// A name deleted less than a minute ago (on Clock) is refused.
func (s *SQS) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, _ ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	s.Mu.Lock()
	before := s.BeforeCreateQueue
	s.Mu.Unlock()
	name := aws.ToString(in.QueueName)
	if before != nil {
		before(name)
	}
	return queueCall(ctx, s, "CreateQueue", nil, in, sqsLimits.CreateQueue, func(*queueState) (*sqs.CreateQueueOutput, error) {
		q := s.byName(name)
		switch {
		case q == nil && s.Clock.Before(s.deleted[name].Add(queueDeletedFor)):
			return nil, &sqstypes.QueueDeletedRecently{ErrorCodeOverride: aws.String("AWS.SimpleQueueService.QueueDeletedRecently"),
				Message: aws.String("You must wait 60 seconds after deleting a queue before you can create another with the same name.")}
		case q == nil:
			q = s.addQueue(name, in.Attributes, in.Tags)
		case !maps.Equal(q.attributes, in.Attributes):
			return nil, queueNameExists("attribute(s)")
		case !maps.Equal(q.tags, in.Tags):
			return nil, queueNameExists("tags")
		}
		return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
	})
}

func queueNameExists(what string) error {
	return &sqstypes.QueueNameExists{ErrorCodeOverride: aws.String("QueueAlreadyExists"),
		Message: aws.String("A queue already exists with the same name and a different value for " + what)}
}

func (s *SQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return queueCall(ctx, s, "GetQueueUrl", nil, in, sqsLimits.GetQueueUrl, func(*queueState) (*sqs.GetQueueUrlOutput, error) {
		q := s.byName(aws.ToString(in.QueueName))
		if q == nil {
			return nil, queueMissing()
		}
		return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(q.url)}, nil
	})
}

// DeleteQueue deletes a queue and its messages at once (SQS takes up to 60
// seconds).
func (s *SQS) DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, _ ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	return queueCall(ctx, s, "DeleteQueue", in.QueueUrl, in, sqsLimits.DeleteQueue, func(q *queueState) (*sqs.DeleteQueueOutput, error) {
		delete(s.Queues, q.url)
		s.deleted[q.name] = s.Clock
		return &sqs.DeleteQueueOutput{}, nil
	})
}

func (s *SQS) TagQueue(ctx context.Context, in *sqs.TagQueueInput, _ ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	return queueCall(ctx, s, "TagQueue", in.QueueUrl, in, sqsLimits.TagQueue, func(q *queueState) (*sqs.TagQueueOutput, error) {
		maps.Copy(q.tags, in.Tags)
		return &sqs.TagQueueOutput{}, nil
	})
}

func (s *SQS) UntagQueue(ctx context.Context, in *sqs.UntagQueueInput, _ ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error) {
	return queueCall(ctx, s, "UntagQueue", in.QueueUrl, in, sqsLimits.UntagQueue, func(q *queueState) (*sqs.UntagQueueOutput, error) {
		for _, k := range in.TagKeys {
			delete(q.tags, k)
		}
		return &sqs.UntagQueueOutput{}, nil
	})
}

func (s *SQS) ListQueueTags(ctx context.Context, in *sqs.ListQueueTagsInput, _ ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	return queueCall(ctx, s, "ListQueueTags", in.QueueUrl, in, sqsLimits.ListQueueTags, func(q *queueState) (*sqs.ListQueueTagsOutput, error) {
		return &sqs.ListQueueTagsOutput{Tags: maps.Clone(q.tags)}, nil
	})
}
