package pool

import (
	"errors"

	"github.com/aws/smithy-go"
)

// ErrNotFound means the pool's table does not exist.
var ErrNotFound = errors.New("pool not found")

// HasErrorCode reports whether err is an AWS API error with one of codes.
func HasErrorCode(err error, codes ...string) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	for _, c := range codes {
		if apiErr.ErrorCode() == c {
			return true
		}
	}
	return false
}

func isTableMissing(err error) bool { return HasErrorCode(err, "ResourceNotFoundException") }

func isQueueMissing(err error) bool {
	return HasErrorCode(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")
}

// isQueueDeletedRecently: SQS refuses a queue name for 60 s after deleting it.
func isQueueDeletedRecently(err error) bool {
	return HasErrorCode(err, "AWS.SimpleQueueService.QueueDeletedRecently", "QueueDeletedRecently")
}

// isQueueNameTaken: CreateQueue found a queue of that name whose attributes
// (or, on AWS, tags) differ from the request's.
func isQueueNameTaken(err error) bool {
	return HasErrorCode(err, "QueueNameExists", "QueueAlreadyExists", "AWS.SimpleQueueService.QueueNameExists")
}
