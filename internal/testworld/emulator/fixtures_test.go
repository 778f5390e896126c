package emulator

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// fakeEC2 answers as an emulator would after applying the filters it was
// sent: each test gives the answer and checks the filters.
type fakeEC2 struct {
	images      []string
	imageCalls  int
	imageFilter []ec2types.Filter
	defaultVPC  string
	subnets     []ec2types.Subnet // of defaultVPC
	subnetVPC   []string
}

func (f *fakeEC2) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	f.imageCalls++
	f.imageFilter = in.Filters
	out := &ec2.DescribeImagesOutput{}
	for _, id := range f.images {
		out.Images = append(out.Images, ec2types.Image{ImageId: aws.String(id)})
	}
	return out, nil
}

func (f *fakeEC2) DescribeVpcs(_ context.Context, in *ec2.DescribeVpcsInput, _ ...func(*ec2.Options)) (*ec2.DescribeVpcsOutput, error) {
	out := &ec2.DescribeVpcsOutput{}
	if f.defaultVPC != "" && filterValues(in.Filters, "is-default") == "true" {
		out.Vpcs = []ec2types.Vpc{{VpcId: aws.String(f.defaultVPC), IsDefault: aws.Bool(true)}}
	}
	return out, nil
}

func (f *fakeEC2) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	f.subnetVPC = append(f.subnetVPC, filterValues(in.Filters, "vpc-id"))
	return &ec2.DescribeSubnetsOutput{Subnets: slices.Clone(f.subnets)}, nil
}

func filterValues(filters []ec2types.Filter, name string) string {
	for _, f := range filters {
		if aws.ToString(f.Name) == name {
			return strings.Join(f.Values, ",")
		}
	}
	return ""
}

// Image asks for available x86_64 images, takes the lowest id, and asks
// once per client.
func TestImage(t *testing.T) {
	f := &fakeEC2{images: []string{"ami-0b", "ami-0a", "ami-0c"}}
	for range 2 {
		got, err := Image(context.Background(), f)
		if err != nil || got != "ami-0a" {
			t.Fatalf("Image = %q, %v; want ami-0a", got, err)
		}
	}
	if f.imageCalls != 1 {
		t.Errorf("%d DescribeImages calls, want 1 (cached)", f.imageCalls)
	}
	if a, s := filterValues(f.imageFilter, "architecture"), filterValues(f.imageFilter, "state"); a != "x86_64" || s != "available" {
		t.Errorf("filters architecture=%q state=%q, want x86_64 and available", a, s)
	}
	if _, err := Image(context.Background(), &fakeEC2{}); err == nil || !strings.Contains(err.Error(), "no available x86_64 image") {
		t.Errorf("Image with no images: %v", err)
	}
}

// DefaultSubnets takes the default VPC's subnets, by zone, at most n.
func TestDefaultSubnets(t *testing.T) {
	subnet := func(id, zone string) ec2types.Subnet {
		return ec2types.Subnet{SubnetId: aws.String(id), AvailabilityZone: aws.String(zone)}
	}
	f := &fakeEC2{defaultVPC: "vpc-1", subnets: []ec2types.Subnet{
		subnet("subnet-a", "us-east-1c"), subnet("subnet-b", "us-east-1a"), subnet("subnet-c", "us-east-1b"),
	}}
	got, err := DefaultSubnets(context.Background(), f, 2)
	if err != nil || !slices.Equal(got, []string{"subnet-b", "subnet-c"}) {
		t.Fatalf("DefaultSubnets = %v, %v; want [subnet-b subnet-c]", got, err)
	}
	if !slices.Equal(f.subnetVPC, []string{"vpc-1"}) {
		t.Errorf("subnets asked of VPCs %q, want just the default vpc-1", f.subnetVPC)
	}
	if _, err := DefaultSubnets(context.Background(), &fakeEC2{}, 2); err == nil || !strings.Contains(err.Error(), "no default VPC") {
		t.Errorf("DefaultSubnets without a default VPC: %v", err)
	}
	if _, err := DefaultSubnets(context.Background(), &fakeEC2{defaultVPC: "vpc-1"}, 2); err == nil || !strings.Contains(err.Error(), "no subnets") {
		t.Errorf("DefaultSubnets of an empty VPC: %v", err)
	}
}

// launchTemplates is EC2 whose first CreateLaunchTemplate answer was lost:
// the template exists, and the retry fails with AlreadyExists.
type launchTemplates struct {
	existing map[string]string // name -> id
	fail     error
}

func (l *launchTemplates) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	name := aws.ToString(in.LaunchTemplateName)
	if l.fail != nil {
		return nil, l.fail
	}
	if _, ok := l.existing[name]; ok {
		return nil, &smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.AlreadyExistsException", Message: "Launch template name already in use."}
	}
	l.existing[name] = "lt-new"
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{LaunchTemplateId: aws.String("lt-new")}}, nil
}

func (l *launchTemplates) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	out := &ec2.DescribeLaunchTemplatesOutput{}
	for _, name := range in.LaunchTemplateNames {
		if id, ok := l.existing[name]; ok {
			out.LaunchTemplates = append(out.LaunchTemplates, ec2types.LaunchTemplate{LaunchTemplateId: aws.String(id)})
		}
	}
	return out, nil
}

func TestCreateLaunchTemplate(t *testing.T) {
	in := &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("mine")}
	for _, tt := range []struct {
		name     string
		existing map[string]string
		want     string
	}{
		{"created", map[string]string{}, "lt-new"},
		{"made by a retry whose first answer was lost", map[string]string{"mine": "lt-first"}, "lt-first"},
	} {
		got, err := CreateLaunchTemplate(context.Background(), &launchTemplates{existing: tt.existing}, in)
		if err != nil || got != tt.want {
			t.Errorf("%s: CreateLaunchTemplate = %q, %v; want %s", tt.name, got, err, tt.want)
		}
	}
	denied := &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "no"}
	if _, err := CreateLaunchTemplate(context.Background(), &launchTemplates{fail: denied}, in); err == nil || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Errorf("another error: %v, want it returned", err)
	}
}
