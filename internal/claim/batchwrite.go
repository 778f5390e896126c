package claim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

const (
	// batchWriteLimit is BatchWriteItem's limit of items per call.
	batchWriteLimit = awslimits.MaxBatchWriteItems
	// unprocessedAttempts bounds the calls for one batch: DynamoDB returns
	// unprocessed items (and keys) when throttled, which the SDK does not
	// retry.
	unprocessedAttempts = 8
)

// untilProcessed calls batch, which says how many of the table's total
// items (what: writes or reads) it left unprocessed, until it leaves none:
// again after a jittered, growing wait, and an error past
// unprocessedAttempts.
func (s *store) untilProcessed(ctx context.Context, what string, total int, batch func() (left int, err error)) error {
	policy := retry.Policy{Backoff: retry.Backoff{First: 50 * time.Millisecond, Jitter: true}, Attempts: unprocessedAttempts}
	calls := 0
	return retry.Do(ctx, policy, func() error {
		calls++
		left, err := batch()
		switch {
		case err != nil:
			return retry.Permanent(err)
		case left > 0:
			return fmt.Errorf("table %s left %d of %d %s unprocessed %d times", s.table, left, total, what, calls)
		}
		return nil
	})
}

// putAll writes items unconditionally, 25 per BatchWriteItem, and writes
// the items a call left unprocessed again after a jittered, growing wait.
func (s *store) putAll(ctx context.Context, items []map[string]types.AttributeValue) error {
	for chunk := range slices.Chunk(items, batchWriteLimit) {
		pending := make([]types.WriteRequest, len(chunk))
		for i, it := range chunk {
			pending[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
		}
		err := s.untilProcessed(ctx, "writes", len(chunk), func() (int, error) {
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{s.table: pending}})
			if err != nil {
				return 0, fmt.Errorf("writing to table %s: %w", s.table, err)
			}
			pending = out.UnprocessedItems[s.table]
			return len(pending), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
