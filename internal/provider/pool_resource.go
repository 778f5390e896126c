package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var (
	_ resource.ResourceWithConfigure      = (*poolResource)(nil)
	_ resource.ResourceWithImportState    = (*poolResource)(nil)
	_ resource.ResourceWithIdentity       = (*poolResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*poolResource)(nil)
	_ resource.ResourceWithValidateConfig = (*poolResource)(nil)
)

const (
	defaultIdleTimeout  = 7 * time.Minute
	defaultMaxRuntime   = 30 * time.Minute
	defaultMaxRunnerAge = 7 * 24 * time.Hour
)

var objectAsOptions = basetypes.ObjectAsOptions{}

// NewPoolResource is the ec2runners_pool resource.
func NewPoolResource() resource.Resource { return &poolResource{} }

type poolResource struct{ data *providerData }

type poolResourceModel struct {
	ID              types.String   `tfsdk:"id"`
	Name            types.String   `tfsdk:"name"`
	ResourceClasses types.Map      `tfsdk:"resource_classes"`
	IdleTimeout     duration       `tfsdk:"idle_timeout"`
	MaxRuntime      duration       `tfsdk:"max_runtime"`
	MaxRunnerAge    duration       `tfsdk:"max_runner_age"`
	Fleet           types.Object   `tfsdk:"fleet"`
	GitHubOwner     types.String   `tfsdk:"github_owner"`
	GitHubRepo      types.String   `tfsdk:"github_repository"`
	Warm            types.Map      `tfsdk:"warm"`
	WarmStatus      types.Map      `tfsdk:"warm_status"`
	Metrics         types.Object   `tfsdk:"metrics"`
	GitHubCred      types.Object   `tfsdk:"github_credential"`
	Access          types.List     `tfsdk:"access"`
	Tags            types.Map      `tfsdk:"tags"`
	TagsAll         types.Map      `tfsdk:"tags_all"`
	ForceDestroy    types.Bool     `tfsdk:"force_destroy"`
	TableName       types.String   `tfsdk:"table_name"`
	TableARN        types.String   `tfsdk:"table_arn"`
	QueueURLs       types.Map      `tfsdk:"queue_urls"`
	QueueARNs       types.Map      `tfsdk:"queue_arns"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
}

// poolIdentity is the pool's resource identity (Terraform 1.12+): its name.
type poolIdentity struct {
	Name types.String `tfsdk:"name"`
}

func (r *poolResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"name": identityschema.StringAttribute{RequiredForImport: true, Description: "Name of the pool."},
	}}
}

func (r *poolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pool"
}

func (r *poolResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A warm pool of self-hosted GitHub Actions runners. It keeps its idle runners in one SQS queue per resource class, and their records, the claims and its settings in a DynamoDB table. " +
			"An apply reaps the pool and fills its warm targets. A plan or refresh only reads.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The pool's name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "Name of the pool, 3-40 characters of `A-Z a-z 0-9 _ -`. The DynamoDB table has this name and each queue is named `<name>-<class>`. Changing it replaces the pool.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    poolNameValidators(),
			},
			"resource_classes": schema.MapNestedAttribute{
				Optional: true,
				Computed: true,
				Description: "Runner sizes by class name, at least one class. Each class has its own queue, `<name>-<class>`. " +
					"Class names use letters, digits and `_`, never `-`. `cpu` values must be unique, and `memory_mib` must grow with `cpu`. " +
					"A class that holds runners can be removed only with `force_destroy`. Default: seven classes, from `large` (2 vCPU) to `16xlarge` (64 vCPU). See the section \"Resource classes\".",
				Default: mapdefault.StaticValue(resourceClassesValue(protocol.DefaultResourceClasses())),
				Validators: []validator.Map{
					mapvalidator.SizeAtLeast(1),
					mapvalidator.KeysAre(classNameValidator()),
					resourceClassesValidator{},
				},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"cpu": schema.Int64Attribute{
						Required: true, Description: "vCPUs of the class's runners, 1 to 2147483647 (EC2's 32-bit bound).",
						Validators: []validator.Int64{int64validator.Between(1, math.MaxInt32)}, // EC2 takes int32
					},
					"memory_mib": schema.Int64Attribute{
						Required: true, Description: "Minimum memory of the class's runners, in MiB, 1 to 2147483647 (EC2's 32-bit bound).",
						Validators: []validator.Int64{int64validator.Between(1, math.MaxInt32)},
					},
				}},
			},
			"idle_timeout": schema.StringAttribute{
				Optional: true, Computed: true, CustomType: durationType{},
				Description: "How long a released runner waits in the pool before it terminates itself, as a duration (`7m`, `1h`), `1m` to `168h` (7 days). Default `7m`.",
				Default:     stringdefault.StaticString(protocol.FormatDuration(defaultIdleTimeout)),
				Validators:  []validator.String{durationBetween(time.Minute, 7*24*time.Hour)},
			},
			"max_runtime": schema.StringAttribute{
				Optional: true, Computed: true, CustomType: durationType{},
				Description: "How long a claim may hold a runner before it terminates itself, as a duration, `1m` to `168h` (7 days). Default `30m`; a claim may ask for another.",
				Default:     stringdefault.StaticString(protocol.FormatDuration(defaultMaxRuntime)),
				Validators:  []validator.String{durationBetween(protocol.ShortestMaxRuntime, protocol.LongestMaxRuntime)},
			},
			"max_runner_age": schema.StringAttribute{
				Optional: true, Computed: true, CustomType: durationType{},
				Description: "A runner launched longer ago than this is not handed out again nor kept in the pool: claims and releases terminate it (and warm targets replace it), so no machine serves runs for ever. A runner launched from another launch template than the pool launches now, or from another version of it, is retired the same way: a new default version of the template, or a new template (Terraform replacing the `aws_launch_template`), retires the runners of the old one. A duration, `1h` to `2160h` (90 days). Default `168h` (7 days).",
				Default:     stringdefault.StaticString(protocol.FormatDuration(defaultMaxRunnerAge)),
				Validators:  []validator.String{durationBetween(time.Hour, 90*24*time.Hour)},
			},
			"fleet": schema.SingleNestedAttribute{
				Optional:    true,
				Description: "How claims launch missing capacity with EC2 CreateFleet (type `instant`). Without it, claims can only reuse runners already in the pool.",
				Attributes: map[string]schema.Attribute{
					"launch_template_id": schema.StringAttribute{
						Optional: true, Description: "ID of the launch template of the runners, `lt-` and hexadecimal digits. Exactly one of `launch_template_id` and `launch_template_name` is required.",
						Validators: []validator.String{stringvalidator.ExactlyOneOf(path.MatchRelative().AtParent().AtName("launch_template_name")), launchTemplateIDValidator()},
					},
					"launch_template_name": schema.StringAttribute{
						Optional: true, Description: "Name of the launch template of the runners, 3-128 letters, digits and `( ) . - / _`.",
						Validators: []validator.String{launchTemplateNameValidator()},
					},
					"launch_template_version": schema.StringAttribute{
						Optional: true, Computed: true,
						Description: "Launch template version: a number, `$Default` or `$Latest`. Default `$Default`.",
						Default:     stringdefault.StaticString("$Default"),
						Validators:  []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^(\$Default|\$Latest|[0-9]+)$`), "must be a version number, $Default or $Latest")},
					},
					"subnet_ids": schema.ListAttribute{
						Required: true, ElementType: types.StringType,
						Description: "Subnets to launch in (`subnet-` IDs, at least one, each once), ideally one per availability zone: each becomes a fleet override, widening the capacity pools.",
						Validators:  []validator.List{listvalidator.SizeAtLeast(1), uniqueStrings{}, listvalidator.ValueStringsAre(subnetIDValidator())},
					},
					"instance_selection": schema.StringAttribute{
						Optional: true, Computed: true,
						Description: "`attribute-based` (default): the fleet request names vCPU, memory and allowed types as InstanceRequirements. `explicit`: the provider resolves the matching instance types with DescribeInstanceTypes and sends one override per type and subnet (for emulators without attribute-based selection).",
						Default:     stringdefault.StaticString(protocol.SelectionAttributeBased),
						Validators:  []validator.String{stringvalidator.OneOf(protocol.SelectionAttributeBased, protocol.SelectionExplicit)},
					},
				},
			},
			"github_owner": schema.StringAttribute{
				Optional:    true,
				Description: "GitHub user or organization the pool's runners register with, 1-39 letters, digits or `-`, not starting with `-`. With it, every claim hands each of its runners a registration token, and every release a removal token, minted with the provider's `github` block, whose `owner` must match, or with `github_credential`. Without it, claims hand the runners no tokens.",
				Validators:  []validator.String{githubOwnerValidator()},
			},
			"github_repository": schema.StringAttribute{
				Optional:    true,
				Description: "Repository of `github_owner` the runners register with (its name, 1-100 letters, digits, `_`, `.` or `-`). Without it they register at organization level.",
				Validators: []validator.String{
					githubRepositoryValidator(),
					stringvalidator.AlsoRequires(path.MatchRoot("github_owner")),
				},
			},
			"github_credential": schema.SingleNestedAttribute{
				Optional: true,
				Description: "Where the pool keeps, in its AWS account, the GitHub credential that claims and releases mint runner tokens with. " +
					"They use it when their provider has no GitHub credentials of its own: then no repository needs a GitHub secret. " +
					"Only the place is in the pool's table, never the credential. Set exactly one of the two. See the section \"GitHub credential\".",
				Attributes: map[string]schema.Attribute{
					"ssm_parameter": schema.StringAttribute{
						Optional:    true,
						Description: "Name or ARN of an SSM parameter, a `SecureString`.",
						Validators: []validator.String{
							parameterNameValidator(),
							stringvalidator.ExactlyOneOf(path.MatchRelative().AtParent().AtName("secrets_manager_secret")),
						},
					},
					"secrets_manager_secret": schema.StringAttribute{
						Optional:    true,
						Description: "Name or ARN of a Secrets Manager secret, its value text (`SecretString`).",
						Validators:  []validator.String{secretIDValidator()},
					},
				},
				Validators: []validator.Object{objectvalidator.AlsoRequires(path.MatchRoot("github_owner"))},
			},
			"warm":        warmAttribute(),
			"warm_status": warmStatusAttribute(),
			"access":      accessAttribute(),
			"metrics": schema.SingleNestedAttribute{
				Optional: true,
				Description: "Publishes how the pool serves its claims to CloudWatch, per resource class: see the guide [Metrics](../guides/metrics.md). " +
					"The events go to a log stream named after the pool, which the apply creates. Claims read these settings from the pool. " +
					"A metric that cannot be published is a warning, never a failed claim. Without this block nothing is published.",
				Attributes: map[string]schema.Attribute{
					"log_group": schema.StringAttribute{
						Required:    true,
						Description: "Name of an existing CloudWatch Logs log group, for example an `aws_cloudwatch_log_group`: 1 to 512 letters, digits, `.`, `-`, `_`, `/` and `#`. Several pools may share one.",
						Validators:  []validator.String{logGroupNameValidator()},
					},
					"namespace": schema.StringAttribute{
						Optional: true, Computed: true,
						Description: "CloudWatch namespace of the metrics, 1 to 255 printable ASCII characters, not starting with `:` nor `AWS/`. Default `" + metrics.DefaultNamespace + "`.",
						Default:     stringdefault.StaticString(metrics.DefaultNamespace),
						Validators:  []validator.String{metricsNamespaceValidator()},
					},
				},
			},
			"tags": schema.MapAttribute{
				Optional: true, ElementType: types.StringType,
				Description: "Tags of the table and the queues, over the provider's `default_tags`: at most 48 with them, as each queue takes them and the provider's 2, and SQS recommends at most 50 tags a queue (DynamoDB allows 50 a table). Keys are 1-128 characters, values at most 256, of letters, digits, spaces and `_ . : / = + - @`; keys do not start with `aws:`. The keys `ec2runners:pool` and `ec2runners:class` are the provider's: it tags each queue with its pool and class.",
				Validators:  []validator.Map{tagsValidator{}, mapvalidator.SizeAtMost(maxPoolTags)},
			},
			"tags_all": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				Description: "All tags of the table and the queues, the provider's `default_tags` included.",
			},
			"force_destroy": schema.BoolAttribute{
				Optional: true, Computed: true,
				Description: "Let destroy (and removing a resource class) terminate the runner instances still in the pool instead of failing. Default false.",
				Default:     booldefault.StaticBool(false),
			},
			"table_name": schema.StringAttribute{
				Computed: true, Description: "Name of the DynamoDB table.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"table_arn": schema.StringAttribute{
				Computed: true, Description: "ARN of the DynamoDB table.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"queue_urls": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				Description: "URL of each class's SQS queue.",
			},
			"queue_arns": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				Description: "ARN of each class's SQS queue.",
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}

// ValidateConfig checks what spans attributes: every queue name must fit
// SQS's limit, and warm and access must name the pool's classes.
func (r *poolResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m poolResourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	classes := configuredClasses(ctx, m.ResourceClasses)
	validateAccess(ctx, m.Access, classes, m.MaxRuntime, &resp.Diagnostics)
	if classes == nil {
		return
	}
	validateWarm(ctx, m.Warm, classes, &resp.Diagnostics)
	if m.Name.IsUnknown() || m.Name.IsNull() || m.ResourceClasses.IsNull() {
		return
	}
	for class := range m.ResourceClasses.Elements() {
		if !protocol.ClassNamePattern.MatchString(class) {
			continue // refused by the key validator
		}
		if err := protocol.ValidateClassName(m.Name.ValueString(), class); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("resource_classes"), "Invalid resource class name", fmt.Sprintf("Attribute resource_classes: %s.", err))
		}
	}
}

// configuredClasses are the pool's classes as configured (the default
// classes when not set), or nil while some are not known.
func configuredClasses(ctx context.Context, v types.Map) map[string]protocol.ResourceClass {
	if v.IsUnknown() {
		return nil
	}
	if v.IsNull() {
		return protocol.DefaultResourceClasses()
	}
	classes, d := resourceClassesFromValue(ctx, v)
	if d.HasError() {
		return nil // unknown parts
	}
	return classes
}

func (r *poolResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (r *poolResource) manager() *pool.Manager { return poolManager(r.data.clients) }

// poolManager manages pools with the provider's clients.
func poolManager(c *awsconfig.Clients) *pool.Manager {
	return &pool.Manager{DynamoDB: c.DynamoDB, SQS: c.SQS, EC2: c.EC2, STS: c.STS, Logs: c.Logs, Region: c.Region}
}

// ModifyPlan computes tags_all and plans queue changes: queue_urls and
// queue_arns become unknown when classes change or a queue has gone missing
// outside Terraform, so the update re-creates it. warm_status becomes
// unknown when the warm settings change, or when a tier lacks runners and
// the pool can launch them: the apply fills the targets.
func (r *poolResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan poolResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.Tags.IsUnknown() {
		plan.TagsAll = types.MapUnknown(types.StringType)
	} else {
		var own map[string]string
		resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &own, false)...)
		all := mergeTags(r.defaultTags(), own)
		if len(all) > maxPoolTags {
			resp.Diagnostics.AddAttributeError(path.Root("tags"), "Too many tags",
				fmt.Sprintf("Attribute tags and the provider's default_tags come to %d tags, and each queue of the pool takes them and the provider's %s and %s: "+
					"SQS recommends at most %d tags a queue, so the pool's tags and the default tags may come to at most %d.",
					len(all), protocol.TagPool, protocol.TagClass, awslimits.MaxTagsPerResource, maxPoolTags))
		}
		plan.TagsAll = stringMapValue(all)
	}
	if !req.State.Raw.IsNull() {
		var state poolResourceModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if !plan.ResourceClasses.IsUnknown() && sameKeys(plan.ResourceClasses, state.QueueURLs) && plan.ResourceClasses.Equal(state.ResourceClasses) {
			plan.QueueURLs, plan.QueueARNs = state.QueueURLs, state.QueueARNs
		} else {
			plan.QueueURLs, plan.QueueARNs = types.MapUnknown(types.StringType), types.MapUnknown(types.StringType)
		}
		plan.WarmStatus = state.WarmStatus
		targets, d := warmFromValue(ctx, plan.Warm)
		changed := !plan.Warm.Equal(state.Warm) || !plan.Fleet.Equal(state.Fleet) || !plan.MaxRunnerAge.Equal(state.MaxRunnerAge)
		if d.HasError() || changed || (!plan.Fleet.IsNull() && warmLacks(ctx, state.WarmStatus, targets, time.Now())) {
			plan.WarmStatus = types.MapUnknown(warmStatusType)
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *poolResource) defaultTags() map[string]string {
	if r.data == nil {
		return nil // plan before the provider is configured: validate only
	}
	return r.data.defaultTags
}

func sameKeys(a, b types.Map) bool {
	ae, be := a.Elements(), b.Elements()
	if len(ae) != len(be) {
		return false
	}
	for k := range ae {
		if _, ok := be[k]; !ok {
			return false
		}
	}
	return true
}

// spec turns the plan into the pool's desired state.
func (r *poolResource) spec(ctx context.Context, m poolResourceModel) (pool.Spec, diag.Diagnostics) {
	var diags diag.Diagnostics
	spec := pool.Spec{Name: m.Name.ValueString(), ForceDestroy: m.ForceDestroy.ValueBool()}
	spec.IdleTimeout = m.IdleTimeout.get(&diags)
	spec.MaxRuntime = m.MaxRuntime.get(&diags)
	spec.MaxRunnerAge = m.MaxRunnerAge.get(&diags)
	var d diag.Diagnostics
	spec.ResourceClasses, d = resourceClassesFromValue(ctx, m.ResourceClasses)
	diags.Append(d...)
	spec.Fleet, d = fleetFromValue(ctx, m.Fleet)
	diags.Append(d...)
	diags.Append(m.TagsAll.ElementsAs(ctx, &spec.Tags, false)...)
	if owner := m.GitHubOwner.ValueString(); owner != "" {
		spec.GitHub = &protocol.GitHubTarget{Owner: owner, Repository: m.GitHubRepo.ValueString()}
	}
	spec.GitHubCredential, d = githubCredentialFromValue(ctx, m.GitHubCred)
	diags.Append(d...)
	spec.Warm, d = warmFromValue(ctx, m.Warm)
	diags.Append(d...)
	spec.Metrics, d = metricsFromValue(ctx, m.Metrics)
	diags.Append(d...)
	spec.Access, d = accessFromValue(ctx, m.Access)
	diags.Append(d...)
	return spec, diags
}

// setStatus fills the model from what exists, keeping the user's spelling
// of equivalent values (for durations the framework does, see duration).
func (r *poolResource) setStatus(m *poolResourceModel, st *pool.Status) {
	cfg := st.Config
	m.ID = types.StringValue(cfg.Name)
	m.Name = types.StringValue(cfg.Name)
	m.ResourceClasses = resourceClassesValue(cfg.ResourceClasses)
	m.IdleTimeout = durationOf(time.Duration(cfg.IdleTimeout))
	m.MaxRuntime = durationOf(time.Duration(cfg.MaxRuntime))
	m.MaxRunnerAge = durationOf(time.Duration(cfg.MaxRunnerAge))
	m.Fleet = fleetValue(cfg.Fleet)
	m.GitHubOwner, m.GitHubRepo = githubTargetValues(cfg.GitHub)
	m.Warm = warmValue(cfg.Warm, m.Warm)
	m.Metrics = metricsValue(cfg.Metrics)
	m.GitHubCred = githubCredentialValue(cfg.GitHubCredential)
	m.Access = accessValue(cfg.Access)
	m.TagsAll = stringMapValue(st.Tags)
	m.Tags = ownTags(st.Tags, r.defaultTags(), m.Tags)
	if m.ForceDestroy.IsNull() {
		m.ForceDestroy = types.BoolValue(false) // imported
	}
	m.TableName = types.StringValue(protocol.TableName(cfg.Name))
	m.TableARN = types.StringValue(st.TableARN)
	m.QueueURLs = stringMapValue(st.QueueURLs)
	m.QueueARNs = stringMapValue(st.QueueARNs)
}

func (r *poolResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan poolResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	timeout, d := plan.Timeouts.Create(ctx, 20*time.Minute)
	resp.Diagnostics.Append(d...)
	r.applySpec(ctx, &plan, timeout, "create", r.manager().Create, &resp.Diagnostics)
	r.reap(ctx, plan.Name.ValueString(), &resp.Diagnostics)
	r.fill(ctx, &plan, timeout, &resp.Diagnostics)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		resp.Diagnostics.Append(resp.Identity.Set(ctx, poolIdentity{Name: plan.Name})...)
	}
}

// fill launches what the pool's warm targets lack, within the apply's
// timeout, and sets warm_status to what it left. A failed fill does not
// fail the apply (the pool itself is in place): it warns, and the next
// plan shows what still lacks.
func (r *poolResource) fill(ctx context.Context, m *poolResourceModel, timeout time.Duration, diags *diag.Diagnostics) {
	if diags.HasError() {
		return
	}
	name := m.Name.ValueString()
	c, warned := r.data.warnedClaimer(ctx)
	defer addWarnings(diags, warned)
	if m.Fleet.IsNull() || m.Warm.IsNull() {
		r.setWarmStatus(ctx, c, m, diags)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := maintenance.Warm(ctx, c, name, maintenance.WarmOptions{Timings: claim.DefaultTimings()})
	const next = "The pool is in place; the next plan shows what lacks, and the next apply tries again."
	if err := warmDiagnostics(name, res, err, next, diags); err != nil {
		diags.AddWarning(fmt.Sprintf("Cannot fill the warm targets of pool %s", name),
			fmt.Sprintf("Filling its warm targets failed: %v. %s", err, next))
	}
	if len(res.Launched) > 0 || len(res.Retired) > 0 {
		tflog.Info(ctx, "filled the warm targets", map[string]any{"pool": name, "launched": res.Launched, "retired": res.Retired})
	}
	m.WarmStatus = warmStatusValue(res.After)
}

// setWarmStatus reads the counts of the pool's warm runners into m.
func (r *poolResource) setWarmStatus(ctx context.Context, c *claim.Claimer, m *poolResourceModel, diags *diag.Diagnostics) {
	counts, err := maintenance.WarmStatus(ctx, c, m.Name.ValueString())
	if err != nil {
		diags.AddError(fmt.Sprintf("Cannot count the warm runners of pool %s", m.Name.ValueString()), err.Error())
		return
	}
	m.WarmStatus = warmStatusValue(counts)
}

// applySpec runs op (create or update) for the plan within timeout and
// fills the plan with what exists afterwards.
func (r *poolResource) applySpec(ctx context.Context, plan *poolResourceModel, timeout time.Duration, verb string, op func(context.Context, pool.Spec) (*pool.Status, error), diags *diag.Diagnostics) {
	if diags.HasError() {
		return
	}
	spec, d := r.spec(ctx, *plan)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := op(ctx, spec)
	if err != nil {
		diags.AddError(fmt.Sprintf("Cannot %s pool %s", verb, spec.Name), err.Error())
		return
	}
	r.setStatus(plan, st)
}

func (r *poolResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state poolResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Before the read: the framework wants an identity also when the pool is
	// gone, which Terraform before 1.12 never holds.
	resp.Diagnostics.Append(resp.Identity.Set(ctx, poolIdentity{Name: state.ID})...)
	// A read: nothing here writes (readManager, reader), whatever is due.
	st, err := r.data.readManager().Read(ctx, state.ID.ValueString())
	if errors.Is(err, pool.ErrNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot read pool %s", state.ID.ValueString()), err.Error())
		return
	}
	r.setStatus(&state, st)
	r.setWarmStatus(ctx, r.data.reader(ctx), &state, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// reap cleans the pool up, when due (at most once a minute, as claims and
// releases do), in an apply of the pool: before its fill, so that runners
// past their deadline are gone when it counts what the targets lack.
// Bounded; failures are only logged (metrics not published are warnings).
// A read never reaps.
func (r *poolResource) reap(ctx context.Context, name string, diags *diag.Diagnostics) {
	if diags.HasError() {
		return
	}
	c, warned := r.data.warnedClaimer(ctx)
	defer addWarnings(diags, warned)
	res, ran, err := maintenance.ReapIfDue(ctx, c, name, maintenance.DefaultReapInterval)
	switch {
	case err != nil:
		tflog.Warn(ctx, "reaping the pool failed", map[string]any{"pool": name, "error": err.Error()})
	case ran:
		tflog.Debug(ctx, "reaped the pool", map[string]any{"pool": name, "expired": len(res.Expired), "orphans": len(res.Orphans)})
	}
}

func (r *poolResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan poolResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	timeout, d := plan.Timeouts.Update(ctx, 20*time.Minute)
	resp.Diagnostics.Append(d...)
	r.applySpec(ctx, &plan, timeout, "update", r.manager().Update, &resp.Diagnostics)
	r.reap(ctx, plan.Name.ValueString(), &resp.Diagnostics)
	r.fill(ctx, &plan, timeout, &resp.Diagnostics)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		// Terraform before 1.12 plans no identity: set it here too.
		resp.Diagnostics.Append(resp.Identity.Set(ctx, poolIdentity{Name: plan.Name})...)
	}
}

func (r *poolResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state poolResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, d := state.Timeouts.Delete(ctx, 20*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := r.manager().Delete(ctx, state.ID.ValueString(), state.ForceDestroy.ValueBool()); err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot delete pool %s", state.ID.ValueString()), err.Error())
	}
}

// ImportState takes the pool's name as the import ID or, from an import
// block's identity (Terraform 1.12+), as identity.name.
func (r *poolResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	name := req.ID
	if name == "" && req.Identity != nil {
		resp.Diagnostics.Append(req.Identity.GetAttribute(ctx, path.Root("name"), &name)...)
	}
	if err := protocol.ValidatePoolName(name); err != nil {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("Import a pool by its name (the import ID, or identity.name): %s.", err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), name)...)
}
