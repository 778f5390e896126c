package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccClaim_invalidInput: bad arguments fail at plan time, naming the
// attribute and what is allowed.
func TestAccClaim_invalidInput(t *testing.T) {
	cases := map[string]struct{ args, want string }{
		"zero instances":        {`instance_count = 0`, `Attribute instance_count value must be between 1 and 100, got: 0`},
		"too many instances":    {`instance_count = 101`, `Attribute instance_count value must be between 1 and 100, got: 101`},
		"unknown usage class":   {`usage_class = "reserved"`, `Attribute usage_class value must be one of: \["on-demand" "spot"\]`},
		"bad run id":            {`run_id = "my run"`, `Attribute run_id must be 1-100 characters of letters, digits`},
		"bad type pattern":      {`allowed_instance_types = ["c6i large"]`, `allowed_instance_types\[0\] must be an instance type pattern`},
		"no type patterns":      {`allowed_instance_types = []`, `Attribute allowed_instance_types list must contain at least 1 elements`},
		"bad max runtime":       {`max_runtime = "forever"`, `Attribute max_runtime must be a duration`},
		"bad registration wait": {`registration_wait = "0s"`, `Attribute registration_wait must be a duration such as .90s., .7m. or .1h30m., from 1s`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			expectPlanError(t, "resource \"ec2runners_claim\" \"test\" {\n  pool = \"ok\"\n  "+tc.args+"\n}", tc.want)
		})
	}
}

// TestAccClaim_unknownResourceClass: when the pool exists, a class it does
// not have is an error at plan time that lists the classes it has.
func TestAccClaim_unknownResourceClass(t *testing.T) {
	e := newClaimEnv(t, "acc-noclass")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{Config: e.poolConfig()},
			{
				Config:      e.poolConfig() + e.claimConfig("test", `resource_class = "huge"`),
				ExpectError: regexp.MustCompile(wrapped(`Attribute resource_class: pool ` + e.pool + ` has no resource class "huge"; it has large.`)),
			},
		},
	})
}
