package pool

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// instanceARNPrefix is arn:<partition>:ec2:<region>:<account>:instance/ of
// the pool's runners: the account and partition of the caller, the
// clients' region. Claims build the agents' partition keys from it.
func (m *Manager) instanceARNPrefix(ctx context.Context) (string, error) {
	out, err := m.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("finding the AWS account of the pool's runners (sts:GetCallerIdentity): %w", err)
	}
	caller := aws.ToString(out.Arn)
	fields := strings.SplitN(caller, ":", 3) // arn:<partition>:...
	if len(fields) < 3 || fields[0] != "arn" {
		return "", fmt.Errorf("the runners' ARNs need the caller's partition, but sts:GetCallerIdentity returned the caller ARN %q", caller)
	}
	prefix := protocol.InstanceARNPrefix(fields[1], m.Region, aws.ToString(out.Account))
	if err := protocol.ValidateInstanceARNPrefix(prefix); err != nil {
		return "", fmt.Errorf("the runners' ARNs cannot be built from the caller %s (account %q) and the region %q: %w", caller, aws.ToString(out.Account), m.Region, err)
	}
	return prefix, nil
}
