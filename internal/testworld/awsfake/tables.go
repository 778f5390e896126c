package awsfake

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// A table's life: CreateTable, DescribeTable, DeleteTable, its TTL and its
// tags. A table is active from its creation on (CreateTable answers
// CREATING, the first DescribeTable ACTIVE), and gone at its deletion
// (DeleteTable answers DELETING, DescribeTable then ResourceNotFound), so
// the SDK's waiters return at their first look.

// tableCall is one call of the table's: AWS's limits, then under the lock
// the call's record and the table's check, then answer.
func tableCall[In, Out any](ctx context.Context, f *Table, op string, table *string, in In,
	sdk func(context.Context, In, ...func(*dynamodb.Options)) (Out, error), answer func() (Out, error)) (Out, error) {
	var none Out
	if err := limits(ctx, "dynamodb", op, in, func(ctx context.Context) error { return sdkErr(sdk(ctx, in)) }); err != nil {
		return none, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if err := f.enter(ctx, op, table, in); err != nil {
		return none, err
	}
	return answer()
}

// ARN is the table's ARN.
func (f *Table) ARN() string {
	return "arn:aws:dynamodb:" + Region + ":" + Account + ":table/" + f.name
}

// description is the table's TableDescription in status. Called with mu held.
func (f *Table) description(status types.TableStatus) *types.TableDescription {
	return &types.TableDescription{TableName: aws.String(f.name), TableArn: aws.String(f.ARN()), TableStatus: status,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("SK"), KeyType: types.KeyTypeRange},
		},
		BillingModeSummary: &types.BillingModeSummary{BillingMode: types.BillingModePayPerRequest},
		ItemCount:          aws.Int64(int64(len(f.Items))),
	}
}

// CreateTable makes the table, which must be this one, with the PK/SK key
// schema; DynamoDB refuses to create a table that exists
// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_CreateTable.html,
// ResourceInUseException).
func (f *Table) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return tableCall(ctx, f, "CreateTable", nil, in, tableLimits.CreateTable, func() (*dynamodb.CreateTableOutput, error) {
		name := aws.ToString(in.TableName)
		switch want := f.description("").KeySchema; {
		case name != f.name:
			return nil, fmt.Errorf("fake dynamodb: this fake holds the table %s only, not %s", f.name, name)
		case !f.Absent:
			return nil, &types.ResourceInUseException{Message: aws.String("Table already exists: " + name)}
		case !slices.EqualFunc(in.KeySchema, want, func(a, b types.KeySchemaElement) bool {
			return aws.ToString(a.AttributeName) == aws.ToString(b.AttributeName) && a.KeyType == b.KeyType
		}):
			return nil, fmt.Errorf("fake dynamodb: only the key schema PK (hash), SK (range) is supported")
		}
		f.Absent = false
		f.Items, f.ItemsAtDelete = map[string]item{}, nil
		f.Tags, f.TTLAttribute, f.ttlUpdated = map[string]string{}, "", false
		for _, t := range in.Tags {
			f.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		return &dynamodb.CreateTableOutput{TableDescription: f.description(types.TableStatusCreating)}, nil
	})
}

func (f *Table) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return tableCall(ctx, f, "DescribeTable", in.TableName, in, tableLimits.DescribeTable, func() (*dynamodb.DescribeTableOutput, error) {
		return &dynamodb.DescribeTableOutput{Table: f.description(types.TableStatusActive)}, nil
	})
}

// DeleteTable deletes the table and its items (kept in ItemsAtDelete for
// the test).
func (f *Table) DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error) {
	return tableCall(ctx, f, "DeleteTable", in.TableName, in, tableLimits.DeleteTable, func() (*dynamodb.DeleteTableOutput, error) {
		out := &dynamodb.DeleteTableOutput{TableDescription: f.description(types.TableStatusDeleting)}
		f.Absent = true
		f.ItemsAtDelete, f.Items = f.Items, map[string]item{}
		return out, nil
	})
}

func (f *Table) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return tableCall(ctx, f, "DescribeTimeToLive", in.TableName, in, tableLimits.DescribeTimeToLive, func() (*dynamodb.DescribeTimeToLiveOutput, error) {
		d := &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
		if f.TTLAttribute != "" {
			d = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusEnabled, AttributeName: aws.String(f.TTLAttribute)}
		}
		return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: d}, nil
	})
}

// UpdateTimeToLive turns the table's TTL on or off. DynamoDB refuses to
// turn on a TTL that is on, and any change for an hour after one
// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html:
// "Any additional UpdateTimeToLive calls for the same table during this one
// hour duration result in a ValidationException"); the fake's hour never
// ends.
func (f *Table) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return tableCall(ctx, f, "UpdateTimeToLive", in.TableName, in, tableLimits.UpdateTimeToLive, func() (*dynamodb.UpdateTimeToLiveOutput, error) {
		spec := in.TimeToLiveSpecification
		switch {
		case spec == nil:
			return nil, validation("1 validation error detected: Value null at 'timeToLiveSpecification' failed to satisfy constraint: Member must not be null")
		case aws.ToBool(spec.Enabled) && f.TTLAttribute != "":
			return nil, validation("TimeToLive is already enabled")
		case f.ttlUpdated:
			return nil, validation("Time to live has been modified multiple times within a fixed interval")
		}
		f.TTLAttribute, f.ttlUpdated = "", true
		if aws.ToBool(spec.Enabled) {
			f.TTLAttribute = aws.ToString(spec.AttributeName)
		}
		return &dynamodb.UpdateTimeToLiveOutput{TimeToLiveSpecification: spec}, nil
	})
}

func validation(message string) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: message, Fault: smithy.FaultClient}
}

// taggable fails a call on a resource other than the table. Called with mu held.
func (f *Table) taggable(arn *string) error {
	if aws.ToString(arn) != f.ARN() || f.Absent {
		return &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
	}
	return nil
}

func (f *Table) TagResource(ctx context.Context, in *dynamodb.TagResourceInput, _ ...func(*dynamodb.Options)) (*dynamodb.TagResourceOutput, error) {
	return tableCall(ctx, f, "TagResource", nil, in, tableLimits.TagResource, func() (*dynamodb.TagResourceOutput, error) {
		if err := f.taggable(in.ResourceArn); err != nil {
			return nil, err
		}
		for _, t := range in.Tags {
			f.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		return &dynamodb.TagResourceOutput{}, nil
	})
}

func (f *Table) UntagResource(ctx context.Context, in *dynamodb.UntagResourceInput, _ ...func(*dynamodb.Options)) (*dynamodb.UntagResourceOutput, error) {
	return tableCall(ctx, f, "UntagResource", nil, in, tableLimits.UntagResource, func() (*dynamodb.UntagResourceOutput, error) {
		if err := f.taggable(in.ResourceArn); err != nil {
			return nil, err
		}
		for _, k := range in.TagKeys {
			delete(f.Tags, k)
		}
		return &dynamodb.UntagResourceOutput{}, nil
	})
}

// ListTagsOfResource lists the table's tags, sorted, in one page.
func (f *Table) ListTagsOfResource(ctx context.Context, in *dynamodb.ListTagsOfResourceInput, _ ...func(*dynamodb.Options)) (*dynamodb.ListTagsOfResourceOutput, error) {
	return tableCall(ctx, f, "ListTagsOfResource", nil, in, tableLimits.ListTagsOfResource, func() (*dynamodb.ListTagsOfResourceOutput, error) {
		if err := f.taggable(in.ResourceArn); err != nil {
			return nil, err
		}
		var tags []types.Tag
		for _, k := range slices.Sorted(maps.Keys(f.Tags)) {
			tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(f.Tags[k])})
		}
		return &dynamodb.ListTagsOfResourceOutput{Tags: tags}, nil
	})
}
