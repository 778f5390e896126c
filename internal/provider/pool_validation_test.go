package provider

import (
	"fmt"
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
			want:   `Attribute name string length must be between 3 and 40`,
		},
		"name too short for a DynamoDB table": {
			config: `name = "ci"`,
			want:   `Attribute name string length must be between 3 and 40, got: 2`,
		},
		"name with a dot": {
			config: `name = "my.pool"`,
			want:   `Attribute name may contain only letters, digits, '_' and '-'`,
		},
		"class name with a space": {
			config: `
name             = "okay"
resource_classes = { "my class" = { cpu = 2, memory_mib = 4096 } }`,
			want: `resource_classes.*may contain only letters, digits`,
		},
		"class name with a dash": {
			config: `
name             = "okay"
resource_classes = { "gpu-big" = { cpu = 2, memory_mib = 4096 } }`,
			want: `resource_classes.*may contain only letters, digits and '_', not '-': the class's queue is named <pool>-<class>, so a '-' in a class would let two pools share a queue \(pool a-b's class c and pool a's class b-c are both a-b-c\), got: gpu-big`,
		},
		"warm names an unknown class": {
			config: `
name = "okay"
warm = { huge = { hot = 1 } }`,
			want: `Attribute warm names resource class "huge", which is not one of the pool's resource_classes`,
		},
		"warm hot negative": {
			config: `
name = "okay"
warm = { large = { hot = -1 } }`,
			want: `Attribute warm\["large"\].hot value must be between 0 and 500, got: -1`,
		},
		"warm day misspelt": {
			config: `
name = "okay"
warm = { large = { schedule = [{ days = ["monday"], from = "08:00", to = "19:00", time_zone = "UTC", hot = 2 }] } }`,
			want: `Attribute warm\["large"\].schedule\[0\].days\[0\] value must be one of: \["sun" "mon" "tue" "wed" "thu" "fri" "sat"\]`,
		},
		"warm time not HH:MM": {
			config: `
name = "okay"
warm = { large = { schedule = [{ days = ["mon"], from = "8am", to = "19:00", time_zone = "UTC", hot = 2 }] } }`,
			want: `Attribute warm\["large"\].schedule\[0\].from must be a time of day HH:MM, 00:00 to 23:59, got: 8am`,
		},
		"warm window across midnight": {
			config: `
name = "okay"
warm = { large = { schedule = [{ days = ["mon"], from = "22:00", to = "06:00", time_zone = "UTC", hot = 2 }] } }`,
			want: `Attribute warm\["large"\].schedule\[0\]: to 06:00 is not after from 22:00 \(a window across midnight is two windows\)`,
		},
		"warm window without targets": {
			config: `
name = "okay"
warm = { large = { stopped = 2, schedule = [{ days = ["mon"], from = "08:00", to = "19:00", time_zone = "UTC" }] } }`,
			want: `Attribute warm\["large"\].schedule\[0\]: sets no target: give it hot, stopped or both`,
		},
		"warm stopped negative": {
			config: `
name = "okay"
warm = { large = { stopped = -1 } }`,
			want: `Attribute warm\["large"\].stopped value must be between 0 and 500, got: -1`,
		},
		"max_runner_age too short": {
			config: `
name           = "okay"
max_runner_age = "10m"`,
			want: `Attribute max_runner_age must be a duration such as .90s., .7m. or .1h30m., from 1h to 2160h, got`,
		},
		"warm time zone unknown": {
			config: `
name = "okay"
warm = { large = { schedule = [{ days = ["mon"], from = "08:00", to = "19:00", time_zone = "Mars/Olympus", hot = 2 }] } }`,
			want: `Attribute warm\["large"\].schedule\[0\].time_zone must be an IANA time zone such as Europe/Berlin or UTC, got "Mars/Olympus"`,
		},
		"owner tag key": {
			config: `
name = "okay"
tags = { "ec2runners:pool" = "other" }`,
			want: `Attribute tags: tag key "ec2runners:pool" is the provider's: it tags each queue with its pool \(ec2runners:pool\) and class \(ec2runners:class\)`,
		},
		"class tag key": {
			config: `
name = "okay"
tags = { "ec2runners:class" = "large" }`,
			want: `Attribute tags: tag key "ec2runners:class" is the provider's`,
		},
		"duplicate cpu": {
			config: `
name             = "okay"
resource_classes = { a = { cpu = 2, memory_mib = 4096 }, b = { cpu = 2, memory_mib = 8192 } }`,
			want: `Attribute resource_classes: resource classes "a" and "b" have the same cpu 2`,
		},
		"memory not increasing with cpu": {
			config: `
name             = "okay"
resource_classes = { a = { cpu = 2, memory_mib = 8192 }, b = { cpu = 4, memory_mib = 8192 } }`,
			want: `Attribute resource_classes: resource class "b" \(cpu 4\) has memory_mib 8192`,
		},
		"zero cpu": {
			config: `
name             = "okay"
resource_classes = { a = { cpu = 0, memory_mib = 8192 } }`,
			want: `Attribute resource_classes: resource class "a": cpu and memory_mib must be positive, got cpu 0`,
		},
		"no classes": {
			config: `
name             = "okay"
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
name         = "okay"
idle_timeout = "7 minutes"`,
			want: `Attribute idle_timeout must be a duration such as .90s., .7m. or .1h30m., from 1m to 168h, got "7 minutes"`,
		},
		"duration too short": {
			config: `
name        = "okay"
max_runtime = "30s"`,
			want: `Attribute max_runtime must be a duration`,
		},
		"both launch template id and name": {
			config: `
name  = "okay"
fleet = {
  launch_template_id   = "lt-1"
  launch_template_name = "runners"
  subnet_ids           = ["subnet-1"]
}`,
			want: `(?s)Invalid Attribute Combination.*fleet.launch_template_id`,
		},
		"no launch template": {
			config: `
name  = "okay"
fleet = { subnet_ids = ["subnet-1"] }`,
			want: `(?s)Invalid Attribute Combination.*launch_template_id`,
		},
		"no subnets": {
			config: `
name  = "okay"
fleet = {
  launch_template_name = "runners"
  subnet_ids           = []
}`,
			want: `Attribute fleet.subnet_ids list must contain at least 1 elements`,
		},
		"unknown instance selection": {
			config: `
name  = "okay"
fleet = {
  launch_template_name = "runners"
  subnet_ids           = ["subnet-1"]
  instance_selection   = "cheapest"
}`,
			want: `Attribute fleet.instance_selection value must be one of: \["attribute-based"\s+"explicit"\]`,
		},
		"bad launch template version": {
			config: `
name  = "okay"
fleet = {
  launch_template_name    = "runners"
  launch_template_version = "latest"
  subnet_ids              = ["subnet-1"]
}`,
			want: `Attribute fleet.launch_template_version must be a version number, \$Default or\s+\$Latest`,
		},
		"bad GitHub owner": {
			config: `
name         = "okay"
github_owner = "-octo"`,
			want: `Attribute github_owner must be a GitHub user or organization name`,
		},
		"bad GitHub repository": {
			config: `
name              = "okay"
github_owner      = "octo"
github_repository = "octo/app"`,
			want: `Attribute github_repository must be a repository name`,
		},
		"empty name": {
			config: `name = ""`,
			want:   `Attribute name string length must be between 3 and 40, got: 0`,
		},
		"name with a slash": {
			config: `name = "ci/runners"`,
			want:   `Attribute name may contain only letters, digits, '_' and '-', got: ci/runners`,
		},
		"zero memory": {
			config: `
name             = "okay"
resource_classes = { a = { cpu = 2, memory_mib = 0 } }`,
			want: `Attribute resource_classes: resource class "a": cpu and memory_mib must be positive, got cpu 2, memory_mib 0`,
		},
		"negative cpu": {
			config: `
name             = "okay"
resource_classes = { a = { cpu = -2, memory_mib = 4096 } }`,
			want: `Attribute resource_classes: resource class "a": cpu and memory_mib must be positive, got cpu -2`,
		},
		"cpu beyond int32": {
			config: `
name             = "okay"
resource_classes = { a = { cpu = 4294967298, memory_mib = 4096 } }`,
			want: `Attribute resource_classes\["a"\].cpu value must be between 1 and 2147483647, got: 4294967298`,
		},
		"memory beyond int32": {
			config: `
name             = "okay"
resource_classes = { a = { cpu = 2, memory_mib = 2147483648 } }`,
			want: `Attribute resource_classes\["a"\].memory_mib value must be between 1 and 2147483647, got: 2147483648`,
		},
		"class without cpu": {
			config: `
name             = "okay"
resource_classes = { a = { memory_mib = 4096 } }`,
			want: `Inappropriate value for attribute "resource_classes": element "a": attribute "cpu" is required`,
		},
		"cpu not a number": {
			config: `
name             = "okay"
resource_classes = { a = { cpu = "two", memory_mib = 4096 } }`,
			want: `Inappropriate value for attribute "resource_classes": a number is required`,
		},
		"fractional cpu": {
			config: `
name             = "okay"
resource_classes = { a = { cpu = 1.5, memory_mib = 4096 } }`,
			want: `(?s)cpu = 1.5.*is not an integer`,
		},
		"empty class name": {
			config: `
name             = "okay"
resource_classes = { "" = { cpu = 2, memory_mib = 4096 } }`,
			want: `resource_classes.*may contain only letters, digits`,
		},
		"idle timeout too long": {
			config: `
name         = "okay"
idle_timeout = "200h"`,
			want: `Attribute idle_timeout must be a duration such as .90s., .7m. or .1h30m., from 1m to 168h, got "200h"`,
		},
		"negative max runtime": {
			config: `
name        = "okay"
max_runtime = "-5m"`,
			want: `Attribute max_runtime must be a duration such as .90s., .7m. or .1h30m., from 1m to 168h, got "-5m"`,
		},
		"max runtime without unit": {
			config: `
name        = "okay"
max_runtime = "30"`,
			want: `Attribute max_runtime must be a duration such as .90s., .7m. or .1h30m., from 1m to 168h, got "30"`,
		},
		"bad launch template id": {
			config: `
name  = "okay"
fleet = {
  launch_template_id = "runners"
  subnet_ids         = ["subnet-1"]
}`,
			want: `Attribute fleet.launch_template_id must be a launch template ID such as lt-0123456789abcdef0, got: runners`,
		},
		"bad launch template name": {
			config: `
name  = "okay"
fleet = {
  launch_template_name = "my runners"
  subnet_ids           = ["subnet-1"]
}`,
			want: `Attribute fleet.launch_template_name must be a launch template name: 3-128 letters, digits and \( \) . - / _, got: my runners`,
		},
		"bad subnet id": {
			config: `
name  = "okay"
fleet = {
  launch_template_name = "runners"
  subnet_ids           = ["subnet-1", "sn-2"]
}`,
			want: `Attribute fleet.subnet_ids\[1\] must be a subnet ID such as subnet-0a1b2c3d, got: sn-2`,
		},
		"duplicate subnets": {
			config: `
name  = "okay"
fleet = {
  launch_template_name = "runners"
  subnet_ids           = ["subnet-1", "subnet-1"]
}`,
			want: `Attribute fleet.subnet_ids lists "subnet-1" more than once; each value may appear only once`,
		},
		"empty launch template version": {
			config: `
name  = "okay"
fleet = {
  launch_template_name    = "runners"
  launch_template_version = ""
  subnet_ids              = ["subnet-1"]
}`,
			want: `Attribute fleet.launch_template_version must be a version number, \$Default or\s+\$Latest`,
		},
		"empty GitHub owner": {
			config: `
name         = "okay"
github_owner = ""`,
			want: `Attribute github_owner must be a GitHub user or organization name`,
		},
		"GitHub owner too long": {
			config: `
name         = "okay"
github_owner = "` + strings.Repeat("o", 40) + `"`,
			want: `Attribute github_owner must be a GitHub user or organization name: 1-39`,
		},
		"reserved tag key": {
			config: `
name = "okay"
tags = { "aws:team" = "ci" }`,
			want: `Attribute tags: tag key "aws:team" starts with aws:, which AWS reserves; tag keys must be 1-128 characters and values at most 256`,
		},
		"tag key with a bad character": {
			config: `
name = "okay"
tags = { "team!" = "ci" }`,
			want: `Attribute tags: tag key "team!" has a character AWS does not allow; tag keys must be 1-128 characters and values at most 256, of letters, digits, spaces and _ . : / = \+ - @`,
		},
		"tag key too long": {
			config: `
name = "okay"
tags = { "` + strings.Repeat("k", 129) + `" = "ci" }`,
			want: `Attribute tags: tag key "k+" is 129 characters long; tag keys must be 1-128 characters`,
		},
		"tag value too long": {
			config: `
name = "okay"
tags = { team = "` + strings.Repeat("v", 257) + `" }`,
			want: `Attribute tags: the value of tag "team" is 257 characters long; tag keys must be 1-128 characters and values at most 256`,
		},
		"null tag value": {
			config: `
name = "okay"
tags = { team = null }`,
			want: `Attribute tags: tag "team" has a null value`,
		},
		"force_destroy not a bool": {
			config: `
name          = "okay"
force_destroy = "maybe"`,
			want: `Inappropriate value for attribute "force_destroy": a bool is required`,
		},
		"bad create timeout": {
			config: `
name = "okay"
timeouts {
  create = "soon"
}`,
			want: `(?s)Invalid Attribute Value Time Duration.*create = "soon".*"soon" must be a string containing a sequence of decimal numbers, each with optional fraction and a unit suffix`,
		},
		"too many tags for a queue": {
			config: `
name = "okay"
tags = {` + manyTags(49) + `}`,
			want: `Attribute tags map must contain at most 48 elements, got: 49`,
		},
		"read-only table_name": {
			config: `
name       = "okay"
table_name = "other"`,
			want: `(?s)Invalid Configuration for Read-Only Attribute.*table_name`,
		},
		"credential parameter not a path": {
			config: `
name              = "okay"
github_owner      = "octo"
github_credential = { ssm_parameter = "ec2runners/okay/github" }`,
			want: `Attribute github_credential.ssm_parameter: "ec2runners/okay/github" may hold only letters, digits, '_', '.', '-' and '/', and a path`,
		},
		"credential secret with a space": {
			config: `
name              = "okay"
github_owner      = "octo"
github_credential = { secrets_manager_secret = "ec2runners okay" }`,
			want: `Attribute github_credential.secrets_manager_secret: "ec2runners okay" may hold only letters, digits and`,
		},
		"credential in two places": {
			config: `
name              = "okay"
github_owner      = "octo"
github_credential = { ssm_parameter = "/ec2runners/okay/github", secrets_manager_secret = "ec2runners/okay" }`,
			want: `(?s)2 attributes specified when one \(and only one\) of.*secrets_manager_secret`,
		},
		"credential in no place": {
			config: `
name              = "okay"
github_owner      = "octo"
github_credential = {}`,
			want: `(?s)No attribute specified when one \(and only one\) of.*secrets_manager_secret`,
		},
		"credential without a GitHub owner": {
			config: `
name              = "okay"
github_credential = { ssm_parameter = "/ec2runners/okay/github" }`,
			want: `(?s)Attribute "github_owner" must be specified when "github_credential" is\s+specified`,
		},
		"metrics log group with a colon": {
			config: `
name    = "okay"
metrics = { log_group = "ci:metrics" }`,
			want: `Attribute metrics.log_group: must be 1 to 512 letters, digits, '.', '-', '_', '/' and '#'`,
		},
		"metrics log group too long": {
			config: `
name    = "okay"
metrics = { log_group = "` + strings.Repeat("g", 513) + `" }`,
			want: `Attribute metrics.log_group: must be 1 to 512 letters`,
		},
		"metrics in AWS's namespace": {
			config: `
name    = "okay"
metrics = { log_group = "/ec2runners/okay", namespace = "AWS/EC2" }`,
			want: `Attribute metrics.namespace: must not start with AWS/, which AWS's own namespaces use`,
		},
		"metrics namespace too long": {
			config: `
name    = "okay"
metrics = { log_group = "/ec2runners/okay", namespace = "` + strings.Repeat("n", 256) + `" }`,
			want: `Attribute metrics.namespace: must be 1 to 255 characters`,
		},
		"metrics without a log group": {
			config: `
name    = "okay"
metrics = { namespace = "CI" }`,
			want: `Inappropriate value for attribute "metrics": attribute "log_group" is required`,
		},
		"repository without owner": {
			config: `
name              = "okay"
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

// TestAccPool_tagsWithDefaultTags: the pool's tags and the provider's
// default_tags come to at most 48, as each queue takes them and the
// provider's two and SQS recommends at most 50; Terraform says so when it plans.
func TestAccPool_tagsWithDefaultTags(t *testing.T) {
	var own strings.Builder
	for i := range 10 {
		fmt.Fprintf(&own, " own%02d = %q,", i, "v")
	}
	expectPlanError(t, `
provider "ec2runners" {
  default_tags {
    tags = {`+manyTags(40)+`}
  }
}

resource "ec2runners_pool" "test" {
  name = "okay"
  tags = {`+own.String()+`}
}`, `Attribute tags and the provider's default_tags come to 50 tags, and each queue of the pool takes them and the provider's ec2runners:pool and ec2runners:class: SQS recommends at most 50 tags a queue, so the pool's tags and the default tags may come to at most 48\.`)
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
