package claim

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

var large = protocol.ResourceClass{CPU: 2, MemoryMiB: 4096}

func tagsOf(in *ec2.CreateFleetInput) map[string]string {
	out := map[string]string{}
	for _, spec := range in.TagSpecifications {
		if spec.ResourceType != ec2types.ResourceTypeInstance {
			continue
		}
		for _, tag := range spec.Tags {
			out[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
		}
	}
	return out
}

func TestFleetRequestAttributeBased(t *testing.T) {
	tests := []struct {
		usage   string
		ltName  bool
		allowed []string
	}{
		{protocol.UsageOnDemand, false, []string{"C6I.*", "m*"}},
		{protocol.UsageSpot, true, []string{"c*"}},
	}
	for _, tt := range tests {
		t.Run(tt.usage, func(t *testing.T) {
			e := newEnv(t)
			cfg := e.cfg
			fleet := *cfg.Fleet
			if tt.ltName {
				fleet.LaunchTemplateID, fleet.LaunchTemplateName = "", "runners"
			}
			cfg.Fleet = &fleet
			req := e.request(3)
			req.UsageClass, req.AllowedTypes = tt.usage, tt.allowed
			in, err := e.c.fleetRequest(context.Background(), req, cfg, large, 3, "tok-1")
			if err != nil {
				t.Fatal(err)
			}
			if in.Type != ec2types.FleetTypeInstant || aws.ToString(in.ClientToken) != "tok-1" {
				t.Errorf("type %s, token %s", in.Type, aws.ToString(in.ClientToken))
			}
			if len(in.LaunchTemplateConfigs) != 1 {
				t.Fatalf("%d launch template configs", len(in.LaunchTemplateConfigs))
			}
			spec := in.LaunchTemplateConfigs[0].LaunchTemplateSpecification
			wantID, wantName := "lt-0123", ""
			if tt.ltName {
				wantID, wantName = "", "runners"
			}
			if aws.ToString(spec.LaunchTemplateId) != wantID || aws.ToString(spec.LaunchTemplateName) != wantName || aws.ToString(spec.Version) != "$Latest" {
				t.Errorf("template %q %q %q", aws.ToString(spec.LaunchTemplateId), aws.ToString(spec.LaunchTemplateName), aws.ToString(spec.Version))
			}
			ov := in.LaunchTemplateConfigs[0].Overrides
			if len(ov) != 2 {
				t.Fatalf("%d overrides, want one per subnet", len(ov))
			}
			var lower []string
			for _, p := range tt.allowed {
				lower = append(lower, strings.ToLower(p))
			}
			for i, o := range ov {
				if got := aws.ToString(o.SubnetId); got != fleet.SubnetIDs[i] {
					t.Errorf("override %d subnet %s", i, got)
				}
				if o.InstanceType != "" {
					t.Errorf("override %d has instance type %s", i, o.InstanceType)
				}
				r := o.InstanceRequirements
				if r == nil {
					t.Fatalf("override %d has no instance requirements", i)
				}
				if aws.ToInt32(r.VCpuCount.Min) != 2 || aws.ToInt32(r.VCpuCount.Max) != 2 {
					t.Errorf("vcpus %d-%d, want exactly 2", aws.ToInt32(r.VCpuCount.Min), aws.ToInt32(r.VCpuCount.Max))
				}
				if aws.ToInt32(r.MemoryMiB.Min) != 4096 || r.MemoryMiB.Max != nil {
					t.Errorf("memory min %d max %v, want at least 4096", aws.ToInt32(r.MemoryMiB.Min), r.MemoryMiB.Max)
				}
				if !slices.Equal(r.AllowedInstanceTypes, lower) {
					t.Errorf("allowed %v, want %v", r.AllowedInstanceTypes, lower)
				}
				if r.BurstablePerformance != ec2types.BurstablePerformanceExcluded {
					t.Errorf("burstable %s", r.BurstablePerformance)
				}
			}
			tc := in.TargetCapacitySpecification
			if aws.ToInt32(tc.TotalTargetCapacity) != 3 {
				t.Errorf("total %d", aws.ToInt32(tc.TotalTargetCapacity))
			}
			if tt.usage == protocol.UsageSpot {
				if tc.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeSpot || aws.ToInt32(tc.SpotTargetCapacity) != 3 || tc.OnDemandTargetCapacity != nil {
					t.Errorf("spot capacity %+v", tc)
				}
				if in.SpotOptions == nil || in.SpotOptions.AllocationStrategy != ec2types.SpotAllocationStrategyPriceCapacityOptimized {
					t.Errorf("spot options %+v", in.SpotOptions)
				}
			} else {
				if tc.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeOnDemand || aws.ToInt32(tc.OnDemandTargetCapacity) != 3 || tc.SpotTargetCapacity != nil {
					t.Errorf("on-demand capacity %+v", tc)
				}
				if in.SpotOptions != nil {
					t.Errorf("spot options on an on-demand fleet")
				}
			}
			want := map[string]string{"AllowSelfTermination": "true", "InitialRunId": testRun, "ec2runners:pool": testPool}
			if got := tagsOf(in); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("tags %v, want %v", got, want)
			}
			if len(e.ec2.TypeInputs) != 0 || len(e.ec2.LtInputs) != 0 {
				t.Error("attribute-based selection described instance types")
			}
		})
	}
}

func explicitEnv(t *testing.T) *env {
	e := newEnv(t)
	e.cfg.Fleet.InstanceSelection = protocol.SelectionExplicit
	e.writeConfig()
	x86, arm := ec2types.ArchitectureTypeX8664, ec2types.ArchitectureTypeArm64
	e.ec2.Catalog = []ec2types.InstanceTypeInfo{
		awsfake.InstanceTypeInfo("m6i.large", 2, 8192, false, x86),
		awsfake.InstanceTypeInfo("c6i.large", 2, 4096, false, x86),
		awsfake.InstanceTypeInfo("c6g.large", 2, 4096, false, arm),
		awsfake.InstanceTypeInfo("r6i.large", 2, 16384, false, x86), // not allowed
		awsfake.InstanceTypeInfo("t3.large", 2, 8192, true, x86),    // burstable
		awsfake.InstanceTypeInfo("c5a.small", 2, 3072, false, x86),  // too little memory
		awsfake.InstanceTypeInfo("c6i.xlarge", 4, 8192, false, x86), // other cpu count
		awsfake.InstanceTypeInfo("c5.large", 2, 4096, false, x86, ec2types.ArchitectureTypeI386),
		awsfake.InstanceTypeInfo("c7i.large", 2, 4096, false, x86),
	}
	e.ec2.PageSize = 2
	e.ec2.LtImage = "ami-x86"
	e.ec2.Images["ami-x86"] = ec2types.ArchitectureValuesX8664
	e.ec2.Images["ami-arm"] = ec2types.ArchitectureValuesArm64
	return e
}

func TestFleetRequestExplicit(t *testing.T) {
	tests := []struct {
		name  string
		image string
		arch  string
		want  []string
		pages int // of two types each, after EC2's filters
	}{
		{"x86_64 AMI", "ami-x86", "x86_64", []string{"c5.large", "c6i.large", "c7i.large", "m6i.large", "t3.large"}, 3},
		{"arm64 AMI", "ami-arm", "arm64", []string{"c6g.large"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := explicitEnv(t)
			e.ec2.LtImage = tt.image
			req := e.request(2)
			req.AllowedTypes = []string{"c*", "M*", "t*"}
			in, err := e.c.fleetRequest(context.Background(), req, e.cfg, large, 2, "tok")
			if err != nil {
				t.Fatal(err)
			}
			// t3.large matches t* but is burstable: the filter keeps it out.
			want := slices.DeleteFunc(slices.Clone(tt.want), func(s string) bool { return s == "t3.large" })
			var got []string
			for _, o := range in.LaunchTemplateConfigs[0].Overrides {
				if o.InstanceRequirements != nil {
					t.Error("explicit override with instance requirements")
				}
				got = append(got, string(o.InstanceType)+"@"+aws.ToString(o.SubnetId))
			}
			var expect []string
			for _, typ := range want {
				for _, sn := range e.cfg.Fleet.SubnetIDs {
					expect = append(expect, typ+"@"+sn)
				}
			}
			if !slices.Equal(got, expect) {
				t.Errorf("overrides %v, want %v", got, expect)
			}
			if len(e.ec2.TypeInputs) != tt.pages {
				t.Errorf("%d DescribeInstanceTypes pages read, want all %d", len(e.ec2.TypeInputs), tt.pages)
			}
			filters := map[string][]string{}
			for _, f := range e.ec2.TypeInputs[0].Filters {
				filters[aws.ToString(f.Name)] = f.Values
			}
			wantFilters := map[string][]string{"vcpu-info.default-vcpus": {"2"}, "processor-info.supported-architecture": {tt.arch}, "burstable-performance-supported": {"false"}}
			if fmt.Sprint(filters) != fmt.Sprint(wantFilters) {
				t.Errorf("filters %v, want %v", filters, wantFilters)
			}
			lt := e.ec2.LtInputs
			if len(lt) != 1 || aws.ToString(lt[0].LaunchTemplateId) != "lt-0123" || !slices.Equal(lt[0].Versions, []string{"$Latest"}) {
				t.Errorf("launch template lookups %+v", lt)
			}
			if im := e.ec2.ImageInputs; len(im) != 1 || !slices.Equal(im[0].ImageIds, []string{tt.image}) {
				t.Errorf("image lookups %+v", im)
			}
			if aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity) != 2 || in.Type != ec2types.FleetTypeInstant {
				t.Errorf("capacity %+v, type %s", in.TargetCapacitySpecification, in.Type)
			}
			if len(tagsOf(in)) != 3 {
				t.Errorf("tags %v", tagsOf(in))
			}
		})
	}
}

func TestFleetRequestExplicitErrors(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(*env, *Request)
		errText string
	}{
		{"no type matches", func(_ *env, r *Request) { r.AllowedTypes = []string{"z*"} }, "no x86_64 instance type has 2 vCPUs, at least 4096 MiB and matches [z*]"},
		{"no type large enough", func(e *env, _ *Request) { e.ec2.Catalog = e.ec2.Catalog[5:6] }, "no x86_64 instance type"},
		{"template without AMI", func(e *env, _ *Request) { e.ec2.LtImage = "" }, "needs an AMI id in the launch template"},
		{"unknown AMI", func(e *env, _ *Request) { e.ec2.LtImage = "ami-gone" }, "AMI ami-gone of the launch template has no known architecture"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := explicitEnv(t)
			req := e.request(1)
			tt.setup(e, &req)
			_, err := e.c.fleetRequest(context.Background(), req, e.cfg, large, 1, "tok")
			if err == nil || !strings.Contains(err.Error(), tt.errText) {
				t.Errorf("error %v, want %q", err, tt.errText)
			}
		})
	}
}

func TestFleetRequestExplicitCapsOverrides(t *testing.T) {
	e := explicitEnv(t)
	e.ec2.Catalog = nil
	for i := range 200 {
		e.ec2.Catalog = append(e.ec2.Catalog, awsfake.InstanceTypeInfo(fmt.Sprintf("c%03d.large", i), 2, 4096, false, ec2types.ArchitectureTypeX8664))
	}
	e.ec2.PageSize = 100
	in, err := e.c.fleetRequest(context.Background(), e.request(1), e.cfg, large, 1, "tok")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(in.LaunchTemplateConfigs[0].Overrides); n != maxOverrides {
		t.Errorf("%d overrides, want the cap %d", n, maxOverrides)
	}
}

func TestClientToken(t *testing.T) {
	req := Request{Pool: "p", RunID: "r"}
	od := protocol.UsageOnDemand
	base := clientToken(req, "nonce1", od, 0, 2)
	if !regexp.MustCompile(`^ec2runners-[0-9a-f]{32}$`).MatchString(base) || len(base) > 64 {
		t.Errorf("token %q: want ec2runners- and 32 hex digits, at most 64 characters (EC2's limit)", base)
	}
	if again := clientToken(req, "nonce1", od, 0, 2); again != base {
		t.Errorf("same attempt gave %s then %s", base, again)
	}
	other := map[string]string{
		"other nonce": clientToken(req, "nonce2", od, 0, 2),
		"other count": clientToken(req, "nonce1", od, 0, 3),
		"other run":   clientToken(Request{Pool: "p", RunID: "r2"}, "nonce1", od, 0, 2),
		"other pool":  clientToken(Request{Pool: "p2", RunID: "r"}, "nonce1", od, 0, 2),
		"next launch": clientToken(req, "nonce1", od, 2, 2),
		// A spot fleet that launched nothing, then the on-demand fallback
		// for as many: the same token would get the spot fleet's answer.
		"other usage class": clientToken(req, "nonce1", protocol.UsageSpot, 0, 2),
	}
	for what, tok := range other {
		if tok == base {
			t.Errorf("%s gave the same token", what)
		}
	}
	// Two attempts of the same run (each with its own nonce) launch anew.
	if first, second := newNonce(), newNonce(); first == second {
		t.Errorf("nonces repeat: %s twice", first)
	}
}

// Through Create: an explicit spot fleet records its instances with the
// launched type and usage class.
func TestCreateExplicitSpotFleet(t *testing.T) {
	t.Parallel()
	e := explicitEnv(t)
	res, err := e.create(1, func(r *Request) { r.UsageClass = protocol.UsageSpot })
	if err != nil {
		t.Fatal(err)
	}
	f := e.ec2.FleetInputs()
	if len(f) != 1 || f[0].SpotOptions == nil || f[0].LaunchTemplateConfigs[0].Overrides[0].InstanceType != "c5.large" {
		t.Fatalf("fleet %+v", f)
	}
	r := e.db.instance(t, res.Instances[0].ID)
	if r.InstanceType != "c5.large" || r.UsageClass != protocol.UsageSpot || res.Instances[0].UsageClass != protocol.UsageSpot {
		t.Errorf("record %+v, instance %+v", r, res.Instances[0])
	}
}

// A CreateFleet call that fails outright fails the claim and gives back the
// warm runners.
func TestCreateFleetAPIError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedIdle("i-1", healthy)
	e.ec2.FleetErr = errTransient
	_, err := e.create(2)
	if err == nil || !strings.Contains(err.Error(), "CreateFleet: "+errTransient.Error()) || !strings.Contains(err.Error(), "i-1: released to the pool") {
		t.Fatalf("error %v", err)
	}
	if len(e.ec2.TerminatedIDs()) != 0 {
		t.Errorf("terminated %v", e.ec2.TerminatedIDs())
	}
	e.assertNothingHeld(t)
}

// A CreateFleet whose answer never arrives may still have launched: the
// run's tagged instances without a record are found and terminated.
func TestFleetLostAnswerTerminatesWhatItLaunched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ec2.OnFleet = func(in *ec2.CreateFleetInput) { e.ec2.LaunchOfFleetLocked("i-lost", in) }
	e.ec2.FleetErr = errTransient
	if _, err := e.create(1); err == nil {
		t.Fatal("Create succeeded without its fleet")
	}
	if got := e.ec2.TerminatedIDs(); !slices.Contains(got, "i-lost") {
		t.Errorf("terminated %v, want the unrecorded i-lost", got)
	}
	e.assertNothingHeld(t)
}

// A CreateFleet retried after its first answer was lost, on an endpoint
// that ignores ClientToken, launches twice: the first launch's instances
// (the run's, without a record) are terminated once the claim's own are
// recorded.
func TestFleetRetriedLaunchTerminatesTheFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ec2.OnFleet = func(in *ec2.CreateFleetInput) { e.ec2.LaunchOfFleetLocked("i-first-attempt", in) }
	res, err := e.create(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-first-attempt"}) {
		t.Errorf("terminated %v, want only i-first-attempt", got)
	}
	if r := e.db.instance(t, res.Instances[0].ID); r.State != protocol.StateRunning {
		t.Errorf("the claim's own instance is %s, want running", r.State)
	}
}

// EC2's API may not know an instance for a while after CreateFleet
// returned it: terminating one of a failed claim's new instances is retried
// until EC2 knows it, instead of counting it as gone and leaving it running.
func TestFleetTerminatesInstancesEC2DoesNotKnowYet(t *testing.T) {
	tests := []struct {
		name    string
		arrange func(e *env)
		want    []string
	}{
		{"fleet short of capacity", func(e *env) { e.ec2.ShortBy = 1 }, []string{"i-f1"}},
		{"new instance never registers", func(e *env) { e.agents.Set("i-f2", neverRegisters) }, []string{"i-f1", "i-f2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.ec2.UnseenCalls = 2
			tt.arrange(e)
			if _, err := e.create(2); err == nil {
				t.Fatal("claim succeeded")
			}
			if got := e.ec2.TerminatedIDs(); !slices.Equal(got, tt.want) {
				t.Errorf("terminated %v, want %v", got, tt.want)
			}
			e.assertNothingHeld(t)
		})
	}
}
