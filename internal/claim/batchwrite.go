package claim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
)

const (
	// batchWriteLimit is BatchWriteItem's limit of items per call.
	batchWriteLimit = awslimits.MaxBatchWriteItems
	// unprocessedAttempts bounds the calls for one batch: DynamoDB returns
	// unprocessed items (and keys) when throttled, which the SDK does not
	// retry.
	unprocessedAttempts = 8
	unprocessedBackoff  = 50 * time.Millisecond
)

// unprocessedPause waits before call attempt (1-based) of a batch that left
// items unprocessed: not before the first, then a jittered, growing wait,
// and an error past unprocessedAttempts.
func unprocessedPause(ctx context.Context, attempt int, what func() string) error {
	if attempt > unprocessedAttempts {
		return fmt.Errorf("%s unprocessed %d times", what(), unprocessedAttempts)
	}
	if attempt == 1 {
		return nil
	}
	wait := unprocessedBackoff << (attempt - 2)
	return sleep(ctx, wait/2+rand.N(wait/2+1))
}

// putAll writes items unconditionally, 25 per BatchWriteItem, and writes
// the items a call left unprocessed again after a jittered, growing wait.
func (s *store) putAll(ctx context.Context, items []map[string]types.AttributeValue) error {
	for chunk := range slices.Chunk(items, batchWriteLimit) {
		pending := make([]types.WriteRequest, len(chunk))
		for i, it := range chunk {
			pending[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
		}
		for attempt := 1; len(pending) > 0; attempt++ {
			if err := unprocessedPause(ctx, attempt, func() string {
				return fmt.Sprintf("table %s left %d of %d writes", s.table, len(pending), len(chunk))
			}); err != nil {
				return err
			}
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{s.table: pending}})
			if err != nil {
				return fmt.Errorf("writing to table %s: %w", s.table, err)
			}
			pending = out.UnprocessedItems[s.table]
		}
	}
	return nil
}
