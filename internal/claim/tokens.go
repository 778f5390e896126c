package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// TokenSource issues the GitHub tokens agents register and deregister with.
type TokenSource interface {
	RegistrationToken(context.Context, github.Target) (github.Token, error)
	RemoveToken(context.Context, github.Target) (github.Token, error)
}

const (
	// tokenMaxAge: GitHub's tokens live an hour; refreshed at half of it,
	// a token outlives any claim's Create or release.
	tokenMaxAge = 30 * time.Minute
	// tokenMinLife: a token still this valid serves a release even when
	// GitHub cannot be reached for a fresh one.
	tokenMinLife = 15 * time.Minute
)

// ensureTokens makes sure the pool's registration token item holds tokens
// for the pool's GitHub target that stay valid for the whole claim or
// release: fetched when missing, issued for another target, or older than
// tokenMaxAge. Pools without a GitHub target leave the item alone.
func (c *Claimer) ensureTokens(ctx context.Context, s *store, cfg protocol.PoolConfig) error {
	if cfg.GitHub == nil {
		return nil
	}
	target := cfg.GitHub.String()
	cur, version, found, err := s.readTokens(ctx)
	if err != nil {
		return err
	}
	now := c.now()
	fresh := found && cur.Target == target && cur.RemoveToken != "" && now.Sub(cur.FetchedAt) < tokenMaxAge
	if fresh {
		return nil
	}
	usable := found && cur.Target == target && cur.RemoveToken != "" &&
		cur.ExpiresAt.Sub(now) > tokenMinLife && cur.RemoveExpiresAt.Sub(now) > tokenMinLife
	if c.Tokens == nil {
		if usable {
			return nil
		}
		return fmt.Errorf("pool %s registers runners with GitHub %s, but its registration token is missing or expires soon and the provider has no GitHub credentials: configure the provider's github block (token or GitHub App)", cfg.Name, target)
	}
	next, err := c.fetchTokens(ctx, *cfg.GitHub)
	if err != nil {
		if usable {
			c.log("GitHub tokens not refreshed; the current ones are still valid", "target", target, "error", err.Error())
			return nil
		}
		return fmt.Errorf("cannot get runner registration tokens for %s: %w", target, err)
	}
	next.FetchedAt = now
	if err := s.putTokens(ctx, next, version, found); err != nil && !errors.Is(err, errConditionFailed) {
		return err
	} // a failed condition: another claim refreshed them just now
	c.log("refreshed GitHub runner tokens", "target", target, "expires_at", protocol.FormatTime(next.ExpiresAt))
	return nil
}

func (c *Claimer) fetchTokens(ctx context.Context, t protocol.GitHubTarget) (protocol.RegistrationToken, error) {
	target := github.Target{Owner: t.Owner, Repository: t.Repository}
	reg, err := c.Tokens.RegistrationToken(ctx, target)
	if err != nil {
		return protocol.RegistrationToken{}, err
	}
	rem, err := c.Tokens.RemoveToken(ctx, target)
	if err != nil {
		return protocol.RegistrationToken{}, err
	}
	return protocol.RegistrationToken{
		Target: t.String(), Token: reg.Value, ExpiresAt: reg.ExpiresAt,
		RemoveToken: rem.Value, RemoveExpiresAt: rem.ExpiresAt,
	}, nil
}

// readTokens reads the token item and its version (its updatedAt, whoever
// wrote it), for the conditional replacement.
func (s *store) readTokens(ctx context.Context) (tok protocol.RegistrationToken, version string, found bool, err error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: protocol.Key(protocol.TypeMetadata, protocol.RegistrationTokenID), ConsistentRead: aws.Bool(true),
	})
	if err != nil || out.Item == nil {
		return protocol.RegistrationToken{}, "", false, err
	}
	tok, err = protocol.RegistrationTokenFromItem(out.Item)
	if err != nil {
		return protocol.RegistrationToken{}, "", false, nil // corrupt: replaced like a missing one
	}
	return tok, protocol.StringAttr(out.Item, protocol.AttrUpdatedAt), true, nil
}

// putTokens replaces the item only if it is still the version read, so
// concurrent claims do not overwrite each other's fresher tokens.
func (s *store) putTokens(ctx context.Context, next protocol.RegistrationToken, version string, found bool) error {
	in := &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: next.Item()}
	if found {
		in.ConditionExpression = aws.String("#updatedAt = :prev")
		in.ExpressionAttributeNames = map[string]string{"#updatedAt": protocol.AttrUpdatedAt}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": str(version)}
	}
	_, err := s.db.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return errConditionFailed
	}
	return err
}
