package claim

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The launch template must carry the pool's tag before a claim launches
// it: the pool config item names it, the tag is set by whoever manages it.
func TestLaunchTemplateMustBeTaggedForThePool(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		tags    map[string]string
		missing bool
		wantErr string
	}{
		"untagged":           {tags: map[string]string{"team": "ci"}, wantErr: "launch template lt-0123 does not carry the tag ec2runners:pool = testpool"},
		"tagged for another": {tags: map[string]string{protocol.TagPool: "other"}, wantErr: "does not carry the tag ec2runners:pool = testpool"},
		"missing":            {missing: true, wantErr: "reading launch template lt-0123: api error InvalidLaunchTemplateId.NotFound"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.ec2.LtTags, e.ec2.LtMissing = tc.tags, tc.missing
			e.seedIdle("i-1", healthy)
			_, err := e.create(2)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("claim error = %v, want %q", err, tc.wantErr)
			}
			if n := len(e.ec2.FleetInputs()); n != 0 {
				t.Errorf("%d CreateFleet calls with a launch template not tagged for the pool", n)
			}
			e.assertNothingHeld(t)
		})
	}
}

// The template is looked up as the pool config names it: by id or by name.
func TestLaunchTemplateLookedUpAsConfigured(t *testing.T) {
	t.Parallel()
	for _, byName := range []bool{false, true} {
		e := newEnv(t)
		if byName {
			e.cfg.Fleet.LaunchTemplateID, e.cfg.Fleet.LaunchTemplateName = "", "runners"
			e.writeConfig()
		}
		if _, err := e.create(1); err != nil {
			t.Fatal(err)
		}
		e.ec2.Mu.Lock()
		in := e.ec2.LtDescribes
		e.ec2.Mu.Unlock()
		if len(in) != 1 {
			t.Fatalf("%d DescribeLaunchTemplates calls, want 1", len(in))
		}
		ids, names := in[0].LaunchTemplateIds, in[0].LaunchTemplateNames
		if byName && (len(ids) != 0 || !slices.Equal(names, []string{"runners"})) || !byName && (!slices.Equal(ids, []string{"lt-0123"}) || len(names) != 0) {
			t.Errorf("by name %v: DescribeLaunchTemplates ids %q names %q", byName, ids, names)
		}
		if spec := e.ec2.FleetInputs()[0].LaunchTemplateConfigs[0].LaunchTemplateSpecification; byName != (aws.ToString(spec.LaunchTemplateName) == "runners") {
			t.Errorf("by name %v: CreateFleet launched %q %q", byName, aws.ToString(spec.LaunchTemplateId), aws.ToString(spec.LaunchTemplateName))
		}
	}
}
