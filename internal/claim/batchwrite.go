package claim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	// batchWriteLimit is BatchWriteItem's limit of items per call.
	batchWriteLimit = 25
	// unprocessedAttempts bounds the calls for one batch: DynamoDB returns
	// unprocessed items when throttled, which the SDK does not retry.
	unprocessedAttempts = 8
	unprocessedBackoff  = 50 * time.Millisecond
)

// putAll writes items unconditionally, 25 per BatchWriteItem, and writes
// the items a call left unprocessed again after a jittered, growing wait.
func (s *store) putAll(ctx context.Context, items []map[string]types.AttributeValue) error {
	for chunk := range slices.Chunk(items, batchWriteLimit) {
		pending := make([]types.WriteRequest, len(chunk))
		for i, it := range chunk {
			pending[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
		}
		for attempt := 1; len(pending) > 0; attempt++ {
			if attempt > unprocessedAttempts {
				return fmt.Errorf("table %s left %d of %d writes unprocessed %d times", s.table, len(pending), len(chunk), unprocessedAttempts)
			}
			if attempt > 1 {
				wait := unprocessedBackoff << (attempt - 2)
				if err := sleep(ctx, wait/2+rand.N(wait/2+1)); err != nil {
					return err
				}
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
