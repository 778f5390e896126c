package pool

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// tagChanges returns the tags to set and the keys to remove to go from have to want.
func tagChanges(have, want map[string]string) (set map[string]string, remove []string) {
	set = map[string]string{}
	for k, v := range want {
		if old, ok := have[k]; !ok || old != v {
			set[k] = v
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			remove = append(remove, k)
		}
	}
	sort.Strings(remove)
	return set, remove
}

func dynamoTags(tags map[string]string) []types.Tag {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

func (m *Manager) tableTags(ctx context.Context, arn string) (map[string]string, error) {
	tags := map[string]string{}
	var next *string
	for {
		out, err := m.DynamoDB.ListTagsOfResource(ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: aws.String(arn), NextToken: next})
		if err != nil {
			return nil, fmt.Errorf("reading tags of DynamoDB table %s: %w", arn, err)
		}
		for _, t := range out.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		if next = out.NextToken; next == nil {
			return tags, nil
		}
	}
}

func (m *Manager) syncTableTags(ctx context.Context, arn string, want map[string]string) error {
	have, err := m.tableTags(ctx, arn)
	if err != nil {
		return err
	}
	set, remove := tagChanges(have, want)
	if len(remove) > 0 {
		if _, err := m.DynamoDB.UntagResource(ctx, &dynamodb.UntagResourceInput{ResourceArn: aws.String(arn), TagKeys: remove}); err != nil {
			return fmt.Errorf("removing tags of DynamoDB table %s: %w", arn, err)
		}
	}
	if len(set) > 0 {
		if _, err := m.DynamoDB.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: aws.String(arn), Tags: dynamoTags(set)}); err != nil {
			return fmt.Errorf("tagging DynamoDB table %s: %w", arn, err)
		}
	}
	return nil
}
