package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// tableWaitTimeout bounds waiting for a table to become active or vanish
// when the caller's context has no deadline of its own.
const tableWaitTimeout = 10 * time.Minute

func (m *Manager) createTable(ctx context.Context, name string, tags map[string]string) (string, error) {
	out, err := m.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(protocol.TableName(name)),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(protocol.AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(protocol.AttrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(protocol.AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(protocol.AttrSK), KeyType: types.KeyTypeRange},
		},
		Tags: dynamoTags(tags),
	})
	if err != nil {
		return "", fmt.Errorf("creating DynamoDB table %s: %w", name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(m.DynamoDB)
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(protocol.TableName(name))}, waitBudget(ctx)); err != nil {
		return "", fmt.Errorf("waiting for DynamoDB table %s to become active: %w", name, err)
	}
	return aws.ToString(out.TableDescription.TableArn), nil
}

// ensureTTL turns on the table's TTL on protocol.AttrExpiresAt, so that
// terminated records and the items of gone agents do not pile up.
func (m *Manager) ensureTTL(ctx context.Context, name string) error {
	out, err := m.DynamoDB.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(protocol.TableName(name))})
	if err != nil {
		return fmt.Errorf("reading the TTL setting of table %s: %w", name, err)
	}
	if d := out.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == protocol.AttrExpiresAt &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = m.DynamoDB.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(protocol.TableName(name)),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(protocol.AttrExpiresAt), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("enabling TTL on table %s: %w", name, err)
	}
	return nil
}

// describeTable returns the table's ARN, or ErrNotFound.
func (m *Manager) describeTable(ctx context.Context, name string) (string, error) {
	out, err := m.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(protocol.TableName(name))})
	if isTableMissing(err) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading DynamoDB table %s: %w", name, err)
	}
	return aws.ToString(out.Table.TableArn), nil
}

func (m *Manager) deleteTable(ctx context.Context, name string) error {
	_, err := m.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(protocol.TableName(name))})
	if isTableMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting DynamoDB table %s: %w", name, err)
	}
	waiter := dynamodb.NewTableNotExistsWaiter(m.DynamoDB)
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(protocol.TableName(name))}, waitBudget(ctx)); err != nil {
		return fmt.Errorf("waiting for DynamoDB table %s to be deleted: %w", name, err)
	}
	return nil
}

// waitBudget is what is left of ctx's deadline, for the SDK's waiters.
func waitBudget(ctx context.Context) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		return time.Until(deadline)
	}
	return tableWaitTimeout
}

func (m *Manager) putConfig(ctx context.Context, cfg protocol.PoolConfig, now time.Time) error {
	_, err := m.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(protocol.TableName(cfg.Name)),
		Item:      cfg.Item(protocol.FormatTime(now)),
	})
	if err != nil {
		return fmt.Errorf("writing pool config item of %s: %w", cfg.Name, err)
	}
	return nil
}

// ReadConfig returns the pool config item of the named pool, or ErrNotFound.
func ReadConfig(ctx context.Context, db interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}, name string) (protocol.PoolConfig, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(protocol.TableName(name)),
		Key:            protocol.Key(protocol.TypeMetadata, protocol.PoolConfigID),
		ConsistentRead: aws.Bool(true),
	})
	if isTableMissing(err) {
		return protocol.PoolConfig{}, fmt.Errorf("%w: no DynamoDB table named %s", ErrNotFound, name)
	}
	if err != nil {
		return protocol.PoolConfig{}, fmt.Errorf("reading pool config item of %s: %w", name, err)
	}
	if out.Item == nil {
		return protocol.PoolConfig{}, fmt.Errorf("DynamoDB table %s holds no pool config item (%s / ID#%s): it is not an ec2runners pool", name, protocol.TypeMetadata, protocol.PoolConfigID)
	}
	return protocol.PoolConfigFromItem(out.Item)
}
