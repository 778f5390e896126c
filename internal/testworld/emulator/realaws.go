package emulator

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// EnvRealAWS, set to 1, runs the provider's acceptance tests against real
// AWS (`make testacc-aws`): the SDK's default credentials and AWS_REGION,
// no emulator, no front, no recorder. Any other value, or none, means the
// emulator.
const EnvRealAWS = "EC2RUNNERS_TESTACC_AWS"

// RealAWS reports whether the tests run against real AWS (EnvRealAWS=1).
func RealAWS() bool { return os.Getenv(EnvRealAWS) == "1" }

// errRealAWS is Ensure's answer against real AWS: nothing may start or
// reach the emulator then.
var errRealAWS = errors.New("emulator: " + EnvRealAWS + "=1 runs the tests against real AWS: the emulator is neither started nor used (unset it to use the emulator)")

// amazonLinux is Image against real AWS: the newest Amazon Linux 2023
// image for x86_64, published by Amazon (the name pattern of AL2023's
// standard images, not its minimal or ECS ones).
func amazonLinux(ctx context.Context, c ImageAPI) (string, error) {
	out, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{
		Owners: []string{"amazon"},
		Filters: []ec2types.Filter{
			{Name: aws.String("name"), Values: []string{"al2023-ami-2023.*-x86_64"}},
			{Name: aws.String("architecture"), Values: []string{string(ec2types.ArchitectureValuesX8664)}},
			{Name: aws.String("state"), Values: []string{string(ec2types.ImageStateAvailable)}},
		},
	})
	if err != nil {
		return "", fmt.Errorf("looking for Amazon Linux 2023 (DescribeImages, owner amazon): %w", err)
	}
	var newest *ec2types.Image
	for i, img := range out.Images {
		// CreationDate is ISO 8601 in UTC: its strings sort as its times.
		if newest == nil || aws.ToString(img.CreationDate) > aws.ToString(newest.CreationDate) {
			newest = &out.Images[i]
		}
	}
	if newest == nil {
		return "", errors.New("no Amazon Linux 2023 x86_64 image in this region (DescribeImages, owner amazon, name al2023-ami-2023.*-x86_64)")
	}
	return aws.ToString(newest.ImageId), nil
}
