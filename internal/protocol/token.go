package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RunnerToken is a GitHub token handed to one runner in its agent
// partition: the registration token (SortKeyRegistrationToken), written by
// a claim before the runner learns the run id, or the removal token
// (SortKeyRemovalToken), written by a release before the runner is told to
// leave. The agent uses it only for RunID and Target: no token is shared
// between instances, and none planted for another run or target is used.
//
// A registration token also tells the runner its claim's Label (the run id
// and a secret, see NewLabel) and RunnerGroup: the runner's own partition
// is the one place every other runner, and the jobs, cannot read.
type RunnerToken struct {
	InstanceARN string
	SortKey     string // SortKeyRegistrationToken or SortKeyRemovalToken
	Token       string
	ExpiresAt   time.Time
	RunID       string // the run the token is for
	Target      string // "owner/repository", or "owner" for organization runners
	// Label is the label the runner registers with ("": the run id, as a
	// claim made before labels carried a secret hands it).
	Label string
	// RunnerGroup is the organization's runner group the runner registers
	// in ("": the default group).
	RunnerGroup string
	UpdatedAt   string
}

// Fields of the token item's value map.
const (
	tokenValue     = "token"
	tokenExpiresAt = "expires_at"
	tokenRunID     = "runId"
	tokenTarget    = "target"
	tokenLabel     = "label"
	tokenGroup     = "runnerGroup"
)

// Item renders the token item; the table forgets it when the token expires.
func (t RunnerToken) Item() map[string]types.AttributeValue {
	item := agentItem(t.InstanceARN, t.SortKey, entityToken, t.UpdatedAt)
	item[AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(t.ExpiresAt.Unix(), 10)}
	item[AttrValue] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		tokenValue:     &types.AttributeValueMemberS{Value: t.Token},
		tokenExpiresAt: &types.AttributeValueMemberS{Value: FormatTime(t.ExpiresAt)},
		tokenRunID:     &types.AttributeValueMemberS{Value: t.RunID},
		tokenTarget:    &types.AttributeValueMemberS{Value: t.Target},
	}}
	value := item[AttrValue].(*types.AttributeValueMemberM).Value
	if t.Label != "" {
		value[tokenLabel] = &types.AttributeValueMemberS{Value: t.Label}
	}
	if t.RunnerGroup != "" {
		value[tokenGroup] = &types.AttributeValueMemberS{Value: t.RunnerGroup}
	}
	return item
}

// RunnerTokenFromItem reads a token item. Anything but a token item of an
// agent partition with a token, its expiry, a run id and a GitHub target is
// an error, and so is a label that is not one of the run (ValidateLabel) or
// a runner group that cannot be one (ValidateRunnerGroup).
func RunnerTokenFromItem(item map[string]types.AttributeValue) (RunnerToken, error) {
	sk := StringAttr(item, AttrSK)
	if sk != SortKeyRegistrationToken && sk != SortKeyRemovalToken {
		return RunnerToken{}, fmt.Errorf("runner token item: sort key %q is not %s or %s", sk, SortKeyRegistrationToken, SortKeyRemovalToken)
	}
	arn, ok := agentOf(item, sk)
	if !ok {
		return RunnerToken{}, fmt.Errorf("runner token item: partition key %q and identifier %q do not name an instance's agent partition", StringAttr(item, AttrPK), StringAttr(item, AttrIdentifier))
	}
	value, ok := item[AttrValue].(*types.AttributeValueMemberM)
	if !ok {
		return RunnerToken{}, fmt.Errorf("runner token item: its %s attribute is %s, want a map", AttrValue, describeAttr(item[AttrValue]))
	}
	v := value.Value
	t := RunnerToken{
		InstanceARN: arn, SortKey: sk, Token: StringAttr(v, tokenValue), RunID: StringAttr(v, tokenRunID),
		Target: StringAttr(v, tokenTarget), Label: StringAttr(v, tokenLabel), RunnerGroup: StringAttr(v, tokenGroup),
		UpdatedAt: StringAttr(item, AttrUpdatedAt),
	}
	expires, err := ParseTime(StringAttr(v, tokenExpiresAt))
	switch {
	case err != nil:
		return RunnerToken{}, fmt.Errorf("runner token item: %s: %w", tokenExpiresAt, err)
	case t.Token == "" || t.RunID == "":
		return RunnerToken{}, fmt.Errorf("runner token item has no %s or no %s", tokenValue, tokenRunID)
	case !validTarget(t.Target):
		return RunnerToken{}, fmt.Errorf("runner token item: target %q is not a GitHub owner or owner/repository", t.Target)
	case t.Label != "" && ValidateLabel(t.RunID, t.Label) != nil:
		return RunnerToken{}, fmt.Errorf("runner token item: %w", ValidateLabel(t.RunID, t.Label))
	case t.RunnerGroup != "" && ValidateRunnerGroup(t.RunnerGroup) != nil:
		return RunnerToken{}, fmt.Errorf("runner token item: %w", ValidateRunnerGroup(t.RunnerGroup))
	case t.RunnerGroup != "" && strings.Contains(t.Target, "/"):
		return RunnerToken{}, fmt.Errorf("runner token item: runner group %q for repository %s: only organization runners join runner groups", t.RunnerGroup, t.Target)
	}
	t.ExpiresAt = expires
	return t, nil
}

// validTarget tells whether s is "owner" or "owner/repository" (GitHubTarget.String).
func validTarget(s string) bool {
	owner, repo, hasRepo := strings.Cut(s, "/")
	return GitHubOwnerPattern.MatchString(owner) && (!hasRepo || GitHubRepositoryPattern.MatchString(repo))
}

// RunnerLabel is the label the runner registers with: the token's Label,
// else the run id (a claim made before labels carried a secret).
func (t RunnerToken) RunnerLabel() string {
	if t.Label != "" {
		return t.Label
	}
	return t.RunID
}
