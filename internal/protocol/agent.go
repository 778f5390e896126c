package protocol

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The agent partition holds everything an instance's agent reads or writes
// but its record: PK = AGENT#<instance ARN>, so that IAM can pin an instance
// to its own items with dynamodb:LeadingKeys = AGENT#${ec2:SourceInstanceARN}.
const AgentPartitionPrefix = "AGENT#"

// Sort keys of the agent partition.
const (
	SortKeyHeartbeat         = "HEARTBEAT"
	SortKeySignal            = "SIGNAL"
	SortKeyRegistrationToken = "TOKEN#REGISTER"
	SortKeyRemovalToken      = "TOKEN#REMOVE"
)

// Entity types of the agent partition's items.
const (
	entityHeartbeat = "HEARTBEAT"
	entitySignal    = "WS"
	entityToken     = "TOKEN"
)

// RegionPattern is the form of an AWS region name, such as eu-west-1.
var RegionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

var (
	// instanceARNPrefixPattern: arn:<partition>:ec2:<region>:<account>:instance/
	instanceARNPrefixPattern = regexp.MustCompile(`^arn:aws(-[a-z]+)*:ec2:[a-z]{2}(-[a-z]+)+-[0-9]+:[0-9]{12}:instance/$`)
	// instanceIDPattern: the characters of EC2 ids (i-0123456789abcdef0).
	instanceIDPattern = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
)

// InstanceARNPrefix is the ARN of the instances of an account and region
// without the instance id.
func InstanceARNPrefix(partition, region, account string) string {
	return "arn:" + partition + ":ec2:" + region + ":" + account + ":instance/"
}

// ValidateInstanceARNPrefix reports why prefix is not
// arn:<partition>:ec2:<region>:<12-digit account>:instance/, or nil.
func ValidateInstanceARNPrefix(prefix string) error {
	if !instanceARNPrefixPattern.MatchString(prefix) {
		return fmt.Errorf("instance ARN prefix %q is not of the form arn:<partition>:ec2:<region>:<12-digit account>:instance/", prefix)
	}
	return nil
}

// InstanceARN is the ARN of instance id under prefix (see InstanceARNPrefix).
func InstanceARN(prefix, id string) string { return prefix + id }

// SplitInstanceARN returns the prefix and the instance id of an instance
// ARN; ok is false when arn is not one.
func SplitInstanceARN(arn string) (prefix, id string, ok bool) {
	cut := strings.LastIndex(arn, "/") + 1
	prefix, id = arn[:cut], arn[cut:]
	if ValidateInstanceARNPrefix(prefix) != nil || !instanceIDPattern.MatchString(id) {
		return "", "", false
	}
	return prefix, id, true
}

// AgentKey is the key of the item sk in the agent partition of instanceARN.
func AgentKey(instanceARN, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: AgentPartitionPrefix + instanceARN},
		AttrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

// agentItem is the key of an agent partition item plus the attributes every
// item carries; identifier is the bare instance id.
func agentItem(instanceARN, sk, entityType, now string) map[string]types.AttributeValue {
	item := AgentKey(instanceARN, sk)
	item[AttrEntityType] = &types.AttributeValueMemberS{Value: entityType}
	_, id, _ := SplitInstanceARN(instanceARN)
	item[AttrIdentifier] = &types.AttributeValueMemberS{Value: id}
	item[AttrUpdatedAt] = &types.AttributeValueMemberS{Value: now}
	return item
}

// agentOf returns the instance ARN of an agent partition item whose sort
// key is sk; ok is false unless its partition key is AGENT#<instance ARN>
// and its identifier the ARN's instance id.
func agentOf(item map[string]types.AttributeValue, sk string) (instanceARN string, ok bool) {
	arn, isAgent := strings.CutPrefix(StringAttr(item, AttrPK), AgentPartitionPrefix)
	_, id, isARN := SplitInstanceARN(arn)
	if !isAgent || !isARN || StringAttr(item, AttrSK) != sk || StringAttr(item, AttrIdentifier) != id {
		return "", false
	}
	return arn, true
}
