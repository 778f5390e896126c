package awslimits

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"
)

// EC2's limits (query protocol: parameters as the form names them).
const (
	// MaxUserDataBytes is an instance's user data, in raw form before
	// base64: 16 KB. Base64 makes that at most 21848 characters.
	MaxUserDataBytes = 16 * 1024
	// MaxTagsPerResource is the most tags a resource takes, across EC2,
	// SQS and DynamoDB alike.
	MaxTagsPerResource = 50
	// MaxTagKeyLength and MaxTagValueLength bound a tag, in Unicode
	// characters, across EC2, SQS and DynamoDB alike.
	MaxTagKeyLength   = 128
	MaxTagValueLength = 256
	// MaxClientTokenLength bounds an idempotency token of RunInstances
	// and CreateFleet, MaxLaunchTemplateClientTokenLength one of the
	// launch template calls: ASCII characters.
	MaxClientTokenLength               = 64
	MaxLaunchTemplateClientTokenLength = 128
	// MaxFilterValues is the most filter values one Describe call takes,
	// across all its filters; MaxFilterValueLength bounds one value.
	MaxFilterValues      = 200
	MaxFilterValueLength = 255
	// MaxTerminateInstanceIDs is the most instance ids TerminateInstances
	// takes.
	MaxTerminateInstanceIDs = 1000
)

// The answers of EC2 past MaxUserDataBytes and to user data that is not
// base64: RunInstances ends them without a period, the launch template
// actions with one.
var (
	userDataTooLong   = fmt.Sprintf("User data is limited to %d bytes", MaxUserDataBytes)
	userDataNotBase64 = "Invalid BASE64 encoding of user data"
)

// describeActions are the Describe calls the code and the test fixtures
// make.
var describeActions = []string{"DescribeInstances", "DescribeInstanceTypes", "DescribeImages",
	"DescribeLaunchTemplates", "DescribeLaunchTemplateVersions", "DescribeSubnets", "DescribeVpcs"}

const ec2Errors = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html (the codes)"

var ec2Rules = []Rule{
	{
		ID: "ec2-user-data", Service: "ec2", Actions: []string{"RunInstances"},
		Limit:   "User data is at most 16384 bytes before base64, and base64.",
		Check:   userData("UserData", "InvalidParameterValue", ""),
		Wording: Reported,
		Source: "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html (\"User data is limited to 16 KB, in raw form, before it is base64-encoded\"); " +
			"the answer: https://github.com/deckhouse/deckhouse/issues/5949, https://github.com/FINRAOS/herd/issues/393, " +
			"https://github.com/hashicorp/packer/issues/2616 (not base64). Not a rule here: \"Member must have length less than or equal to 21847\" " +
			"is Auto Scaling's CreateLaunchConfiguration, not EC2 (https://github.com/kubicorn/kubicorn/issues/667).",
	},
	{
		// CreateLaunchTemplate validates LaunchTemplateData as
		// CreateLaunchTemplateVersion does: both answer invalid base64
		// with InvalidUserData.Malformed; the too-long answer is reported
		// for CreateLaunchTemplateVersion.
		ID: "ec2-launch-template-user-data", Service: "ec2", Actions: []string{"CreateLaunchTemplate", "CreateLaunchTemplateVersion"},
		Limit:   "A launch template's user data is at most 16384 bytes before base64, and base64.",
		Check:   userData("LaunchTemplateData.UserData", "InvalidUserData.Malformed", "."),
		Wording: Reported,
		Source: "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RequestLaunchTemplateData.html; the answer: " +
			"https://github.com/github-aws-runners/terraform-aws-github-runner/issues/3700, https://github.com/hashicorp/terraform-provider-aws/pull/49234, " +
			"https://github.com/awslabs/ec2-spot-workshops/issues/15, https://github.com/pulumi/pulumi-aws/issues/2284",
	},
	{
		ID: "ec2-tags-per-resource", Service: "ec2", Actions: []string{"CreateFleet", "RunInstances", "CreateLaunchTemplate", "CreateTags"},
		Limit: "A resource takes at most 50 tags (each tag specification, or a CreateTags call).",
		Check: func(action string, req map[string]any) *Refusal {
			for _, tags := range ec2TagLists(action, req) {
				if len(tags) > MaxTagsPerResource {
					return ec2Error("TagLimitExceeded", fmt.Sprintf("The maximum number of tags for a resource is %d; the request gives one %d (the test front's wording).", MaxTagsPerResource, len(tags)))
				}
			}
			return nil
		},
		Wording: Ours,
		Source:  "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions (50 per resource); TagLimitExceeded: " + ec2Errors,
	},
	{
		ID: "ec2-tag-length", Service: "ec2", Actions: []string{"CreateFleet", "RunInstances", "CreateLaunchTemplate", "CreateTags"},
		Limit: "A tag key is 1 to 128 characters, a value at most 256.",
		Check: func(action string, req map[string]any) *Refusal {
			for _, tags := range ec2TagLists(action, req) {
				for _, tag := range tags {
					key, _ := str(field(tag, "Key"))
					value, _ := str(field(tag, "Value"))
					switch {
					case key == "":
						return ec2Error("InvalidParameterValue", "Tag keys must not be empty (the test front's wording).")
					case utf8.RuneCountInString(key) > MaxTagKeyLength:
						return ec2Error("InvalidParameterValue", fmt.Sprintf("Tag key exceeds the maximum length of %d characters", MaxTagKeyLength))
					case utf8.RuneCountInString(value) > MaxTagValueLength:
						return ec2Error("InvalidParameterValue", fmt.Sprintf("Tag value exceeds the maximum length of %d characters", MaxTagValueLength))
					}
				}
			}
			return nil
		},
		Wording: Ours,
		Source: "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions; the value's message as " +
			"https://github.com/iriusrisk/GoCD-EC2-Elastic-Agent-Plugin/issues/24 quotes it (truncated), the key's written alike",
	},
	{
		ID: "ec2-tag-aws-prefix", Service: "ec2", Actions: []string{"CreateFleet", "RunInstances", "CreateLaunchTemplate", "CreateTags"},
		Limit: "Tag keys starting with aws: (any case) are AWS's.",
		Check: func(action string, req map[string]any) *Refusal {
			for _, tags := range ec2TagLists(action, req) {
				for _, tag := range tags {
					key, _ := str(field(tag, "Key"))
					if !reservedTagKey(key) {
						continue
					}
					switch action {
					case "CreateTags":
						return ec2Error("InvalidParameterValue", "Value ( "+key+" ) for parameter key is invalid. Tag keys starting with 'aws:' are reserved for internal use")
					case "CreateLaunchTemplate":
						return ec2Error("InvalidTagKey.Malformed", "The tag key '"+key+"' is not valid. Tag keys starting with 'aws:' are reserved for internal use.")
					}
					return ec2Error("InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use")
				}
			}
			return nil
		},
		Wording: Reported,
		Source: "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions; the answers: RunInstances " +
			"https://github.com/jcjorel/ec2-spot-converter/issues/13 (CreateFleet answers alike, by analogy), CreateTags " +
			"https://github.com/AndrewFarley/AWS-Automated-Daily-Instance-AMI-Snapshots/issues/7, launch templates " +
			"https://github.com/buildkite/elastic-ci-stack-for-aws/issues/856",
	},
	{
		ID: "ec2-fleet-tag-resource-types", Service: "ec2", Actions: []string{"CreateFleet"},
		Limit: "An instant fleet's tag specifications tag the fleet or its instances only; other fleets, the fleet only.",
		Check: func(_ string, req map[string]any) *Refusal {
			typ, _ := str(field(req, "Type"))
			allowed := map[string]bool{"fleet": true}
			if typ == "instant" {
				allowed["instance"] = true
			}
			for _, spec := range list(req, "TagSpecification") {
				rt, _ := str(field(spec, "ResourceType"))
				if !allowed[rt] {
					return ec2Error("InvalidParameterValue", fmt.Sprintf("A fleet of type %s cannot tag resource type %q at launch (the test front's wording).", typ, rt))
				}
			}
			return nil
		},
		Wording: Ours,
		Source:  "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFleet.html (TagSpecifications); " + ec2Errors,
	},
	{
		ID: "ec2-client-token", Service: "ec2", Actions: []string{"CreateFleet", "RunInstances", "CreateLaunchTemplate", "CreateLaunchTemplateVersion"},
		Limit: "A ClientToken is ASCII: at most 64 characters for RunInstances and CreateFleet, 128 for the launch template calls.",
		Check: func(action string, req map[string]any) *Refusal {
			tok, ok := str(field(req, "ClientToken"))
			if !ok {
				return nil
			}
			limit := MaxClientTokenLength
			if action == "CreateLaunchTemplate" || action == "CreateLaunchTemplateVersion" {
				limit = MaxLaunchTemplateClientTokenLength
			}
			ascii := !strings.ContainsFunc(tok, func(r rune) bool { return r > 127 })
			if len(tok) > limit || !ascii {
				return ec2Error("InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter clientToken is invalid: at most %d ASCII characters (the test front's wording).", tok, limit))
			}
			return nil
		},
		Wording: Ours,
		Source: "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/Run_Instance_Idempotency.html (\"up to 64 ASCII characters\"), " +
			"https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateLaunchTemplate.html and API_CreateLaunchTemplateVersion.html " +
			"(ClientToken: \"Constraint: Maximum 128 ASCII characters.\"); " + ec2Errors,
	},
	{
		ID: "ec2-filter-values", Service: "ec2", Actions: describeActions,
		Limit: "A Describe call takes at most 200 filter values in all, each at most 255 characters.",
		Check: func(_ string, req map[string]any) *Refusal {
			n := 0
			for _, f := range list(req, "Filter") {
				for _, v := range list(f, "Value") {
					n++
					if s, _ := str(v); utf8.RuneCountInString(s) > MaxFilterValueLength {
						return ec2Error("FilterLimitExceeded", fmt.Sprintf("The maximum length for a filter value is %d characters", MaxFilterValueLength))
					}
				}
			}
			if n > MaxFilterValues {
				return ec2Error("FilterLimitExceeded", fmt.Sprintf("The maximum number of filter values specified on a single call is %d", MaxFilterValues))
			}
			return nil
		},
		Wording: Reported,
		Source: "the answers: https://github.com/gjbae1212/gossm/issues/47, https://github.com/apache/druid/pull/1954 (200 values), " +
			"https://github.com/ansible-collections/amazon.aws/issues/2393 (255 characters); FilterLimitExceeded: " + ec2Errors,
	},
	{
		ID: "ec2-describe-page-size", Service: "ec2", Actions: []string{"DescribeInstances", "DescribeInstanceTypes", "DescribeLaunchTemplates", "DescribeLaunchTemplateVersions"},
		Limit: "MaxResults: DescribeInstances 5 to 1000 and never with InstanceIds, DescribeInstanceTypes 5 to 100, the launch template calls 1 to 200.",
		Check: func(action string, req map[string]any) *Refusal {
			v := field(req, "MaxResults")
			if v == nil {
				return nil
			}
			if action == "DescribeInstances" && list(req, "InstanceId") != nil {
				return ec2Error("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
			}
			n, _ := integer(v)
			lo, hi := pageSizes[action][0], pageSizes[action][1]
			switch {
			case n < lo:
				return ec2Error("InvalidParameterValue", fmt.Sprintf("Value ( %d ) for parameter maxResults is invalid. Expecting a value greater than %d.", n, lo))
			case n > hi:
				return ec2Error("InvalidParameterValue", fmt.Sprintf("Value ( %d ) for parameter maxResults is invalid. Expecting a value less than %d.", n, hi))
			}
			return nil
		},
		Wording: Reported,
		Source: "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/Query-Requests.html#api-pagination and each action's reference (the ranges); " +
			"the answers: https://github.com/getmoto/moto/issues/6282 and https://github.com/aws/aws-cli/issues/1976 (with instance ids), " +
			"https://github.com/aws/aws-sdk-ruby/pull/2575 (below the minimum; above the maximum written alike)",
	},
	{
		ID: "ec2-terminate-ids", Service: "ec2", Actions: []string{"TerminateInstances"},
		Limit: "TerminateInstances takes at most 1000 instance ids.",
		Check: func(_ string, req map[string]any) *Refusal {
			if n := len(list(req, "InstanceId")); n > MaxTerminateInstanceIDs {
				return ec2Error("InvalidParameterValue", fmt.Sprintf("TerminateInstances takes up to %d instance IDs; the request names %d (the test front's wording).", MaxTerminateInstanceIDs, n))
			}
			return nil
		},
		Wording: Ours,
		Source:  "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_TerminateInstances.html (\"Constraints: Up to 1000 instance IDs\"); " + ec2Errors,
	},
}

// pageSizes are the MaxResults each Describe call takes.
var pageSizes = map[string][2]int64{
	"DescribeInstances": {5, 1000}, "DescribeInstanceTypes": {5, 100},
	"DescribeLaunchTemplates": {1, 200}, "DescribeLaunchTemplateVersions": {1, 200},
}

// userData checks base64 user data in param as EC2 does: text that is not
// base64 is refused, and so is more than MaxUserDataBytes once decoded;
// code and the messages' end (end: "" or ".") are the action's.
func userData(param, code, end string) func(string, map[string]any) *Refusal {
	return func(_ string, req map[string]any) *Refusal {
		var v any = req
		for _, name := range strings.Split(param, ".") {
			v = field(v, name)
		}
		value, ok := str(v)
		if !ok {
			return nil
		}
		raw, err := base64.StdEncoding.DecodeString(value)
		switch {
		case err != nil:
			return ec2Error(code, userDataNotBase64+end)
		case len(raw) > MaxUserDataBytes:
			return ec2Error(code, userDataTooLong+end)
		}
		return nil
	}
}

// ec2TagLists are the tag lists of a request: one per tag specification,
// or CreateTags' own.
func ec2TagLists(action string, req map[string]any) [][]any {
	if action == "CreateTags" {
		return [][]any{list(req, "Tag")}
	}
	var out [][]any
	for _, spec := range list(req, "TagSpecification") {
		out = append(out, list(spec, "Tag"))
	}
	return out
}

// reservedTagKey: keys starting with aws:, in any case, are AWS's.
func reservedTagKey(key string) bool {
	return len(key) >= 4 && strings.EqualFold(key[:4], "aws:")
}
