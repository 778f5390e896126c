package emulator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// What tests, the demo and the simulated agents launch: found in whatever
// emulator (or account) they run against, never assumed by id, because each
// emulator preloads its own catalogue (moto's AMI ids exist nowhere else).

// ImageAPI is the part of EC2 that Image uses.
type ImageAPI interface {
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// SubnetAPI is the part of EC2 that DefaultSubnets uses.
type SubnetAPI interface {
	DescribeVpcs(context.Context, *ec2.DescribeVpcsInput, ...func(*ec2.Options)) (*ec2.DescribeVpcsOutput, error)
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
}

// images caches Image's answer per client: the catalogue does not change
// while a process runs, and moto takes most of a second to list it.
var images sync.Map // ImageAPI -> image id

// Image returns an available x86_64 image (the architecture of the instance
// types the tests launch), the lowest id for the same answer every time;
// against real AWS (RealAWS), the newest Amazon Linux 2023. c must be
// comparable (a pointer, as *ec2.Client is).
func Image(ctx context.Context, c ImageAPI) (string, error) {
	if id, ok := images.Load(c); ok {
		return id.(string), nil
	}
	if RealAWS() {
		id, err := amazonLinux(ctx, c)
		if err == nil {
			images.Store(c, id)
		}
		return id, err
	}
	out, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{
		{Name: aws.String("architecture"), Values: []string{string(ec2types.ArchitectureValuesX8664)}},
		{Name: aws.String("state"), Values: []string{string(ec2types.ImageStateAvailable)}},
	}})
	if err != nil {
		return "", fmt.Errorf("looking for an x86_64 image (DescribeImages): %w", err)
	}
	var ids []string
	for _, img := range out.Images {
		ids = append(ids, aws.ToString(img.ImageId))
	}
	if len(ids) == 0 {
		return "", errors.New("the emulator offers no available x86_64 image (DescribeImages found none)")
	}
	id := slices.Min(ids)
	images.Store(c, id)
	return id, nil
}

// DefaultSubnets returns up to n subnets of the default VPC, ordered by
// availability zone and id (a default VPC has one per zone).
func DefaultSubnets(ctx context.Context, c SubnetAPI, n int) ([]string, error) {
	vpcs, err := c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{
		{Name: aws.String("is-default"), Values: []string{"true"}},
	}})
	if err != nil {
		return nil, fmt.Errorf("looking for the default VPC (DescribeVpcs): %w", err)
	}
	if len(vpcs.Vpcs) == 0 {
		return nil, errors.New("there is no default VPC to launch in")
	}
	vpc := aws.ToString(vpcs.Vpcs[0].VpcId)
	out, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{vpc}},
	}})
	if err != nil {
		return nil, fmt.Errorf("looking for the subnets of the default VPC %s (DescribeSubnets): %w", vpc, err)
	}
	subnets := out.Subnets
	if len(subnets) == 0 {
		return nil, fmt.Errorf("the default VPC %s has no subnets", vpc)
	}
	slices.SortFunc(subnets, func(a, b ec2types.Subnet) int {
		if c := cmp.Compare(aws.ToString(a.AvailabilityZone), aws.ToString(b.AvailabilityZone)); c != 0 {
			return c
		}
		return cmp.Compare(aws.ToString(a.SubnetId), aws.ToString(b.SubnetId))
	})
	var ids []string
	for _, s := range subnets[:min(n, len(subnets))] {
		ids = append(ids, aws.ToString(s.SubnetId))
	}
	return ids, nil
}

// LaunchTemplateAPI is the part of EC2 that CreateLaunchTemplate uses.
type LaunchTemplateAPI interface {
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
}

// CreateLaunchTemplate creates a launch template of a name of the caller's
// own and returns its id. A template of that name already there is the
// caller's, made by a retry of this call whose first answer was lost (on a
// busy machine the emulator can drop an answer; it ignores ClientToken, so
// the retry fails with AlreadyExists): its id is looked up.
func CreateLaunchTemplate(ctx context.Context, c LaunchTemplateAPI, in *ec2.CreateLaunchTemplateInput) (string, error) {
	out, err := c.CreateLaunchTemplate(ctx, in)
	if err == nil {
		return aws.ToString(out.LaunchTemplate.LaunchTemplateId), nil
	}
	var apiErr interface{ ErrorCode() string }
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidLaunchTemplateName.AlreadyExistsException" {
		return "", fmt.Errorf("creating launch template %s: %w", aws.ToString(in.LaunchTemplateName), err)
	}
	found, derr := c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{aws.ToString(in.LaunchTemplateName)}})
	if derr != nil || len(found.LaunchTemplates) != 1 {
		return "", fmt.Errorf("creating launch template %s: %w (and looking it up: %v)", aws.ToString(in.LaunchTemplateName), err, derr)
	}
	return aws.ToString(found.LaunchTemplates[0].LaunchTemplateId), nil
}

// PoolFixtureAPI is the part of EC2 that PoolLaunchTemplate uses.
type PoolFixtureAPI interface {
	ImageAPI
	SubnetAPI
	LaunchTemplateAPI
}

// PoolLaunchTemplate makes what a pool's fleet launches from, as a pool
// stack would: a launch template named after the pool and tagged for it
// (claims launch no other), with an image the emulator offers, and n
// subnets of the default VPC. Deleting the template is the caller's.
func PoolLaunchTemplate(ctx context.Context, c PoolFixtureAPI, pool string, n int) (string, []string, error) {
	image, err := Image(ctx, c)
	if err != nil {
		return "", nil, err
	}
	id, err := CreateLaunchTemplate(ctx, c, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(pool),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: aws.String(protocol.TagPool), Value: aws.String(pool)},
		}}},
	})
	if err != nil {
		return "", nil, err
	}
	subnets, err := DefaultSubnets(ctx, c, n)
	if err != nil {
		return "", nil, err
	}
	return id, subnets, nil
}
