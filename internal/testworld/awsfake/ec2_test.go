package awsfake

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// RunInstances refuses user data as EC2 does (the emulator's front answers
// the same, internal/testworld/emulator): more than 16384 bytes before base64, or text
// that is not base64, with EC2's code and message; exactly 16384 bytes
// launch.
func TestEC2_RunInstancesUserData(t *testing.T) {
	e := &EC2{}
	run := func(userData string) (*ec2.RunInstancesOutput, error) {
		return e.RunInstances(context.Background(), &ec2.RunInstancesInput{
			ImageId: aws.String("ami-1"), MinCount: aws.Int32(2), MaxCount: aws.Int32(2), UserData: aws.String(userData),
		})
	}
	of := func(n int) string { return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("#", n))) }
	for _, tc := range []struct{ what, userData, message string }{
		{"16385 bytes", of(16385), "User data is limited to 16384 bytes"},
		{"not base64", "#!/bin/sh\n", "Invalid BASE64 encoding of user data"},
	} {
		_, err := run(tc.userData)
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidParameterValue" || apiErr.ErrorMessage() != tc.message {
			t.Errorf("%s: %v, want InvalidParameterValue: %s", tc.what, err, tc.message)
		}
	}
	if len(e.Live) != 0 || len(e.Runs) != 0 {
		t.Fatalf("refused launches ran instances: %v", e.Live)
	}
	out, err := run(of(16384))
	if err != nil || len(out.Instances) != 2 || len(e.Live) != 2 {
		t.Fatalf("16384 bytes: %v, %v; want 2 instances launched (live: %v)", out, err, e.Live)
	}
}

// A listing applies its filters as EC2 does: an instance is listed only
// when it matches each of them, so a run's listing leaves out the other
// runs' instances and a stopped instance is listed only when its state is
// asked for.
func TestEC2_DescribeInstancesFilters(t *testing.T) {
	ctx := context.Background()
	e := &EC2{Pool: "p"}
	launch := func(run string) []string {
		out, err := e.CreateFleet(ctx, &ec2.CreateFleetInput{
			Type:                        ec2types.FleetTypeInstant,
			LaunchTemplateConfigs:       []ec2types.FleetLaunchTemplateConfigRequest{{Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "c6i.large"}}}},
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(2), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
			TagSpecifications:           []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String(protocol.TagInitialRunID), Value: aws.String(run)}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, group := range out.Instances {
			ids = append(ids, group.InstanceIds...)
		}
		return ids
	}
	one, two := launch("run-1"), launch("run-2")
	e.Stopped = map[string]bool{two[1]: true}
	list := func(filters ...ec2types.Filter) []string {
		out, err := e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: append([]ec2types.Filter{
			{Name: aws.String("tag:" + protocol.TagPool), Values: []string{"p"}},
		}, filters...)})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				ids = append(ids, aws.ToString(i.InstanceId))
			}
		}
		return ids
	}
	state := func(states ...string) ec2types.Filter {
		return ec2types.Filter{Name: aws.String("instance-state-name"), Values: states}
	}
	run := func(id string) ec2types.Filter {
		return ec2types.Filter{Name: aws.String("tag:" + protocol.TagInitialRunID), Values: []string{id}}
	}
	for _, tc := range []struct {
		what string
		got  []string
		want []string
	}{
		{"run-1's", list(state("running", "stopped"), run("run-1")), one},
		{"run-2's running", list(state("running"), run("run-2")), two[:1]},
		{"all stopped", list(state("stopped")), two[1:]},
		{"another pool's", list(state("running"), ec2types.Filter{Name: aws.String("tag:" + protocol.TagPool), Values: []string{"q"}}), nil},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: listed %v, want %v", tc.what, tc.got, tc.want)
		}
	}
}
