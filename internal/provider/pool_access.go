package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// accessEntryType is the type of an access entry, as its schema says.
var accessEntryType = accessAttribute().NestedObject.Type().(types.ObjectType)

type accessEntryModel struct {
	Repository      types.String `tfsdk:"repository"`
	Workflows       types.List   `tfsdk:"workflows"`
	MaxRunners      types.Int64  `tfsdk:"max_runners"`
	MaxRuntime      duration     `tfsdk:"max_runtime"`
	ResourceClasses types.List   `tfsdk:"resource_classes"`
}

// Descriptions of the access attributes, shared by the pool resource and
// the pool data source.
const (
	accessDescription = "The repositories that may claim runners from the pool through its broker, each with its own caps. " +
		"Before every claim the broker checks the GitHub Actions OIDC token of the calling job against this list: " +
		"a repository not listed, or a workflow its entry does not name, is refused, and so is a claim beyond its entry's caps. " +
		"It takes effect only for claims made through the broker: claims made with direct AWS access to the pool's table and queues are not checked, " +
		"so give workflows no AWS access to the pool but the right to invoke the broker. " +
		"At least one entry, one per repository (names compared ignoring case, as GitHub does), kept in the order given. " +
		"Null (the default): no policy, and the broker refuses every claim."
	accessRepositoryDescription = "The repository, `owner/name`: the owner " + protocol.GitHubOwnerRule + ", the name " + protocol.GitHubRepositoryRule + "."
	accessWorkflowsDescription  = "Globs matched against the token's `workflow_ref`, which names the run's top-level workflow file and ref " +
		"(not a reusable workflow it calls): a claim is admitted when one of them matches. `*` matches any run of characters; everything else is literal. " +
		"Each starts with the entry's `repository` and `/`, so an entry admits no other repository's workflows: " +
		"`octo/app/.github/workflows/ci.yml@refs/heads/main` admits one workflow on one branch, `octo/app/.github/workflows/*` every workflow of the repository on every ref. " +
		"At least one, each once. Default: any workflow of the repository."
	accessResourceClassesDescription = "The resource classes the repository's claims may ask for, at least one, each once and each one of the pool's `resource_classes`. Default: all of them."
)

var (
	accessMaxRunnersDescription = fmt.Sprintf("The most runners the repository's claims may hold at once, all its claims in the pool together, 1 to %d "+
		"(one claim asks for 1 to %d). A claim that would hold more is refused. Default: no cap but the pool's capacity.", protocol.MaxAccessRunners, maxInstanceCount)
	accessMaxRuntimeDescription = fmt.Sprintf("The longest `max_runtime` the repository's claims may have, as a duration from `%s` up to the pool's own `max_runtime` (itself at most `%s`): "+
		"an entry narrows the pool's `max_runtime`, never widens it. A claim asking for longer is refused. Default: the pool's `max_runtime`.",
		protocol.FormatDuration(protocol.ShortestMaxRuntime), protocol.FormatDuration(protocol.LongestMaxRuntime))
)

func accessAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Optional:    true,
		Description: accessDescription,
		Validators:  []validator.List{listvalidator.SizeAtLeast(1)},
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"repository": schema.StringAttribute{
				Required: true, Description: accessRepositoryDescription,
				Validators: []validator.String{repositoryValidator()},
			},
			"workflows": schema.ListAttribute{
				Optional: true, ElementType: types.StringType, Description: accessWorkflowsDescription,
				// Checked against the entry's repository by ValidateConfig.
				Validators: []validator.List{listvalidator.SizeAtLeast(1), uniqueStrings{}},
			},
			"max_runners": schema.Int64Attribute{
				Optional: true, Description: accessMaxRunnersDescription,
				Validators: []validator.Int64{int64validator.Between(1, protocol.MaxAccessRunners)},
			},
			"max_runtime": schema.StringAttribute{
				Optional: true, CustomType: durationType{}, Description: accessMaxRuntimeDescription,
				// Checked against the pool's max_runtime by ValidateConfig.
				Validators: []validator.String{durationBetween(protocol.ShortestMaxRuntime, protocol.LongestMaxRuntime)},
			},
			"resource_classes": schema.ListAttribute{
				Optional: true, ElementType: types.StringType, Description: accessResourceClassesDescription,
				// Checked against the pool's classes by ValidateConfig.
				Validators: []validator.List{listvalidator.SizeAtLeast(1), uniqueStrings{}},
			},
		}},
	}
}

// validateAccess checks what the entries owe each other and the rest of
// the pool: one entry per repository, workflows of the entry's repository
// alone, max runtimes within the pool's max_runtime (poolMaxRuntime, null
// for its default) and classes among the pool's (classes, nil while not
// known). Parts not known yet are checked at apply, before anything
// changes (pool.Spec).
func validateAccess(ctx context.Context, access types.List, classes map[string]protocol.ResourceClass, poolMaxRuntime duration, diags *diag.Diagnostics) {
	if access.IsNull() || access.IsUnknown() {
		return
	}
	var entries []accessEntryModel
	if access.ElementsAs(ctx, &entries, false).HasError() {
		return // unknown entries
	}
	root := path.Root("access")
	for i, e := range entries {
		at := root.AtListIndex(i)
		if e.Repository.IsUnknown() {
			continue
		}
		repository := e.Repository.ValueString()
		for j, earlier := range entries[:i] {
			if !earlier.Repository.IsUnknown() && protocol.SameRepository(earlier.Repository.ValueString(), repository) {
				diags.AddAttributeError(at.AtName("repository"), "Duplicate repository",
					fmt.Sprintf("Attribute %s: repository %q is also %s (%q): GitHub compares repository names ignoring case, and each repository has one entry.",
						at.AtName("repository"), repository, root.AtListIndex(j).AtName("repository"), earlier.Repository.ValueString()))
				break
			}
		}
		if _, _, err := protocol.ParseRepository(repository); err == nil {
			forEachKnownString(e.Workflows, at.AtName("workflows"), func(p path.Path, glob string) {
				if err := protocol.CheckAccessWorkflow(repository, glob); err != nil {
					diags.AddAttributeError(p, "Invalid workflow", fmt.Sprintf("Attribute %s: %s.", p, err))
				}
			})
		}
		if classes != nil {
			forEachKnownString(e.ResourceClasses, at.AtName("resource_classes"), func(p path.Path, class string) {
				if err := protocol.CheckAccessClass(class, classes); err != nil {
					diags.AddAttributeError(p, "Unknown resource class", fmt.Sprintf("Attribute %s: %s.", p, err))
				}
			})
		}
		validateAccessMaxRuntime(e.MaxRuntime, poolMaxRuntime, at.AtName("max_runtime"), diags)
	}
}

// validateAccessMaxRuntime checks an entry's max_runtime against the
// pool's; the attribute's own validator checks its spelling and range.
func validateAccessMaxRuntime(v, poolMaxRuntime duration, p path.Path, diags *diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() || poolMaxRuntime.IsUnknown() {
		return
	}
	d, problems := v.ValueGoDuration()
	if problems.HasError() || d < protocol.ShortestMaxRuntime || d > protocol.LongestMaxRuntime {
		return // refused by the entry's own validator
	}
	poolMax, where := defaultMaxRuntime, " (its default: the pool sets no max_runtime)"
	if !poolMaxRuntime.IsNull() {
		if poolMax, problems = poolMaxRuntime.ValueGoDuration(); problems.HasError() {
			return // refused by max_runtime's own validator
		}
		where = ""
	}
	if err := protocol.CheckAccessMaxRuntime(d, poolMax); err != nil {
		diags.AddAttributeError(p, "Invalid max runtime", fmt.Sprintf("Attribute %s: %s%s; an entry narrows the pool's max_runtime, never widens it.", p, err, where))
	}
}

// forEachKnownString calls f with the path and value of each known
// element of a list of strings.
func forEachKnownString(list types.List, p path.Path, f func(path.Path, string)) {
	for i, elem := range list.Elements() {
		if s, ok := elem.(types.String); ok && !s.IsNull() && !s.IsUnknown() {
			f(p.AtListIndex(i), s.ValueString())
		}
	}
}

func accessFromValue(ctx context.Context, v types.List) (*protocol.Access, diag.Diagnostics) {
	var diags diag.Diagnostics
	if v.IsNull() || v.IsUnknown() {
		return nil, diags
	}
	var entries []accessEntryModel
	if diags.Append(v.ElementsAs(ctx, &entries, false)...); diags.HasError() {
		return nil, diags
	}
	a := &protocol.Access{Repositories: make([]protocol.RepositoryAccess, len(entries))}
	for i, e := range entries {
		r := protocol.RepositoryAccess{Repository: e.Repository.ValueString(), MaxRunners: int(e.MaxRunners.ValueInt64())}
		r.MaxRuntime = protocol.Duration(e.MaxRuntime.get(&diags))
		diags.Append(e.Workflows.ElementsAs(ctx, &r.Workflows, false)...)
		diags.Append(e.ResourceClasses.ElementsAs(ctx, &r.ResourceClasses, false)...)
		a.Repositories[i] = r
	}
	return a, diags
}

// accessValue is the attribute for the policy a pool holds, in its order.
// (The framework keeps the spelling of an entry's max_runtime in the prior
// state when it means the same duration: see duration.)
func accessValue(a *protocol.Access) types.List {
	if a == nil {
		return types.ListNull(accessEntryType)
	}
	entries := make([]attr.Value, len(a.Repositories))
	for i, r := range a.Repositories {
		maxRuntime := durationNull()
		if r.MaxRuntime != 0 {
			maxRuntime = durationOf(time.Duration(r.MaxRuntime))
		}
		maxRunners := types.Int64Null()
		if r.MaxRunners != 0 {
			maxRunners = types.Int64Value(int64(r.MaxRunners))
		}
		entries[i] = types.ObjectValueMust(accessEntryType.AttrTypes, map[string]attr.Value{
			"repository":       types.StringValue(r.Repository),
			"workflows":        optionalStringList(r.Workflows),
			"max_runners":      maxRunners,
			"max_runtime":      maxRuntime,
			"resource_classes": optionalStringList(r.ResourceClasses),
		})
	}
	return types.ListValueMust(accessEntryType, entries)
}

// optionalStringList is null for no strings, as the attribute left out.
func optionalStringList(ss []string) types.List {
	if len(ss) == 0 {
		return types.ListNull(types.StringType)
	}
	return stringListValue(ss)
}
