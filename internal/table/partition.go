package table

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Item is one item of the table.
type Item = map[string]types.AttributeValue

// Querier reads the table's partitions.
type Querier interface {
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Partition calls fn for every item of the partition pk (protocol.TypeInstance,
// protocol.TypeClaim, ...) of the table tableName, in sort key order,
// following pages, read consistently. It stops at the first error, its
// own or fn's.
func Partition(ctx context.Context, db Querier, tableName, pk string, fn func(Item) error) error {
	p := dynamodb.NewQueryPaginator(db, &dynamodb.QueryInput{
		TableName:                 aws.String(tableName),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": protocol.AttrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, item := range page.Items {
			if err := fn(item); err != nil {
				return err
			}
		}
	}
	return nil
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
