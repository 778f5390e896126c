package awslimits

import (
	"fmt"
	"regexp"
	"unicode/utf8"
)

// SQS's limits (JSON protocol: parameters as the JSON body names them).
const (
	// MaxBatchEntries is the most entries a batch call takes.
	MaxBatchEntries = 10
	// MaxMessageBytes is a message's size, and a batch's in all: 1 MiB
	// since August 2025 (256 KiB before).
	MaxMessageBytes = 1 << 20
	// MaxDelaySeconds bounds a message's delay.
	MaxDelaySeconds = 900
	// MaxVisibilityTimeout bounds a visibility timeout: 12 hours.
	MaxVisibilityTimeout = 43200
	// MaxWaitTimeSeconds bounds a long poll.
	MaxWaitTimeSeconds = 20
	// MaxQueueNameLength bounds a queue's name.
	MaxQueueNameLength = 80
)

// batchActions are SQS's batch calls, with the name of their entries'
// shape.
var batchActions = map[string]string{
	"SendMessageBatch":             "SendMessageBatchRequestEntry",
	"DeleteMessageBatch":           "DeleteMessageBatchRequestEntry",
	"ChangeMessageVisibilityBatch": "ChangeMessageVisibilityBatchRequestEntry",
}

var (
	batchEntryIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	queueNamePattern    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$|^[A-Za-z0-9_-]{1,75}\.fifo$`)
)

const sqsAPI = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/"

// ballerina's tests run against a real SQS queue and assert its answers
// word for word.
const ballerinaSQS = "https://github.com/ballerina-platform/module-ballerinax-aws.sqs (ballerina/tests, run against SQS)"

var sqsRules = []Rule{
	{
		ID: "sqs-batch-entries", Service: "sqs", Actions: keys(batchActions),
		Limit: "A batch call takes 1 to 10 entries, with distinct ids of at most 80 letters, digits, '-' and '_'.",
		Check: func(action string, req map[string]any) *Refusal {
			entries := list(req, "Entries")
			switch {
			case len(entries) == 0:
				return sqsError("AWS.SimpleQueueService.EmptyBatchRequest", "EmptyBatchRequest",
					"There should be at least one "+batchActions[action]+" in the request.")
			case len(entries) > MaxBatchEntries:
				return sqsError("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "TooManyEntriesInBatchRequest",
					fmt.Sprintf("Maximum number of entries per request are %d. You have sent %d.", MaxBatchEntries, len(entries)))
			}
			seen := map[string]bool{}
			for _, e := range entries {
				id, _ := str(field(e, "Id"))
				if !batchEntryIDPattern.MatchString(id) {
					return sqsError("AWS.SimpleQueueService.InvalidBatchEntryId", "InvalidBatchEntryId",
						"A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
				}
				if seen[id] {
					return sqsError("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "BatchEntryIdsNotDistinct", "Id "+id+" repeated.")
				}
				seen[id] = true
			}
			return nil
		},
		Wording: Reported,
		Source: sqsAPI + "API_SendMessageBatch.html, " + sqsAPI + "API_SendMessageBatchRequestEntry.html (the limits); the answers: " + ballerinaSQS +
			" (empty, 11 entries, a repeated id); https://github.com/localstack/localstack/issues/7312, " +
			"https://github.com/Particular/NServiceBus.AmazonSQS/pull/303 (InvalidBatchEntryId)",
	},
	{
		ID: "sqs-message-size", Service: "sqs", Actions: []string{"SendMessage", "SendMessageBatch"},
		Limit: "A message is at most 1 MiB (1,048,576 bytes), and so is a batch's total.",
		Check: func(action string, req map[string]any) *Refusal {
			total := 0
			for _, body := range messageBodies(action, req) {
				if len(body) > MaxMessageBytes {
					return sqsError("InvalidParameterValue", "InvalidParameterValue",
						fmt.Sprintf("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", MaxMessageBytes))
				}
				total += len(body)
			}
			if total > MaxMessageBytes {
				return sqsError("AWS.SimpleQueueService.BatchRequestTooLong", "BatchRequestTooLong",
					fmt.Sprintf("Batch requests cannot be longer than %d bytes. You have sent %d bytes.", MaxMessageBytes, total))
			}
			return nil
		},
		Wording: Reported,
		Source: sqsAPI + "API_SendMessage.html (\"The maximum size is 1 MiB or 1,048,576 bytes\"; raised from 256 KiB, " +
			"https://aws.amazon.com/blogs/compute/more-room-to-build-serverless-services-now-support-payloads-up-to-1-mb); the answers, " +
			"reported at 262144 bytes: https://github.com/inferablehq/inferable/issues/306, https://github.com/datacite/lupo/issues/104, " + ballerinaSQS + " (BatchRequestTooLong)",
	},
	{
		// SendMessage is refused whole; SendMessageBatch fails the
		// entries alone (Entries), and sends the others.
		ID: "sqs-message-characters", Service: "sqs", Actions: []string{"SendMessage", "SendMessageBatch"},
		Limit: "A message body is not empty and holds only #x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD and #x10000-#x10FFFF; a batch fails the entries that do not, and sends the others.",
		Check: func(action string, req map[string]any) *Refusal {
			if action != "SendMessage" {
				return nil
			}
			body, _ := str(field(req, "MessageBody"))
			if body == "" {
				return sqsError("MissingParameter", "MissingParameter", "The request must contain the parameter MessageBody.")
			}
			if r, bad := invalidCharacter(body); bad {
				return sqsError("InvalidMessageContents", "InvalidMessageContents", invalidMessageContents(r))
			}
			return nil
		},
		Entries: func(_ string, req map[string]any) []EntryFailure {
			var out []EntryFailure
			for _, e := range list(req, "Entries") {
				body, _ := str(field(e, "MessageBody"))
				if r, bad := invalidCharacter(body); bad {
					id, _ := str(field(e, "Id"))
					out = append(out, EntryFailure{ID: id, Code: "InvalidMessageContents", Message: invalidMessageContents(r), SenderFault: true})
				}
			}
			return out
		},
		Wording: Reported,
		Source: sqsAPI + "API_SendMessage.html (the characters; \"Amazon SQS rejects the message and returns an InvalidMessageContents error\"), " +
			sqsAPI + "API_SendMessageBatch.html (\"The result of sending each message is reported individually in the response\"); the answers: " +
			"https://github.com/Particular/NServiceBus.AmazonSQS/issues/2630, https://github.com/asim/nitro-plugins/issues/437, " + ballerinaSQS +
			" (an empty body); an entry's, https://github.com/localstack/localstack/issues/4135 (the others sent, the entry failed with the code; " +
			"its message as SendMessage's). An empty body in a batch fails its entry too, with a code no report gives: not modelled",
	},
	{
		ID: "sqs-delay-seconds", Service: "sqs", Actions: []string{"SendMessage", "SendMessageBatch"},
		Limit: "DelaySeconds is 0 to 900.",
		Check: func(action string, req map[string]any) *Refusal {
			items := []any{req}
			if action == "SendMessageBatch" {
				items = list(req, "Entries")
			}
			for _, it := range items {
				if d, ok := integer(field(it, "DelaySeconds")); ok && (d < 0 || d > MaxDelaySeconds) {
					return sqsError("InvalidParameterValue", "InvalidParameterValue",
						fmt.Sprintf("Value %d for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= %d.", d, MaxDelaySeconds))
				}
			}
			return nil
		},
		Wording: Reported,
		Source:  sqsAPI + "API_SendMessage.html; the answer: " + ballerinaSQS,
	},
	{
		ID: "sqs-receive", Service: "sqs", Actions: []string{"ReceiveMessage"},
		Limit: "ReceiveMessage: MaxNumberOfMessages 1 to 10, WaitTimeSeconds 0 to 20.",
		Check: func(_ string, req map[string]any) *Refusal {
			if n, ok := integer(field(req, "MaxNumberOfMessages")); ok && (n < 1 || n > MaxBatchEntries) {
				return sqsError("InvalidParameterValue", "InvalidParameterValue",
					fmt.Sprintf("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and %d, if provided.", n, MaxBatchEntries))
			}
			if w, ok := integer(field(req, "WaitTimeSeconds")); ok && (w < 0 || w > MaxWaitTimeSeconds) {
				return sqsError("InvalidParameterValue", "InvalidParameterValue",
					fmt.Sprintf("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= %d, if provided.", w, MaxWaitTimeSeconds))
			}
			return nil
		},
		Wording: Reported,
		Source: sqsAPI + "API_ReceiveMessage.html; the answers: https://github.com/aws/aws-sdk-java/issues/197 (MaxNumberOfMessages), " +
			"https://github.com/argoproj/argo-events/pull/260, https://github.com/awsdocs/aws-doc-sdk-examples/issues/645 (WaitTimeSeconds)",
	},
	{
		ID: "sqs-visibility-timeout", Service: "sqs", Actions: []string{"ReceiveMessage", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch"},
		Limit: "A visibility timeout is 0 to 43200 seconds (12 hours), counted from the receive.",
		Check: func(action string, req map[string]any) *Refusal {
			items := []any{req}
			if action == "ChangeMessageVisibilityBatch" {
				items = list(req, "Entries")
			}
			for _, it := range items {
				if v, ok := integer(field(it, "VisibilityTimeout")); ok && (v < 0 || v > MaxVisibilityTimeout) {
					return sqsError("InvalidParameterValue", "InvalidParameterValue",
						fmt.Sprintf("Value %d for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [%d seconds].", v, MaxVisibilityTimeout))
				}
			}
			return nil
		},
		Wording: Reported,
		Source: sqsAPI + "API_ChangeMessageVisibility.html; the answer: https://github.com/aws/aws-sdk-net/issues/794, " +
			"https://github.com/localstack/localstack/issues/3956 (the total since the receive, which a stateless front cannot count: it refuses a value past 43200)",
	},
	{
		ID: "sqs-queue-name", Service: "sqs", Actions: []string{"CreateQueue"},
		Limit: "A queue name is 1 to 80 letters, digits, '-' and '_' (a FIFO queue's ending in .fifo).",
		Check: func(_ string, req map[string]any) *Refusal {
			if name, _ := str(field(req, "QueueName")); !queueNamePattern.MatchString(name) {
				return sqsError("InvalidParameterValue", "InvalidParameterValue", "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
			}
			return nil
		},
		Wording: Reported,
		Source:  sqsAPI + "API_CreateQueue.html; the answer: " + ballerinaSQS,
	},
	{
		ID: "sqs-queue-attributes", Service: "sqs", Actions: []string{"CreateQueue"},
		Limit: "Queue attributes: DelaySeconds 0 to 900, VisibilityTimeout 0 to 43200, ReceiveMessageWaitTimeSeconds 0 to 20, MessageRetentionPeriod 60 to 1209600, MaximumMessageSize 1024 to 1048576.",
		Check: func(_ string, req map[string]any) *Refusal {
			attrs, _ := field(req, "Attributes").(map[string]any)
			for name, r := range queueAttributeRanges {
				s, ok := str(attrs[name])
				if !ok {
					continue
				}
				var n int64
				if _, err := fmt.Sscan(s, &n); err != nil || n < r[0] || n > r[1] {
					return sqsError("InvalidAttributeValue", "InvalidAttributeValue", "Invalid value for the parameter "+name+".")
				}
			}
			return nil
		},
		Wording: Reported,
		Source:  sqsAPI + "API_SetQueueAttributes.html (the ranges); the answer: " + ballerinaSQS + " (DelaySeconds; the others alike)",
	},
	{
		// SQS recommends at most 50 tags a queue ("We don't recommend
		// adding more than 50 tags to a queue") and documents no refusal:
		// the count is not a rule here (moto refuses a TagQueue of more
		// than 50, "Too many tags added for queue NAME.").
		ID: "sqs-tags", Service: "sqs", Actions: []string{"CreateQueue", "TagQueue"},
		Limit: "A queue's tag keys are 1 to 128 characters not starting with aws:, its values at most 256.",
		Check: func(action string, req map[string]any) *Refusal {
			name := "Tags"
			if action == "CreateQueue" {
				name = "tags"
			}
			tags, _ := field(req, name).(map[string]any)
			if problem := tagProblem(tags); problem != "" {
				return sqsError("InvalidParameterValue", "InvalidParameterValue", problem)
			}
			return nil
		},
		Wording: Ours,
		Source: "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html (Queue tag: the keys and values; " +
			"50 tags a queue recommended, not refused), " + sqsAPI + "API_TagQueue.html; " + sqsAPI + "CommonErrors.html (the code)",
	},
}

// queueAttributeRanges are the queue attributes CreateQueue checks.
var queueAttributeRanges = map[string][2]int64{
	"DelaySeconds": {0, MaxDelaySeconds}, "VisibilityTimeout": {0, MaxVisibilityTimeout},
	"ReceiveMessageWaitTimeSeconds": {0, MaxWaitTimeSeconds}, "MessageRetentionPeriod": {60, 1209600},
	"MaximumMessageSize": {1024, MaxMessageBytes},
}

// messageBodies are the bodies a send carries.
func messageBodies(action string, req map[string]any) []string {
	if action == "SendMessage" {
		body, _ := str(field(req, "MessageBody"))
		return []string{body}
	}
	var out []string
	for _, e := range list(req, "Entries") {
		body, _ := str(field(e, "MessageBody"))
		out = append(out, body)
	}
	return out
}

// invalidCharacter is the first character of a message body SQS does not
// take, if any.
func invalidCharacter(body string) (rune, bool) {
	for _, r := range body {
		if !xmlChar(r) {
			return r, true
		}
	}
	return 0, false
}

// invalidMessageContents is SQS's answer to a body holding r.
func invalidMessageContents(r rune) string {
	return fmt.Sprintf("Invalid binary character '#x%X' was found in the message body, "+
		"the set of allowed characters is #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF].", r)
}

// xmlChar: the characters XML 1.0 allows, which SQS takes in a message.
func xmlChar(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}

// tagProblem says what AWS refuses in a map of tags' keys and values
// (SQS, DynamoDB), or "": the test front's wording.
func tagProblem(tags map[string]any) string {
	for _, k := range sortedKeys(tags) {
		v := tags[k]
		value, _ := str(v)
		switch {
		case k == "" || utf8.RuneCountInString(k) > MaxTagKeyLength:
			return fmt.Sprintf("Tag keys must be between 1 and %d characters in length (the test front's wording).", MaxTagKeyLength)
		case reservedTagKey(k):
			return "Tag keys starting with 'aws:' are reserved for internal use (the test front's wording)."
		case utf8.RuneCountInString(value) > MaxTagValueLength:
			return fmt.Sprintf("Tag values must be at most %d characters in length (the test front's wording).", MaxTagValueLength)
		}
	}
	return ""
}

func tagCountProblem(n int) string {
	return fmt.Sprintf("A resource takes at most %d tags; the request gives %d (the test front's wording).", MaxTagsPerResource, n)
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
