package provider

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var urlPattern = regexp.MustCompile(`^https?://\S+$`)

// namePattern is the character set of pool and resource class names.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// poolNameValidators check a pool name wherever one is given.
func poolNameValidators() []validator.String {
	return []validator.String{
		stringvalidator.LengthBetween(1, protocol.MaxPoolNameLength),
		stringvalidator.RegexMatches(namePattern, "may contain only letters, digits, '_' and '-'"),
	}
}

// durationValidator accepts Go duration text within [min, max].
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
	d, err := time.ParseDuration(req.ConfigValue.ValueString())
	if err != nil || d < v.min || d > v.max {
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
	return stringvalidator.RegexMatches(protocol.GitHubOwnerPattern, "must be a GitHub user or organization name: 1-39 letters, digits or '-', not starting with '-'")
}

func githubRepositoryValidator() validator.String {
	return stringvalidator.RegexMatches(protocol.GitHubRepositoryPattern, "must be a repository name: 1-100 letters, digits, '_', '.' or '-'")
}
