package awsrecord

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// tagLookup reads the tags that aws:ResourceTag conditions see, from the
// emulator, with the tests' own credentials (unrecorded).
type tagLookup struct {
	api     func(region string) ec2API
	backoff time.Duration // the first wait between attempts

	mu      sync.Mutex
	clients map[string]ec2API // by region
}

// ec2API is what the lookup asks the emulator.
type ec2API interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
}

func newTagLookup(endpoint string, creds aws.CredentialsProvider) *tagLookup {
	return &tagLookup{clients: map[string]ec2API{}, backoff: lookupBackoff, api: func(region string) ec2API {
		return ec2.New(ec2.Options{Region: region, BaseEndpoint: aws.String(endpoint), Credentials: creds})
	}}
}

func (l *tagLookup) client(region string) ec2API {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.clients[region]
	if !ok {
		c = l.api(region)
		l.clients[region] = c
	}
	return c
}

// tagState is what a lookup learnt of a resource's ec2runners:pool tag.
type tagState int

const (
	tagAbsent  tagState = iota // the resource exists and has no such tag
	tagFound                   // the resource has the tag
	tagUnknown                 // the emulator did not say: the lookup failed, or the resource is not listed
)

// Lookups are retried this often, this far apart at first (doubling): a
// busy emulator answers late or refuses for a while, and a failed lookup
// must not read as "no tag" (which the policy check would report as a
// missing grant).
const (
	lookupAttempts = 6
	lookupBackoff  = 250 * time.Millisecond
	lookupTimeout  = 30 * time.Second
)

// poolTag is the ec2runners:pool tag of an instance or launch template.
func (l *tagLookup) poolTag(ctx context.Context, region, typ, id string) (string, tagState) {
	var tags []ec2types.Tag
	listed := false
	err := l.retry(ctx, func(ctx context.Context) error {
		tags, listed = nil, false
		switch typ {
		case "instance":
			out, err := l.client(region).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
			if err != nil {
				return err
			}
			for _, res := range out.Reservations {
				for _, inst := range res.Instances {
					listed = listed || aws.ToString(inst.InstanceId) == id
					tags = append(tags, inst.Tags...)
				}
			}
		case "launch-template":
			out, err := l.client(region).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}})
			if err != nil {
				return err
			}
			for _, lt := range out.LaunchTemplates {
				listed = listed || aws.ToString(lt.LaunchTemplateId) == id
				tags = append(tags, lt.Tags...)
			}
		}
		return nil
	})
	if err != nil || !listed {
		return "", tagUnknown
	}
	for _, t := range tags {
		if aws.ToString(t.Key) == protocol.TagPool {
			return aws.ToString(t.Value), tagFound
		}
	}
	return "", tagAbsent
}

// launchTemplateID is the id of the launch template name; ok is false when
// the emulator did not tell it.
func (l *tagLookup) launchTemplateID(ctx context.Context, region, name string) (id string, ok bool) {
	err := l.retry(ctx, func(ctx context.Context) error {
		out, err := l.client(region).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
		if err != nil {
			return err
		}
		if len(out.LaunchTemplates) > 0 {
			id = aws.ToString(out.LaunchTemplates[0].LaunchTemplateId)
		}
		return nil
	})
	return id, err == nil && id != ""
}

// retry calls lookup until it succeeds, the emulator says the resource does
// not exist (a NotFound code: retrying cannot change that), or the attempts
// run out. It is detached from the client's request, which may give up on
// its own answer while the lookup goes on.
func (l *tagLookup) retry(ctx context.Context, lookup func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
	defer cancel()
	wait := l.backoff
	var err error
	for attempt := 1; ; attempt++ {
		if err = lookup(ctx); err == nil || notFound(err) || attempt == lookupAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func notFound(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed", "InvalidLaunchTemplateId.NotFound",
		"InvalidLaunchTemplateId.Malformed", "InvalidLaunchTemplateName.NotFoundException":
		return true
	}
	return false
}
