package faultproxy_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/faultproxy"
)

// An EC2 request whose answer was lost, retried with its ClientToken: AWS
// carries it out once and answers the retry with the first answer; the
// emulator alone carries out both.
func TestRealismClientTokens(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	image, err := emulator.Image(ctx, direct.ec2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		realism bool
		want    int
	}{{true, 1}, {false, 2}} {
		p := startProxy(t, endpoint, 1)
		p.SetRealism(faultproxy.Realism{ClientTokens: tc.realism})
		c := newClients(p.URL, 1)
		marker := randomName("token-")
		run := func() (*ec2.RunInstancesOutput, error) {
			return c.ec2.RunInstances(ctx, &ec2.RunInstancesInput{
				ImageId: aws.String(image), InstanceType: ec2types.InstanceTypeT3Micro, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
				ClientToken: aws.String(marker),
				TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
					Tags: []ec2types.Tag{{Key: aws.String("faultproxy-test"), Value: aws.String(marker)}}}},
			})
		}
		p.SetRules(faultproxy.Rule{Service: "ec2", Action: "RunInstances", Kind: faultproxy.DropAfter, Rate: 1})
		if _, err := run(); err == nil {
			t.Fatalf("realism %t: the dropped answer arrived", tc.realism)
		}
		p.SetRules()
		retried, err := run()
		if err != nil {
			t.Fatalf("realism %t: the retry failed: %v", tc.realism, err)
		}
		launched := instancesTagged(t, direct, marker)
		if len(launched) != tc.want {
			t.Errorf("realism %t: %d instances launched for one ClientToken, want %d", tc.realism, len(launched), tc.want)
		}
		if tc.realism && (len(retried.Instances) != 1 || len(launched) != 1 || aws.ToString(retried.Instances[0].InstanceId) != launched[0]) {
			t.Errorf("the retry answered %v, want the first launch %v", retried.Instances, launched)
		}
	}
}

func instancesTagged(t *testing.T, c awsClients, marker string) []string {
	t.Helper()
	out, err := c.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:faultproxy-test"), Values: []string{marker}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			ids = append(ids, aws.ToString(i.InstanceId))
		}
	}
	t.Cleanup(func() {
		if len(ids) > 0 {
			_, _ = c.ec2.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: ids})
		}
	})
	return ids
}
