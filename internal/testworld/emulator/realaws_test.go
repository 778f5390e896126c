package emulator

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// amazonImages answers DescribeImages as EC2 does after its filters.
type amazonImages struct {
	images []ec2types.Image
	in     *ec2.DescribeImagesInput
}

func (a *amazonImages) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	a.in = in
	return &ec2.DescribeImagesOutput{Images: a.images}, nil
}

// Against real AWS, Image takes the newest Amazon Linux 2023 for x86_64
// that Amazon publishes, once per client.
func TestImageRealAWS(t *testing.T) {
	t.Setenv(EnvRealAWS, "1")
	image := func(id, created string) ec2types.Image {
		return ec2types.Image{ImageId: aws.String(id), CreationDate: aws.String(created)}
	}
	f := &amazonImages{images: []ec2types.Image{
		image("ami-0aaa", "2025-01-15T20:12:41.000Z"),
		image("ami-0ccc", "2025-11-03T21:40:08.000Z"),
		image("ami-0bbb", "2025-06-30T10:01:02.000Z"),
	}}
	got, err := Image(context.Background(), f)
	if err != nil || got != "ami-0ccc" {
		t.Fatalf("Image = %q, %v; want the newest, ami-0ccc", got, err)
	}
	if !slices.Equal(f.in.Owners, []string{"amazon"}) {
		t.Errorf("owners %v, want amazon", f.in.Owners)
	}
	for name, want := range map[string]string{"name": "al2023-ami-2023.*-x86_64", "architecture": "x86_64", "state": "available"} {
		if got := filterValues(f.in.Filters, name); got != want {
			t.Errorf("filter %s = %q, want %q", name, got, want)
		}
	}
	f.in = nil
	if again, _ := Image(context.Background(), f); again != got || f.in != nil {
		t.Errorf("second Image = %q (asked again: %v), want %q from the cache", again, f.in != nil, got)
	}
	if _, err := Image(context.Background(), &amazonImages{}); err == nil || !strings.Contains(err.Error(), "no Amazon Linux 2023") {
		t.Errorf("Image with no image found: %v", err)
	}
}

// Against real AWS nothing starts or reaches the emulator.
func TestEnsureRefusesRealAWS(t *testing.T) {
	t.Setenv(EnvRealAWS, "1")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	if _, _, err := Ensure(context.Background()); err == nil || !strings.Contains(err.Error(), EnvRealAWS+"=1") {
		t.Fatalf("Ensure = %v, want a refusal naming %s", err, EnvRealAWS)
	}
}
