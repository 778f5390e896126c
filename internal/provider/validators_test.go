package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// TestPatternValidation checks the plain patterns against real and
// almost-real values, without Terraform.
func TestPatternValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		check func(string) bool
		good  []string
		bad   []string
	}{
		"region": {protocol.RegionPattern.MatchString,
			[]string{"us-east-1", "eu-west-1", "ap-southeast-2", "us-gov-west-1", "cn-north-1", "il-central-1", "eu-isoe-west-1"},
			[]string{"", "Mars", "EU-WEST-1", "eu-west", "eu-west-1a", "euwest1", " eu-west-1", "eu-west-1\n", "eu_west_1"}},
		"role ARN": {roleARNPattern.MatchString,
			[]string{"arn:aws:iam::123456789012:role/ci", "arn:aws-us-gov:iam::123456789012:role/path/to/ci-role", "arn:aws-cn:iam::123456789012:role/a+b=c,d.e@f_g-h"},
			[]string{"", "ci", "arn:aws:iam::123456789012:user/ci", "arn:aws:iam::12345:role/ci", "arn:aws:sts::123456789012:assumed-role/ci/s", "arn:aws:iam::123456789012:role/", "arn:aws:iam::123456789012:role/a b"}},
		"session name": {sessionNamePattern.MatchString,
			[]string{"ci", "terraform-ec2runners", "a+b=c,d.e@f_g-h", strings.Repeat("s", 64)},
			[]string{"", "s", "my session", "a/b", strings.Repeat("s", 65)}},
		"external id": {externalIDPattern.MatchString,
			[]string{"", "ab", "a:b/c+d=e,f.g@h_i-j"},
			[]string{"a b", "a#b", "ä"}},
		"launch template id": {launchTemplateIDPattern.MatchString,
			[]string{"lt-0123456789abcdef0", "lt-1"},
			[]string{"", "lt-", "lt-XYZ", "runners", "LT-0123"}},
		"launch template name": {launchTemplateNamePattern.MatchString,
			[]string{"runners", "github-runner_v2", "team/(ci).runner", strings.Repeat("n", 128)},
			[]string{"", "ab", "my runners", "runner:1", strings.Repeat("n", 129)}},
		"subnet id": {subnetIDPattern.MatchString,
			[]string{"subnet-0a1b2c3d", "subnet-0123456789abcdef0", "subnet-1"},
			[]string{"", "subnet-", "sn-1", "subnet-XYZ", "subnet-1 "}},
		"tag characters": {tagCharPattern.MatchString,
			[]string{"", "team", "Cost Center", "a_b.c:d/e=f+g-h@i", "Größe", "東京", "v1"},
			[]string{"a!", "a;b", "a#b", "a,b", "a\tb", "a\nb", "<x>"}},
	} {
		t.Run(name, func(t *testing.T) {
			for _, s := range tc.good {
				if !tc.check(s) {
					t.Errorf("%q refused", s)
				}
			}
			for _, s := range tc.bad {
				if tc.check(s) {
					t.Errorf("%q accepted", s)
				}
			}
		})
	}
}

func TestTagsValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		tags map[string]attr.Value
		want string // substring of the error; "" means valid
	}{
		"valid":                         {map[string]attr.Value{"team": types.StringValue("ci"), "Cost Center": types.StringValue("4711"), "empty": types.StringValue("")}, ""},
		"unknown value":                 {map[string]attr.Value{"team": types.StringUnknown()}, ""},
		"128-character key":             {map[string]attr.Value{strings.Repeat("k", 128): types.StringValue("v")}, ""},
		"256-character value":           {map[string]attr.Value{"k": types.StringValue(strings.Repeat("v", 256))}, ""},
		"multi-byte value at the limit": {map[string]attr.Value{"k": types.StringValue(strings.Repeat("é", 256))}, ""},
		"empty key":                     {map[string]attr.Value{"": types.StringValue("v")}, `tag key "" is 0 characters long`},
		"129-character key":             {map[string]attr.Value{strings.Repeat("k", 129): types.StringValue("v")}, "is 129 characters long"},
		"257-character value":           {map[string]attr.Value{"k": types.StringValue(strings.Repeat("v", 257))}, `the value of tag "k" is 257 characters long`},
		"aws: prefix":                   {map[string]attr.Value{"aws:cloudformation:stack": types.StringValue("v")}, "starts with aws:"},
		"AWS: prefix":                   {map[string]attr.Value{"AWS:x": types.StringValue("v")}, "starts with aws:"},
		"bad key character":             {map[string]attr.Value{"team!": types.StringValue("v")}, `tag key "team!" has a character`},
		"bad value character":           {map[string]attr.Value{"team": types.StringValue("a;b")}, `the value of tag "team" has a character`},
		"null value":                    {map[string]attr.Value{"team": types.StringNull()}, `tag "team" has a null value`},
		"queue owner: pool":             {map[string]attr.Value{"ec2runners:pool": types.StringValue("other")}, `tag key "ec2runners:pool" is the provider's`},
		"queue owner: class":            {map[string]attr.Value{"ec2runners:class": types.StringValue("large")}, `tag key "ec2runners:class" is the provider's`},
		"other ec2runners: key":         {map[string]attr.Value{"ec2runners:team": types.StringValue("ci")}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			req := validator.MapRequest{Path: path.Root("tags"), ConfigValue: types.MapValueMust(types.StringType, tc.tags)}
			var resp validator.MapResponse
			tagsValidator{}.ValidateMap(context.Background(), req, &resp)
			if tc.want == "" {
				if resp.Diagnostics.HasError() {
					t.Fatalf("refused: %v", resp.Diagnostics)
				}
				return
			}
			if !resp.Diagnostics.HasError() {
				t.Fatal("accepted")
			}
			detail := resp.Diagnostics.Errors()[0].Detail()
			if !strings.Contains(detail, tc.want) || !strings.HasPrefix(detail, "Attribute tags: ") || !strings.Contains(detail, "keys must not start with aws:") {
				t.Errorf("error %q should name the attribute, say %q and give the rules", detail, tc.want)
			}
		})
	}
	var resp validator.MapResponse
	tagsValidator{}.ValidateMap(context.Background(), validator.MapRequest{Path: path.Root("tags"), ConfigValue: types.MapNull(types.StringType)}, &resp)
	tagsValidator{}.ValidateMap(context.Background(), validator.MapRequest{Path: path.Root("tags"), ConfigValue: types.MapUnknown(types.StringType)}, &resp)
	if resp.Diagnostics.HasError() {
		t.Errorf("null or unknown tags refused: %v", resp.Diagnostics)
	}
}

func TestUniqueStringsValidation(t *testing.T) {
	list := func(vs ...attr.Value) types.List { return types.ListValueMust(types.StringType, vs) }
	s := types.StringValue
	for name, tc := range map[string]struct {
		list types.List
		want string
	}{
		"unique":           {list(s("subnet-1"), s("subnet-2")), ""},
		"empty":            {list(), ""},
		"null":             {types.ListNull(types.StringType), ""},
		"unknown":          {types.ListUnknown(types.StringType), ""},
		"unknown elements": {list(types.StringUnknown(), types.StringUnknown()), ""},
		"duplicate":        {list(s("subnet-1"), s("subnet-2"), s("subnet-1")), `Attribute fleet.subnet_ids lists "subnet-1" more than once`},
		"case matters":     {list(s("subnet-a"), s("subnet-A")), ""},
	} {
		t.Run(name, func(t *testing.T) {
			var resp validator.ListResponse
			uniqueStrings{}.ValidateList(context.Background(), validator.ListRequest{Path: path.Root("fleet").AtName("subnet_ids"), ConfigValue: tc.list}, &resp)
			switch {
			case tc.want == "" && resp.Diagnostics.HasError():
				t.Errorf("refused: %v", resp.Diagnostics)
			case tc.want != "" && (!resp.Diagnostics.HasError() || !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), tc.want)):
				t.Errorf("diagnostics %v, want %q", resp.Diagnostics, tc.want)
			}
		})
	}
}

// TestRuleValidators: plan-time checks that apply the packages' own rules
// name the attribute and say what is allowed.
func TestRuleValidators(t *testing.T) {
	for name, tc := range map[string]struct {
		v     validator.String
		value types.String
		want  string // substring of the error; "" means valid
	}{
		"run id":               {runIDValidator(), types.StringValue("run-1"), ""},
		"run id in capitals":   {runIDValidator(), types.StringValue("Run-1"), `Attribute x: run id "Run-1" must be lower case: GitHub matches labels case-insensitively, so "Run-1" and "run-1" would share one label.`},
		"run id with a space":  {runIDValidator(), types.StringValue("run 1"), `Attribute x: run id "run 1" must be 1-100 characters of lower-case letters`},
		"unknown run id":       {runIDValidator(), types.StringUnknown(), ""},
		"null run id":          {runIDValidator(), types.StringNull(), ""},
		"https URL":            {secureURLValidator(), types.StringValue("https://ghe.example.com/api/v3"), ""},
		"loopback http URL":    {secureURLValidator(), types.StringValue("http://127.0.0.1:8080"), ""},
		"IPv6 loopback URL":    {secureURLValidator(), types.StringValue("http://[::1]:8080"), ""},
		"localhost URL":        {secureURLValidator(), types.StringValue("http://localhost:8080"), ""},
		"plain http URL":       {secureURLValidator(), types.StringValue("http://ghe.example.com"), `Attribute x: "http://ghe.example.com" uses plain http:// to a host that is not loopback`},
		"not a URL":            {secureURLValidator(), types.StringValue("ghe.example.com"), `Attribute x: "ghe.example.com" is not a URL`},
		"class name":           {classNameValidator(), types.StringValue("gpu_big"), ""},
		"class name with dash": {classNameValidator(), types.StringValue("gpu-big"), "not '-'"},
	} {
		t.Run(name, func(t *testing.T) {
			var resp validator.StringResponse
			tc.v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("x"), ConfigValue: tc.value}, &resp)
			switch {
			case tc.want == "" && resp.Diagnostics.HasError():
				t.Errorf("refused: %v", resp.Diagnostics)
			case tc.want != "" && (!resp.Diagnostics.HasError() || !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), tc.want)):
				t.Errorf("diagnostics %v, want %q", resp.Diagnostics, tc.want)
			}
		})
	}
}
