package provider

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccPool_invalidInput checks that bad input fails at plan time with an
// error that names the attribute and what is allowed.
func TestAccPool_invalidInput(t *testing.T) {
	cases := map[string]struct {
		config string
		want   string
	}{
		"name too long": {
			config: `name = "` + strings.Repeat("a", 41) + `"`,
			want:   `Attribute name string length must be between 1 and 40`,
		},
		"name with a dot": {
			config: `name = "my.pool"`,
			want:   `Attribute name may contain only letters, digits, '_' and '-'`,
		},
		"class name with a space": {
			config: `
name             = "ok"
resource_classes = { "my class" = { cpu = 2, memory_mib = 4096 } }`,
			want: `resource_classes.*may contain only letters, digits`,
		},
		"duplicate cpu": {
			config: `
name             = "ok"
resource_classes = { a = { cpu = 2, memory_mib = 4096 }, b = { cpu = 2, memory_mib = 8192 } }`,
			want: `Attribute resource_classes: resource classes "a" and "b" have the same cpu 2`,
		},
		"memory not increasing with cpu": {
			config: `
name             = "ok"
resource_classes = { a = { cpu = 2, memory_mib = 8192 }, b = { cpu = 4, memory_mib = 8192 } }`,
			want: `Attribute resource_classes: resource class "b" \(cpu 4\) has memory_mib 8192`,
		},
		"zero cpu": {
			config: `
name             = "ok"
resource_classes = { a = { cpu = 0, memory_mib = 8192 } }`,
			want: `Attribute resource_classes: resource class "a": cpu and memory_mib must be positive, got cpu 0`,
		},
		"no classes": {
			config: `
name             = "ok"
resource_classes = {}`,
			want: `Attribute resource_classes map must contain at least 1 elements`,
		},
		"queue name too long": {
			config: `
name             = "` + strings.Repeat("p", 40) + `"
resource_classes = { ` + strings.Repeat("c", 40) + ` = { cpu = 2, memory_mib = 4096 } }`,
			want: `Attribute resource_classes: queue name "p+-c+" for resource class "c+" is 81 characters long; SQS allows at most 80`,
		},
		"bad duration": {
			config: `
name         = "ok"
idle_timeout = "7 minutes"`,
			want: `Attribute idle_timeout must be a duration such as .90s., .7m. or .1h30m., from 1m to 168h, got "7 minutes"`,
		},
		"duration too short": {
			config: `
name        = "ok"
max_runtime = "30s"`,
			want: `Attribute max_runtime must be a duration`,
		},
		"both launch template id and name": {
			config: `
name  = "ok"
fleet = {
  launch_template_id   = "lt-1"
  launch_template_name = "runners"
  subnet_ids           = ["subnet-1"]
}`,
			want: `(?s)Invalid Attribute Combination.*fleet.launch_template_id`,
		},
		"no launch template": {
			config: `
name  = "ok"
fleet = { subnet_ids = ["subnet-1"] }`,
			want: `(?s)Invalid Attribute Combination.*launch_template_id`,
		},
		"no subnets": {
			config: `
name  = "ok"
fleet = {
  launch_template_name = "runners"
  subnet_ids           = []
}`,
			want: `Attribute fleet.subnet_ids list must contain at least 1 elements`,
		},
		"unknown instance selection": {
			config: `
name  = "ok"
fleet = {
  launch_template_name = "runners"
  subnet_ids           = ["subnet-1"]
  instance_selection   = "cheapest"
}`,
			want: `Attribute fleet.instance_selection value must be one of: \["attribute-based"\s+"explicit"\]`,
		},
		"bad launch template version": {
			config: `
name  = "ok"
fleet = {
  launch_template_name    = "runners"
  launch_template_version = "latest"
  subnet_ids              = ["subnet-1"]
}`,
			want: `Attribute fleet.launch_template_version must be a version number, \$Default or\s+\$Latest`,
		},
		"bad GitHub owner": {
			config: `
name         = "ok"
github_owner = "-octo"`,
			want: `Attribute github_owner must be a GitHub user or organization name`,
		},
		"bad GitHub repository": {
			config: `
name              = "ok"
github_owner      = "octo"
github_repository = "octo/app"`,
			want: `Attribute github_repository must be a repository name`,
		},
		"repository without owner": {
			config: `
name              = "ok"
github_repository = "app"`,
			want: `Attribute "github_owner" must be specified when "github_repository" is\s+specified`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			expectPlanError(t, "resource \"ec2runners_pool\" \"test\" {\n"+tc.config+"\n}", tc.want)
		})
	}
}

// expectPlanError plans config and expects an error matching pattern.
func expectPlanError(t *testing.T, config, pattern string) {
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{{
			Config:      config,
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(wrapped(pattern)),
		}},
	})
}

// wrapped lets each space of a pattern match any run of white space, as
// Terraform wraps long error messages.
func wrapped(pattern string) string { return strings.ReplaceAll(pattern, " ", `\s+`) }
