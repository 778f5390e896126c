package awsrecord

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// tagLookup reads the tags that aws:ResourceTag conditions see, from the
// emulator, with the tests' own credentials (unrecorded).
type tagLookup struct {
	endpoint string
	creds    aws.CredentialsProvider

	mu      sync.Mutex
	clients map[string]*ec2.Client // by region
}

func (l *tagLookup) client(region string) *ec2.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.clients[region]
	if !ok {
		c = ec2.New(ec2.Options{Region: region, BaseEndpoint: aws.String(l.endpoint), Credentials: l.creds})
		l.clients[region] = c
	}
	return c
}

// poolTag is the ec2runners:pool tag of an instance or launch template.
func (l *tagLookup) poolTag(ctx context.Context, region, typ, id string) (string, bool) {
	var tags []ec2types.Tag
	switch typ {
	case "instance":
		out, err := l.client(region).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			return "", false
		}
		for _, res := range out.Reservations {
			for _, inst := range res.Instances {
				tags = append(tags, inst.Tags...)
			}
		}
	case "launch-template":
		out, err := l.client(region).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}})
		if err != nil {
			return "", false
		}
		for _, lt := range out.LaunchTemplates {
			tags = append(tags, lt.Tags...)
		}
	}
	for _, t := range tags {
		if aws.ToString(t.Key) == protocol.TagPool {
			return aws.ToString(t.Value), true
		}
	}
	return "", false
}

// launchTemplateID is the id of the launch template name ("" if none).
func (l *tagLookup) launchTemplateID(ctx context.Context, region, name string) string {
	out, err := l.client(region).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil || len(out.LaunchTemplates) == 0 {
		return ""
	}
	return aws.ToString(out.LaunchTemplates[0].LaunchTemplateId)
}
