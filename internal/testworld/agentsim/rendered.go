package agentsim

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// rendered is what a real agent knows without asking the pool: the ARN
// prefix of its instance (from instance metadata) and the GitHub target it
// registers with (from its user data). A Sim reads both from the pool
// config item, once, standing in for both.
type rendered struct {
	arnPrefix string
	target    string // "": the pool has no GitHub target, its runners get no tokens
}

func (s *Sim) settings(ctx context.Context) (rendered, error) {
	s.mu.Lock()
	cached := s.rendered
	s.mu.Unlock()
	if cached != nil {
		return *cached, nil
	}
	out, err := s.c.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(protocol.TableName(s.pool)),
		Key:            protocol.Key(protocol.TypeMetadata, protocol.PoolConfigID),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return rendered{}, err
	}
	if out.Item == nil {
		return rendered{}, fmt.Errorf("pool %s has no pool config item", s.pool)
	}
	cfg, err := protocol.PoolConfigFromItem(out.Item)
	if err != nil {
		return rendered{}, err
	}
	r := rendered{arnPrefix: cfg.InstanceARNPrefix}
	if cfg.GitHub != nil {
		r.target = cfg.GitHub.String()
	}
	s.mu.Lock()
	s.rendered = &r
	s.mu.Unlock()
	return r, nil
}
