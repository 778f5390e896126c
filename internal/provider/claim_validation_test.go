package provider

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccClaim_invalidInput: bad arguments fail at plan time, naming the
// attribute and what is allowed.
func TestAccClaim_invalidInput(t *testing.T) {
	cases := map[string]struct{ args, want string }{
		"zero instances":           {`instance_count = 0`, `Attribute instance_count value must be between 1 and 100, got: 0`},
		"too many instances":       {`instance_count = 101`, `Attribute instance_count value must be between 1 and 100, got: 101`},
		"unknown usage class":      {`usage_class = "reserved"`, `Attribute usage_class value must be one of: \["on-demand" "spot"\]`},
		"bad run id":               {`run_id = "my run"`, `Attribute run_id: run id "my run" must be 1-100 characters of lower-case letters, digits`},
		"run id with capitals":     {`run_id = "Run-1"`, `Attribute run_id: run id "Run-1" must be lower case: GitHub matches labels case-insensitively, so "Run-1" and "run-1" would share one label.`},
		"bad type pattern":         {`allowed_instance_types = ["c6i large"]`, `allowed_instance_types\[0\] must be an instance type pattern`},
		"no type patterns":         {`allowed_instance_types = []`, `Attribute allowed_instance_types list must contain at least 1 elements`},
		"bad max runtime":          {`max_runtime = "forever"`, `Attribute max_runtime must be a duration`},
		"bad registration wait":    {`registration_wait = "0s"`, `Attribute registration_wait must be a duration such as .90s., .7m. or .1h30m., from 15s`},
		"repository without owner": {`repository = "app"`, `Attribute repository: repository "app" must be a GitHub repository's full name, owner/name`},
		"repository with a path":   {`repository = "octo/app/x"`, `Attribute repository: repository "octo/app/x" must be a GitHub repository's full name, owner/name`},

		"bad pool":                         {`pool = "my pool"`, `Attribute pool may contain only letters, digits, '_' and '-', got: my pool`},
		"empty pool":                       {`pool = ""`, `Attribute pool string length must be between 3 and 40, got: 0`},
		"pool name too long":               {`pool = "` + strings.Repeat("p", 41) + `"`, `Attribute pool string length must be between 3 and 40, got: 41`},
		"pool name too short for a table":  {`pool = "ci"`, `Attribute pool string length must be between 3 and 40, got: 2`},
		"negative instances":               {`instance_count = -1`, `Attribute instance_count value must be between 1 and 100, got: -1`},
		"instances not a number":           {`instance_count = "two"`, `Inappropriate value for attribute "instance_count": a number is required`},
		"fractional instances":             {`instance_count = 1.5`, `(?s)instance_count = 1.5.*is not an integer`},
		"bad resource class":               {`resource_class = "x large"`, `Attribute resource_class may contain only letters, digits and '_', not '-'`},
		"empty resource class":             {`resource_class = ""`, `Attribute resource_class may contain only letters, digits and '_', not '-': the class's queue is named <pool>-<class>`},
		"resource class with a dash":       {`resource_class = "gpu-big"`, `Attribute resource_class may contain only letters, digits and '_', not '-': the class's queue is named <pool>-<class>, so a '-' in a class would let two pools share a queue \(pool a-b's class c and pool a's class b-c are both a-b-c\), got: gpu-big`},
		"upper-case usage class":           {`usage_class = "SPOT"`, `Attribute usage_class value must be one of: \["on-demand" "spot"\], got: "SPOT"`},
		"empty run id":                     {`run_id = ""`, `Attribute run_id: run id "" must be 1-100 characters of lower-case letters, digits, '_', '.' and '-', starting with a letter or digit`},
		"run id too long":                  {`run_id = "` + strings.Repeat("r", 101) + `"`, `Attribute run_id: run id "r+" must be 1-100 characters of lower-case letters, digits`},
		"run id too long for its label":    {`run_id = "` + strings.Repeat("r", 87) + `"`, `Attribute run_id: run id "r+" is 87 characters long; a new claim's run id may have at most 86, as its runners' label adds '-' and a 13-character secret`},
		"empty runner group":               {`runner_group = ""`, `Attribute runner_group: runner group name must not be empty`},
		"runner group with blanks":         {`runner_group = " Trusted"`, `Attribute runner_group: runner group name " Trusted" must not begin or end with blanks`},
		"runner group too long":            {`runner_group = "` + strings.Repeat("g", 256) + `"`, `Attribute runner_group: runner group name "g+" is 256 characters long; at most 255`},
		"run id starting with a dot":       {`run_id = ".run-1"`, `Attribute run_id: run id ".run-1" must be 1-100 characters of lower-case letters, digits, '_', '.' and '-', starting with a letter or digit`},
		"run id with a slash":              {`run_id = "pool/run"`, `Attribute run_id: run id "pool/run" must be 1-100 characters of lower-case letters`},
		"run id in capitals":               {`run_id = "RUN"`, `Attribute run_id: run id "RUN" must be lower case`},
		"empty type pattern":               {`allowed_instance_types = ["c*", ""]`, `Attribute allowed_instance_types\[1\] must be an instance type pattern of letters, digits, '.', '-' and '\*'`},
		"regexp type pattern":              {`allowed_instance_types = ["c6i.(large|xlarge)"]`, `Attribute allowed_instance_types\[0\] must be an instance type pattern of letters, digits, '.', '-' and '\*', got: c6i.\(large\|xlarge\)`},
		"type patterns not a list":         {`allowed_instance_types = "c*"`, `Inappropriate value for attribute "allowed_instance_types": list of string required`},
		"max runtime too long":             {`max_runtime = "200h"`, `Attribute max_runtime must be a duration such as .90s., .7m. or .1h30m., from 1m to 168h, got "200h"`},
		"max runtime too short":            {`max_runtime = "59s"`, `Attribute max_runtime must be a duration such as .90s., .7m. or .1h30m., from 1m to 168h, got "59s"`},
		"fleet_fallback not a bool":        {`fleet_fallback = "sometimes"`, `Inappropriate value for attribute "fleet_fallback": a bool is required`},
		"heartbeat max age too long":       {`heartbeat_max_age = "11m"`, `Attribute heartbeat_max_age must be a duration such as .90s., .7m. or .1h30m., from 15s to 10m, got "11m"`},
		"heartbeat max age too short":      {`heartbeat_max_age = "2s"`, `Attribute heartbeat_max_age must be a duration such as .90s., .7m. or .1h30m., from 15s to 10m, got "2s"`},
		"registration wait too short":      {`registration_wait = "14s"`, `Attribute registration_wait must be a duration such as .90s., .7m. or .1h30m., from 15s to 1m, got "14s"`},
		"heartbeat max age not a duration": {`heartbeat_max_age = "15"`, `Attribute heartbeat_max_age must be a duration such as .90s., .7m. or .1h30m., from 15s to 10m, got "15"`},
		"registration wait too long":       {`registration_wait = "2m"`, `Attribute registration_wait must be a duration such as .90s., .7m. or .1h30m., from 15s to 1m, got "2m"`},
		"fleet validation wait too long":   {`fleet_validation_wait = "5m"`, `Attribute fleet_validation_wait must be a duration such as .90s., .7m. or .1h30m., from 1s to 4m, got "5m"`},
		"fleet validation wait zero":       {`fleet_validation_wait = "0s"`, `Attribute fleet_validation_wait must be a duration such as .90s., .7m. or .1h30m., from 1s to 4m, got "0s"`},
		"negative release wait":            {`release_wait = "-1s"`, `Attribute release_wait must be a duration such as .90s., .7m. or .1h30m., from 1s to 10m, got "-1s"`},
		"release wait too long":            {`release_wait = "1h"`, `Attribute release_wait must be a duration such as .90s., .7m. or .1h30m., from 1s to 10m, got "1h"`},
		"bad delete timeout": {"timeouts {\n    delete = \"later\"\n  }",
			`(?s)Invalid Attribute Value Time Duration.*delete = "later".*"later" must be a string containing a sequence of decimal numbers, each with optional fraction and a unit suffix`},
		"read-only label":       {`label = "run-1"`, `(?s)Invalid Configuration for Read-Only Attribute.*label = "run-1"`},
		"unknown spot fallback": {"usage_class = \"spot\"\n  spot_fallback = \"spot\"", `Attribute spot_fallback value must be one of: \["on-demand" "none"\], got: "spot"`},
		"spot fallback of an on-demand claim": {`spot_fallback = "none"`,
			`Attribute spot_fallback applies only to claims with usage_class = "spot"; this claim's usage_class is "on-demand". Remove spot_fallback \(or set it to null\).`},
		"spot fallback of an explicit on-demand claim": {"usage_class = \"on-demand\"\n  spot_fallback = \"on-demand\"",
			`Attribute spot_fallback applies only to claims with usage_class = "spot"; this claim's usage_class is "on-demand"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			body := tc.args
			if !strings.HasPrefix(body, "pool ") {
				body = "pool = \"ok\"\n  " + body
			}
			expectPlanError(t, "resource \"ec2runners_claim\" \"test\" {\n  "+body+"\n}", tc.want)
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
