package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// urlPattern is the AWS endpoints' rule; URLs that GitHub tokens or the
// runner travel over follow github.CheckURL (secureURLValidator).
var urlPattern = regexp.MustCompile(`^https?://\S+$`)

// namePattern is the character set of pool and resource class names.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// poolNameValidators check a pool name wherever one is given.
func poolNameValidators() []validator.String {
	return []validator.String{
		stringvalidator.LengthBetween(protocol.MinPoolNameLength, protocol.MaxPoolNameLength),
		stringvalidator.RegexMatches(namePattern, "may contain only letters, digits, '_' and '-'"),
	}
}

// ruleValidator applies a rule of the packages beneath the provider at plan
// time, so that Terraform refuses what they would, in their words.
type ruleValidator struct {
	summary     string
	description string
	check       func(string) error
}

func (v ruleValidator) Description(context.Context) string { return v.description }

func (v ruleValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v ruleValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := v.check(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, v.summary, fmt.Sprintf("Attribute %s: %s.", req.Path, err))
	}
}

// runIDValidator: a claim's run id begins its runners' only GitHub label,
// which must leave room for the label's secret.
func runIDValidator() validator.String {
	return ruleValidator{summary: "Invalid run id", description: "must be " + protocol.RunIDRule + fmt.Sprintf(", at most %d for a new claim", protocol.MaxNewRunIDLength),
		check: protocol.ValidateNewRunID}
}

// repositoryValidator: a GitHub repository's full name, owner/name.
func repositoryValidator() validator.String {
	return ruleValidator{summary: "Invalid repository", description: "must be a GitHub repository's full name, owner/name",
		check: func(s string) error { _, _, err := protocol.ParseRepository(s); return err }}
}

// runnerGroupValidator: the name of an organization's runner group.
func runnerGroupValidator() validator.String {
	return ruleValidator{summary: "Invalid runner group", description: "must name a runner group: " + protocol.RunnerGroupRule, check: protocol.ValidateRunnerGroup}
}

// secureURLValidator: for the URLs that GitHub tokens, registration tokens
// or the runner travel over.
func secureURLValidator() validator.String {
	return ruleValidator{summary: "Invalid URL", description: "must be a URL; " + github.URLRule, check: github.CheckURL}
}

// runnerVersionValidator: a runner release GitHub lets register.
func runnerVersionValidator() validator.String {
	return ruleValidator{summary: "Invalid runner version", description: "must be a release of actions/runner, " + protocol.MinimumRunnerVersion + " or later (GitHub registers no older runner)",
		check: func(v string) error {
			if err := protocol.ValidateRunnerVersion(v); err != nil {
				return err
			}
			if protocol.CompareRunnerVersions(v, protocol.MinimumRunnerVersion) < 0 {
				return fmt.Errorf("%s is older than %s, the oldest runner GitHub lets register", v, protocol.MinimumRunnerVersion)
			}
			return nil
		}}
}

// logGroupNameValidator: a CloudWatch Logs log group's name.
func logGroupNameValidator() validator.String {
	return ruleValidator{summary: "Invalid log group name", description: "must be 1 to 512 letters, digits, `.`, `-`, `_`, `/` and `#`", check: protocol.ValidateLogGroupName}
}

// metricsNamespaceValidator: a CloudWatch namespace of custom metrics.
func metricsNamespaceValidator() validator.String {
	return ruleValidator{summary: "Invalid CloudWatch namespace", description: "must be 1 to 255 printable ASCII characters, not starting with `:` nor `AWS/`", check: protocol.ValidateMetricsNamespace}
}

// parameterNameValidator and secretIDValidator: where a pool's GitHub
// credential may live.
func parameterNameValidator() validator.String {
	return ruleValidator{summary: "Invalid SSM parameter name", description: "must be a parameter's name or ARN", check: problemCheck(awslimits.ParameterNameProblem)}
}

func secretIDValidator() validator.String {
	return ruleValidator{summary: "Invalid Secrets Manager secret", description: "must be a secret's name or ARN", check: problemCheck(awslimits.SecretIDProblem)}
}

// problemCheck turns an awslimits problem ("is empty") into a check.
func problemCheck(problem func(string) string) func(string) error {
	return func(v string) error {
		if p := problem(v); p != "" {
			return fmt.Errorf("%q %s", v, p)
		}
		return nil
	}
}

// classNameValidator: resource class names have no '-' (protocol.ClassNameRule).
func classNameValidator() validator.String {
	return stringvalidator.RegexMatches(protocol.ClassNamePattern, protocol.ClassNameRule)
}

// durationValidator accepts Go duration text within [min, max]: the check
// of every configurable duration attribute, its format included (see
// duration).
type durationValidator struct{ min, max time.Duration }

func durationBetween(min, max time.Duration) validator.String { return durationValidator{min, max} }

func (v durationValidator) Description(context.Context) string {
	return fmt.Sprintf("must be a duration such as `90s`, `7m` or `1h30m`, from %s to %s", protocol.FormatDuration(v.min), protocol.FormatDuration(v.max))
}

func (v durationValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v durationValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	d, problems := timetypes.GoDuration{StringValue: req.ConfigValue}.ValueGoDuration()
	if problems.HasError() || d < v.min || d > v.max {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration",
			fmt.Sprintf("Attribute %s %s, got %q.", req.Path, v.Description(ctx), req.ConfigValue.ValueString()))
	}
}

// resourceClassesValidator checks the classes as a whole: unique cpu,
// memory strictly increasing with cpu.
type resourceClassesValidator struct{}

func (resourceClassesValidator) Description(context.Context) string {
	return "cpu values must be positive and unique, and memory_mib must strictly increase with cpu"
}

func (v resourceClassesValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (resourceClassesValidator) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	var classes map[string]resourceClassModel
	if diags := req.ConfigValue.ElementsAs(ctx, &classes, false); diags.HasError() {
		return // unknown members: validated once known
	}
	converted := map[string]protocol.ResourceClass{}
	for name, c := range classes {
		if c.CPU.IsUnknown() || c.MemoryMiB.IsUnknown() {
			return
		}
		converted[name] = c.toProtocol()
	}
	if err := protocol.ValidateResourceClasses(converted); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid resource classes", fmt.Sprintf("Attribute %s: %s.", req.Path, err))
	}
}

type resourceClassModel struct {
	CPU       types.Int64 `tfsdk:"cpu"`
	MemoryMiB types.Int64 `tfsdk:"memory_mib"`
}

func (c resourceClassModel) toProtocol() protocol.ResourceClass {
	return protocol.ResourceClass{CPU: int(c.CPU.ValueInt64()), MemoryMiB: int(c.MemoryMiB.ValueInt64())}
}

func githubOwnerValidator() validator.String {
	return stringvalidator.RegexMatches(protocol.GitHubOwnerPattern, "must be a GitHub user or organization name: "+protocol.GitHubOwnerRule)
}

func githubRepositoryValidator() validator.String {
	return stringvalidator.RegexMatches(protocol.GitHubRepositoryPattern, "must be a repository name: "+protocol.GitHubRepositoryRule)
}

func regionValidator() validator.String {
	return stringvalidator.RegexMatches(protocol.RegionPattern, "must be an AWS region such as eu-west-1")
}

// IAM's rules for what assume_role passes to STS.
var (
	roleARNPattern     = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,576}$`)
	sessionNamePattern = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
	externalIDPattern  = regexp.MustCompile(`^[\w+=,.@:/-]*$`) // RE2 repeats at most 1000 times: the length is checked apart
)

func roleARNValidator() validator.String {
	return stringvalidator.RegexMatches(roleARNPattern, "must be an IAM role ARN such as arn:aws:iam::123456789012:role/ci")
}

func sessionNameValidator() validator.String {
	return stringvalidator.RegexMatches(sessionNamePattern, "must be 2-64 characters of letters, digits and + = , . @ _ -")
}

func externalIDValidators() []validator.String {
	return []validator.String{
		stringvalidator.LengthBetween(2, 1224),
		stringvalidator.RegexMatches(externalIDPattern, "must be 2-1224 characters of letters, digits and + = , . @ : / _ -"),
	}
}

// EC2's identifiers and names of what a pool's fleet launches from.
var (
	launchTemplateIDPattern   = regexp.MustCompile(`^lt-[0-9a-f]+$`)
	launchTemplateNamePattern = regexp.MustCompile(`^[A-Za-z0-9().\-/_]{3,128}$`)
	subnetIDPattern           = regexp.MustCompile(`^subnet-[0-9a-f]+$`)
)

func launchTemplateIDValidator() validator.String {
	return stringvalidator.RegexMatches(launchTemplateIDPattern, "must be a launch template ID such as lt-0123456789abcdef0")
}

func launchTemplateNameValidator() validator.String {
	return stringvalidator.RegexMatches(launchTemplateNamePattern, "must be a launch template name: 3-128 letters, digits and ( ) . - / _")
}

func subnetIDValidator() validator.String {
	return stringvalidator.RegexMatches(subnetIDPattern, "must be a subnet ID such as subnet-0a1b2c3d")
}

// uniqueStrings refuses a list that holds a value twice, naming the
// attribute and the value (the framework's UniqueValues names neither the
// attribute nor, for nested attributes, the line).
type uniqueStrings struct{}

func (uniqueStrings) Description(context.Context) string { return "each value may appear only once" }

func (v uniqueStrings) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v uniqueStrings) ValidateList(ctx context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	seen := map[string]bool{}
	for _, elem := range req.ConfigValue.Elements() {
		s, ok := elem.(types.String)
		if !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		if seen[s.ValueString()] {
			resp.Diagnostics.AddAttributeError(req.Path, "Duplicate value",
				fmt.Sprintf("Attribute %s lists %q more than once; %s.", req.Path, s.ValueString(), v.Description(ctx)))
			return
		}
		seen[s.ValueString()] = true
	}
}

// tagCharPattern is the character set AWS allows in tags across services
// (DynamoDB and SQS among them).
var tagCharPattern = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`)

const (
	maxTagKeyLength   = awslimits.MaxTagKeyLength
	maxTagValueLength = awslimits.MaxTagValueLength
	// maxPoolTags: a pool's queues take its tags (default tags included)
	// and the provider's ec2runners:pool and ec2runners:class.
	maxPoolTags = awslimits.MaxTagsPerResource - 2
	// maxDefaultTags: the instances claims launch take the default tags
	// and the claim's own three (fleet.go's instanceTags).
	maxDefaultTags = awslimits.MaxTagsPerResource - 3
)

// tagsValidator checks tags against AWS's rules, which DynamoDB and SQS
// would otherwise enforce half-way through an apply.
type tagsValidator struct{}

func (tagsValidator) Description(context.Context) string {
	return fmt.Sprintf("tag keys must be 1-%d characters and values at most %d, of letters, digits, spaces and _ . : / = + - @; keys must not start with aws: or be %s or %s",
		maxTagKeyLength, maxTagValueLength, protocol.TagPool, protocol.TagClass)
}

func (v tagsValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v tagsValidator) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for key, elem := range req.ConfigValue.Elements() {
		var problem string
		value, _ := elem.(types.String)
		switch n := utf8.RuneCountInString(key); {
		case n < 1 || n > maxTagKeyLength:
			problem = fmt.Sprintf("tag key %q is %d characters long", key, n)
		case strings.HasPrefix(strings.ToLower(key), "aws:"):
			problem = fmt.Sprintf("tag key %q starts with aws:, which AWS reserves", key)
		case key == protocol.TagPool || key == protocol.TagClass:
			problem = fmt.Sprintf("tag key %q is the provider's: it tags each queue with its pool (%s) and class (%s)", key, protocol.TagPool, protocol.TagClass)
		case !tagCharPattern.MatchString(key):
			problem = fmt.Sprintf("tag key %q has a character AWS does not allow", key)
		case value.IsUnknown():
			continue
		case value.IsNull():
			problem = fmt.Sprintf("tag %q has a null value", key)
		case utf8.RuneCountInString(value.ValueString()) > maxTagValueLength:
			problem = fmt.Sprintf("the value of tag %q is %d characters long", key, utf8.RuneCountInString(value.ValueString()))
		case !tagCharPattern.MatchString(value.ValueString()):
			problem = fmt.Sprintf("the value of tag %q has a character AWS does not allow", key)
		}
		if problem != "" {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(key), "Invalid tag",
				fmt.Sprintf("Attribute %s: %s; %s.", req.Path, problem, v.Description(ctx)))
		}
	}
}
