package faultproxy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

// EC2 short of capacity, which the emulator never is: an instant fleet of
// the lifecycle short launches what EC2 has (the emulator launches only
// that), and the answer carries an Errors[] entry per override for the
// rest, as AWS answers; a fleet of the other lifecycle is filled.
func TestShortage(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	subnets, ltID := fleetFixture(t, direct)
	p := startProxy(t, endpoint, 1)
	c := newClients(p.URL, 1)
	// fleet asks for n instances of lifecycle, one override per subnet.
	fleet := func(lifecycle ec2types.DefaultTargetCapacityType, n int32) (*ec2.CreateFleetOutput, []string) {
		t.Helper()
		marker := randomName("short-")
		out, err := c.ec2.CreateFleet(ctx, fleetInput(ltID, subnets, lifecycle, n, marker, marker))
		if err != nil {
			t.Fatalf("CreateFleet of %d %s: %v", n, lifecycle, err)
		}
		return out, instancesTagged(t, direct, marker)
	}
	launched := func(out *ec2.CreateFleetOutput) []string {
		var ids []string
		for _, i := range out.Instances {
			ids = append(ids, i.InstanceIds...)
		}
		return ids
	}
	// checkErrors: one entry per override, naming it, its lifecycle, code
	// and message.
	checkErrors := func(what string, out *ec2.CreateFleetOutput, lifecycle ec2types.InstanceLifecycle, code, message string) {
		t.Helper()
		if len(out.Errors) != len(subnets) {
			t.Fatalf("%s: errors %+v, want one per override (%d)", what, out.Errors, len(subnets))
		}
		for i, e := range out.Errors {
			lo := e.LaunchTemplateAndOverrides
			if aws.ToString(e.ErrorCode) != code || aws.ToString(e.ErrorMessage) != message || e.Lifecycle != lifecycle ||
				lo == nil || lo.Overrides == nil || aws.ToString(lo.Overrides.SubnetId) != subnets[i] || lo.Overrides.InstanceType != ec2types.InstanceTypeC6iLarge ||
				lo.LaunchTemplateSpecification == nil || aws.ToString(lo.LaunchTemplateSpecification.LaunchTemplateId) != ltID {
				t.Errorf("%s: error %d: %s %q %s %+v, want %s %q %s for override %s c6i.large of %s", what, i,
					aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage), e.Lifecycle, lo, code, message, lifecycle, subnets[i], ltID)
			}
		}
	}

	// Spot: 1 of 3 (a partial fill).
	p.SetShortages(faultproxy.SpotShortage(1, faultproxy.InsufficientInstanceCapacity))
	out, tagged := fleet(ec2types.DefaultTargetCapacityTypeSpot, 3)
	if ids := launched(out); len(ids) != 1 || len(tagged) != 1 || ids[0] != tagged[0] {
		t.Errorf("spot 1 of 3: answered %v, the emulator launched %v; want the same one instance", ids, tagged)
	}
	if len(out.Instances) > 0 && out.Instances[0].Lifecycle != ec2types.InstanceLifecycleSpot {
		t.Errorf("spot 1 of 3: the instance's lifecycle is %q", out.Instances[0].Lifecycle)
	}
	checkErrors("spot 1 of 3", out, ec2types.InstanceLifecycleSpot, "InsufficientInstanceCapacity", "There is no Spot capacity available that matches your request.")

	// Spot: none; the proxy answers, the emulator launches nothing.
	p.SetShortages(faultproxy.SpotShortage(0, faultproxy.MaxSpotInstanceCountExceeded))
	out, tagged = fleet(ec2types.DefaultTargetCapacityTypeSpot, 2)
	if ids := launched(out); len(ids) != 0 || len(tagged) != 0 || !strings.HasPrefix(aws.ToString(out.FleetId), "fleet-") {
		t.Errorf("spot none: fleet %q answered %v, the emulator launched %v; want a fleet id and no instance", aws.ToString(out.FleetId), ids, tagged)
	}
	checkErrors("spot none", out, ec2types.InstanceLifecycleSpot, "MaxSpotInstanceCountExceeded", "Max spot instance count exceeded")

	// On-demand is not short of Spot capacity.
	out, tagged = fleet(ec2types.DefaultTargetCapacityTypeOnDemand, 2)
	if ids := launched(out); len(ids) != 2 || len(tagged) != 2 || len(out.Errors) != 0 {
		t.Errorf("on-demand under a spot shortage: answered %v with errors %+v, the emulator launched %v; want both", ids, out.Errors, tagged)
	}
	// As many as EC2 has: no shortage.
	p.SetShortages(faultproxy.SpotShortage(2, faultproxy.UnfulfillableCapacity))
	if out, tagged = fleet(ec2types.DefaultTargetCapacityTypeSpot, 2); len(launched(out)) != 2 || len(tagged) != 2 || len(out.Errors) != 0 {
		t.Errorf("spot 2 of 2: answered %v with errors %+v, the emulator launched %v; want both", launched(out), out.Errors, tagged)
	}

	// On-demand short: EC2's message names the override's type.
	p.SetShortages(faultproxy.OnDemandShortage(0))
	out, tagged = fleet(ec2types.DefaultTargetCapacityTypeOnDemand, 1)
	if len(launched(out)) != 0 || len(tagged) != 0 {
		t.Errorf("on-demand none: answered %v, the emulator launched %v", launched(out), tagged)
	}
	checkErrors("on-demand none", out, ec2types.InstanceLifecycleOnDemand, "InsufficientInstanceCapacity",
		"We currently do not have sufficient c6i.large capacity in the Availability Zone you requested. Our system will be working on provisioning additional capacity. You can currently get c6i.large capacity by not specifying an Availability Zone in your request or choosing another Availability Zone.")

	if n := p.Stats().FleetsShort; n != 3 {
		t.Errorf("FleetsShort %d, want the 3 fleets cut", n)
	}
}

// fleetFixture makes a launch template and finds two subnets, for fleets.
func fleetFixture(t *testing.T, direct awsClients) (subnets []string, ltID string) {
	t.Helper()
	ctx := context.Background()
	image, err := emulator.Image(ctx, direct.ec2)
	if err != nil {
		t.Fatal(err)
	}
	if subnets, err = emulator.DefaultSubnets(ctx, direct.ec2, 2); err != nil {
		t.Fatal(err)
	}
	ltID, err = emulator.CreateLaunchTemplate(ctx, direct.ec2, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(randomName("short-")),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = direct.ec2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(ltID)})
	})
	return subnets, ltID
}

// fleetInput is an instant fleet of n c6i.large of a lifecycle, one
// override per subnet, its instances tagged marker.
func fleetInput(ltID string, subnets []string, lifecycle ec2types.DefaultTargetCapacityType, n int32, token, marker string) *ec2.CreateFleetInput {
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	for _, s := range subnets {
		overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceTypeC6iLarge, SubnetId: aws.String(s)})
	}
	target := &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(n), DefaultTargetCapacityType: lifecycle}
	if lifecycle == ec2types.DefaultTargetCapacityTypeSpot {
		target.SpotTargetCapacity = aws.Int32(n)
	} else {
		target.OnDemandTargetCapacity = aws.Int32(n)
	}
	return &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant, ClientToken: aws.String(token),
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String(ltID), Version: aws.String("$Latest")},
			Overrides:                   overrides}},
		TargetCapacitySpecification: target,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
			Tags: []ec2types.Tag{{Key: aws.String("faultproxy-test"), Value: aws.String(marker)}}}}}
}

// A ClientToken used again for other parameters fails with
// IdempotentParameterMismatch, as AWS answers it, also after a fleet EC2
// launched nothing for (runs-on/runs-on#251: an on-demand fleet sent with
// the token of a spot fleet answered UnfulfillableCapacity); the same
// request again gets the first answer, launching nothing more.
func TestShortageClientTokens(t *testing.T) {
	ctx := context.Background()
	direct := newClients(endpoint, 3)
	subnets, ltID := fleetFixture(t, direct)
	p := startProxy(t, endpoint, 1)
	p.SetRealism(faultproxy.Realism{ClientTokens: true})
	c := newClients(p.URL, 1)
	mismatch := func(err error) bool {
		var apiErr smithy.APIError
		return errors.As(err, &apiErr) && apiErr.ErrorCode() == "IdempotentParameterMismatch"
	}
	for _, available := range []int{0, 1} {
		p.SetShortages(faultproxy.SpotShortage(available, faultproxy.UnfulfillableCapacity))
		token, marker := randomName("token-"), randomName("short-")
		first, err := c.ec2.CreateFleet(ctx, fleetInput(ltID, subnets, ec2types.DefaultTargetCapacityTypeSpot, 2, token, marker))
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.ec2.CreateFleet(ctx, fleetInput(ltID, subnets, ec2types.DefaultTargetCapacityTypeSpot, 2, token, marker))
		if err != nil || aws.ToString(again.FleetId) != aws.ToString(first.FleetId) || len(again.Errors) != len(first.Errors) {
			t.Errorf("spot %d of 2: the same request again answered fleet %q (%v), want the first answer, fleet %q", available, aws.ToString(again.FleetId), err, aws.ToString(first.FleetId))
		}
		_, err = c.ec2.CreateFleet(ctx, fleetInput(ltID, subnets, ec2types.DefaultTargetCapacityTypeOnDemand, 2, token, marker))
		if !mismatch(err) {
			t.Errorf("spot %d of 2, then on-demand with its token: %v, want IdempotentParameterMismatch", available, err)
		}
		if got := instancesTagged(t, direct, marker); len(got) != available {
			t.Errorf("spot %d of 2: the emulator launched %v in all, want %d", available, got, available)
		}
	}
}
