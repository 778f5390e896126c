package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var (
	_ resource.ResourceWithConfigure      = (*claimResource)(nil)
	_ resource.ResourceWithImportState    = (*claimResource)(nil)
	_ resource.ResourceWithIdentity       = (*claimResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*claimResource)(nil)
	_ resource.ResourceWithValidateConfig = (*claimResource)(nil)
)

var (
	instanceTypePattern = regexp.MustCompile(`^[A-Za-z0-9.*-]+$`)
	defaultAllowedTypes = []string{"c*", "m*", "r*"}
)

// maxInstanceCount is the most runners one claim asks for.
const maxInstanceCount = 100

var claimInstanceType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"id":            types.StringType,
	"instance_type": types.StringType,
	"usage_class":   types.StringType,
	"source":        types.StringType,
}}

// NewClaimResource is the ec2runners_claim resource.
func NewClaimResource() resource.Resource { return &claimResource{} }

type claimResource struct{ data *providerData }

type claimResourceModel struct {
	ID                   types.String   `tfsdk:"id"`
	Pool                 types.String   `tfsdk:"pool"`
	RunID                types.String   `tfsdk:"run_id"`
	RunnerGroup          types.String   `tfsdk:"runner_group"`
	Repository           types.String   `tfsdk:"repository"`
	Claimant             types.String   `tfsdk:"claimant"`
	InstanceCount        types.Int64    `tfsdk:"instance_count"`
	ResourceClass        types.String   `tfsdk:"resource_class"`
	UsageClass           types.String   `tfsdk:"usage_class"`
	SpotFallback         types.String   `tfsdk:"spot_fallback"`
	AllowedInstanceTypes types.List     `tfsdk:"allowed_instance_types"`
	MaxRuntime           duration       `tfsdk:"max_runtime"`
	FleetFallback        types.Bool     `tfsdk:"fleet_fallback"`
	HeartbeatMaxAge      duration       `tfsdk:"heartbeat_max_age"`
	RegistrationWait     duration       `tfsdk:"registration_wait"`
	FleetValidationWait  duration       `tfsdk:"fleet_validation_wait"`
	ReleaseWait          duration       `tfsdk:"release_wait"`
	Label                types.String   `tfsdk:"label"`
	InstanceIDs          types.List     `tfsdk:"instance_ids"`
	Instances            types.List     `tfsdk:"instances"`
	ReusedCount          types.Int64    `tfsdk:"reused_count"`
	StartedCount         types.Int64    `tfsdk:"started_count"`
	CreatedCount         types.Int64    `tfsdk:"created_count"`
	Timeouts             timeouts.Value `tfsdk:"timeouts"`
}

// claimIdentity is the claim's resource identity (Terraform 1.12+): its
// pool and run id, which name its claim record.
type claimIdentity struct {
	Pool  types.String `tfsdk:"pool"`
	RunID types.String `tfsdk:"run_id"`
}

func (r *claimResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"pool":   identityschema.StringAttribute{RequiredForImport: true, Description: "Name of the pool."},
		"run_id": identityschema.StringAttribute{RequiredForImport: true, Description: "The claim's run id."},
	}}
}

func (r *claimResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_claim"
}

func (r *claimResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	wait := func(desc string, def, min, max time.Duration) schema.StringAttribute {
		return schema.StringAttribute{
			Optional: true, Computed: true, CustomType: durationType{},
			Description:   desc + " A duration, `" + protocol.FormatDuration(min) + "` to `" + protocol.FormatDuration(max) + "`. Default `" + protocol.FormatDuration(def) + "`.",
			Default:       stringdefault.StaticString(protocol.FormatDuration(def)),
			Validators:    []validator.String{durationBetween(min, max)},
			PlanModifiers: replace,
		}
	}
	d := claim.DefaultTimings()
	resp.Schema = schema.Schema{
		Description: "Claims `instance_count` healthy runners registered under the claim's own `label` for one workflow run: warm ones from the pool first, new ones from EC2 CreateFleet for the rest, all or nothing. Destroying the claim releases the runners back to the pool; like a claim, it may then top the pool's stopped tier up (at most 2 runners per class a minute). A refresh only reads, and writes nothing.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "`<pool>/<run_id>`.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"pool": schema.StringAttribute{
				Required: true, Description: "Name of the pool (3-40 characters of `A-Z a-z 0-9 _ -`); everything else about it is read from the pool's config item, so the pool may be managed in another stack.",
				PlanModifiers: replace,
				Validators:    poolNameValidators(),
			},
			"run_id": schema.StringAttribute{
				Optional: true, Computed: true,
				Description:   fmt.Sprintf("The claim's run id, which names its claim record and begins its runners' `label`. 1-100 characters of `a-z 0-9 _ . -` (at most %d for a new claim, so that its label has at most 100), starting with a letter or digit; lower case only, as GitHub matches labels case-insensitively (`Run-1` would be `run-1`'s label too). Default: a unique generated id.", protocol.MaxNewRunIDLength),
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{runIDValidator()},
			},
			"runner_group": schema.StringAttribute{
				Optional:      true,
				Description:   "The organization's runner group the runners join, such as a group only some repositories may use: its name, 1-255 characters, no control characters, no blanks at either end. Only for a pool whose runners register with an organization (`github_repository` not set); the group must exist, or the runners cannot register. When the claim knows its `repository`, it fails before it takes a runner if the group does not admit that repository (not among its selected repositories, or public and the group allows no public ones): it reads the organization's runner groups with the provider's or the pool's GitHub credential (organization permission \"Self-hosted runners\", read), and without that permission claims unchecked. Default: the organization's default group.",
				PlanModifiers: replace,
				Validators:    []validator.String{runnerGroupValidator()},
			},
			"repository": schema.StringAttribute{
				Optional: true, Computed: true,
				Description: "The repository, `owner/name`, whose GitHub Actions workflow run the claim serves. Default: `GITHUB_REPOSITORY`, when the claim is made in a GitHub Actions job. " +
					"A claim made in a job of this repository's run also records the run's `GITHUB_RUN_ID` and `GITHUB_RUN_ATTEMPT`: once GitHub says that run attempt completed (cancelled, failed or done) or the run was deleted, and the claim still exists (its release job did not finish, or never ran), the pool's maintenance (its broker's, every few minutes on the pool stack's schedule, the pool's apply, the `ec2runners_reap` action) releases it as a destroy would, its runners back to the pool warm, from 5 minutes after the claim on. " +
					"It asks with the GitHub credentials of the provider or of the pool's `github_credential`, which then need the repository permission \"Actions\" (read), and only about repositories of their owner. Null: a claim made outside GitHub Actions, never released so.",
				Validators:    []validator.String{repositoryValidator()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()},
			},
			"claimant": schema.StringAttribute{
				Optional:      true,
				Description:   "Who makes the claim, 1-200 characters, such as a CI job (the claim action sets the job's id, `GITHUB_JOB`). An apply of a run id whose claim record another claimant made fails, instead of waiting for that claim and adopting it: two jobs never share one claim, which the first one's release would take back. Default: none.",
				PlanModifiers: replace,
				Validators:    []validator.String{stringvalidator.LengthBetween(1, 200)},
			},
			"instance_count": schema.Int64Attribute{
				Optional: true, Computed: true, Description: fmt.Sprintf("How many runners, 1-%d. Default 1.", maxInstanceCount),
				Default:       int64default.StaticInt64(1),
				Validators:    []validator.Int64{int64validator.Between(1, maxInstanceCount)},
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
			},
			"resource_class": schema.StringAttribute{
				Optional: true, Computed: true, Description: "Resource class of the runners; must exist in the pool. Default `large`.",
				Default:       stringdefault.StaticString("large"),
				Validators:    []validator.String{classNameValidator()},
				PlanModifiers: replace,
			},
			"usage_class": schema.StringAttribute{
				Optional: true, Computed: true, Description: "`on-demand` (default) or `spot`: the runners the claim takes from the pool are of this usage class, and so are those it launches (but see `spot_fallback`).",
				Default:       stringdefault.StaticString(protocol.UsageOnDemand),
				Validators:    []validator.String{stringvalidator.OneOf(protocol.UsageOnDemand, protocol.UsageSpot)},
				PlanModifiers: replace,
			},
			"spot_fallback": schema.StringAttribute{
				Optional: true, Computed: true,
				Description: "What a spot claim launches when EC2 has too little spot capacity: `on-demand` (the default for a spot claim) launches on-demand instances for what the spot fleet did not fill, and the claim warns; `none` fails the claim. `instances[*].usage_class` says which runners are which; on release each goes back to the pool as what it is, and a later spot claim takes only spot runners from the pool. Only for `usage_class = \"spot\"`; null for other claims.",
				Validators:  []validator.String{stringvalidator.OneOf(claim.SpotFallbackOnDemand, claim.SpotFallbackNone)},
				// Planned by ModifyPlan when not set: it depends on usage_class.
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()},
			},
			"allowed_instance_types": schema.ListAttribute{
				Optional: true, Computed: true, ElementType: types.StringType,
				Description: "Instance type patterns the runners may have, at least one, of letters, digits, `.`, `-` and `*`: `*` matches any run of characters, everything else is literal, the whole type must match, case-insensitively (`c*` matches `c6i.large`, `c*g` does not). Default `[\"c*\", \"m*\", \"r*\"]`.",
				Default:     listdefault.StaticValue(stringListValue(defaultAllowedTypes)),
				Validators: []validator.List{
					listvalidator.SizeAtLeast(1),
					listvalidator.ValueStringsAre(stringvalidator.RegexMatches(instanceTypePattern, "must be an instance type pattern of letters, digits, '.', '-' and '*'")),
				},
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
			},
			"max_runtime": schema.StringAttribute{
				Optional: true, CustomType: durationType{}, Description: "How long the claim may hold its runners before they terminate themselves, as a duration, `1m` to `168h` (7 days). A claim made in a GitHub Actions job keeps them longer while a job of its run attempt still runs on one of them, up to GitHub's 5 days per job: the pool's maintenance, run in the last 10 minutes before the deadline, holds them 30 minutes at a time. Default: the pool's `max_runtime`.",
				Validators:    []validator.String{durationBetween(protocol.ShortestMaxRuntime, protocol.LongestMaxRuntime)},
				PlanModifiers: replace,
			},
			"fleet_fallback": schema.BoolAttribute{
				Optional: true, Computed: true, Description: "Launch what the pool cannot give with EC2 CreateFleet. When false, a claim the pool cannot fill fails. Default true.",
				Default:       booldefault.StaticBool(true),
				PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplace()},
			},
			// Floors: shorter waits judge live runners dead on a slow
			// network or a busy agent, and burn the pool.
			"heartbeat_max_age": wait("A runner whose heartbeat has not changed for this long, on the provider's clock, is unhealthy (a heartbeat stamped more recently by the agent's own clock also counts as fresh).", d.HeartbeatMaxAge, 15*time.Second, 10*time.Minute),
			"registration_wait": wait("How long a warm runner has to register for the run after it is claimed.", d.RegistrationWait, 15*time.Second, time.Minute),
			// Claimed runners live 5 minutes (the protocol guide) and must outlast the fleet's validation.
			"fleet_validation_wait": wait("How long new instances have to boot, register and heartbeat. At most `4m`, as warm runners claimed meanwhile must reach `running` within their 5 minute claimed lifetime.", d.FleetValidationWait, time.Second, 4*time.Minute),
			"release_wait":          wait("How long a runner has to confirm its release before it is terminated instead: on destroy, and when a claim gives back a warm runner that is alive but did not register in time.", d.ReleaseWait, time.Second, 10*time.Minute),
			"label": schema.StringAttribute{
				Computed: true, Description: fmt.Sprintf("The runners' label, for `runs-on`: the run id, `-` and %d random characters, so that no job that does not read it from the claim can name the runners. New with each claim; known after apply.", protocol.LabelSecretLength),
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"instance_ids": schema.ListAttribute{
				Computed: true, ElementType: types.StringType, Description: "IDs of the instances the claim holds.",
				PlanModifiers: []planmodifier.List{listplanmodifier.UseStateForUnknown()},
			},
			"instances": schema.ListNestedAttribute{
				Computed: true, Description: "The instances the claim holds.",
				PlanModifiers: []planmodifier.List{listplanmodifier.UseStateForUnknown()},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"id":            schema.StringAttribute{Computed: true, Description: "Instance ID."},
					"instance_type": schema.StringAttribute{Computed: true, Description: "Instance type."},
					"usage_class":   schema.StringAttribute{Computed: true, Description: "`on-demand` or `spot`: a spot claim's runner launched on-demand by `spot_fallback` says `on-demand`."},
					"source":        schema.StringAttribute{Computed: true, Description: "`pool` (a hot runner reused from the queue), `stopped` (a stopped runner started) or `fleet` (launched for this claim)."},
				}},
			},
			"reused_count": schema.Int64Attribute{
				Computed: true, Description: "Hot runners taken from the pool's queue.",
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"started_count": schema.Int64Attribute{
				Computed: true, Description: "Stopped runners of the pool started for this claim.",
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"created_count": schema.Int64Attribute{
				Computed: true, Description: "Runners launched with EC2 CreateFleet.",
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Delete: true}),
		},
	}
}

func (r *claimResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig refuses a spot fallback on a claim that is not spot: it
// would never apply.
func (r *claimResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var usage, fallback types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("usage_class"), &usage)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("spot_fallback"), &fallback)...)
	if resp.Diagnostics.HasError() || fallback.IsNull() || fallback.IsUnknown() || usage.IsUnknown() {
		return
	}
	if u := usage.ValueString(); u != protocol.UsageSpot {
		if usage.IsNull() {
			u = protocol.UsageOnDemand
		}
		resp.Diagnostics.AddAttributeError(path.Root("spot_fallback"), "Spot fallback on a claim that is not spot",
			fmt.Sprintf("Attribute spot_fallback applies only to claims with usage_class = %q; this claim's usage_class is %q. Remove spot_fallback (or set it to null).", protocol.UsageSpot, u))
	}
}

// ModifyPlan plans a new claim's spot fallback, checks the claim against
// its pool at plan time when the pool exists, and replaces a claim that
// lost runners.
func (r *claimResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan claimResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if req.State.Raw.IsNull() && plan.SpotFallback.IsUnknown() && !plan.UsageClass.IsUnknown() {
		plan.SpotFallback = defaultSpotFallback(plan.UsageClass)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("spot_fallback"), plan.SpotFallback)...)
	}
	if r.data == nil {
		return
	}
	if !req.State.Raw.IsNull() {
		var state claimResourceModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if held := len(state.InstanceIDs.Elements()); held < int(state.InstanceCount.ValueInt64()) {
			resp.Diagnostics.AddWarning("Claim lost runners",
				fmt.Sprintf("Claim %s holds %d of its %d runners (the others were terminated or expired); it will be replaced.", state.ID.ValueString(), held, state.InstanceCount.ValueInt64()))
			plan.InstanceIDs, plan.Instances = types.ListUnknown(types.StringType), types.ListUnknown(claimInstanceType)
			resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("instance_ids"))
		}
		return
	}
	if r.data.broker != nil {
		// The broker checks the claim against its pool, which the job's
		// role cannot read.
		checkBrokerRepository(plan.Repository, os.Getenv("GITHUB_REPOSITORY"), &resp.Diagnostics)
		return
	}
	if plan.Pool.IsUnknown() || plan.ResourceClass.IsUnknown() {
		return
	}
	cfg, err := pool.ReadConfig(ctx, r.data.reader(ctx).DynamoDB, plan.Pool.ValueString())
	if errors.Is(err, pool.ErrNotFound) {
		return // created in the same apply
	}
	if err != nil {
		resp.Diagnostics.AddWarning("Cannot check the claim against its pool", err.Error())
		return
	}
	if _, ok := cfg.ResourceClasses[plan.ResourceClass.ValueString()]; !ok {
		resp.Diagnostics.AddAttributeError(path.Root("resource_class"), "Unknown resource class",
			fmt.Sprintf("Attribute resource_class: pool %s has no resource class %q; it has %s.", cfg.Name, plan.ResourceClass.ValueString(), strings.Join(protocol.SortedClassNames(cfg.ResourceClasses), ", ")))
	}
	if !plan.RunnerGroup.IsUnknown() {
		if err := claim.CheckRunnerGroup(cfg, plan.RunnerGroup.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("runner_group"), "Runner group for runners of no organization", "Attribute runner_group: "+err.Error()+".")
		}
	}
	if cfg.Fleet == nil && plan.FleetFallback.ValueBool() {
		resp.Diagnostics.AddAttributeWarning(path.Root("fleet_fallback"), "The pool cannot launch runners",
			fmt.Sprintf("Pool %s has no fleet settings: this claim can only reuse runners already in the pool.", cfg.Name))
	}
}

// checkBrokerRepository refuses a claim through the broker for another
// repository than the job's: the broker claims for the repository of the
// job's OIDC token, whatever the claim says.
func checkBrokerRepository(repository types.String, jobRepository string, diags *diag.Diagnostics) {
	if repository.IsNull() || repository.IsUnknown() || jobRepository == "" || strings.EqualFold(repository.ValueString(), jobRepository) {
		return
	}
	diags.AddAttributeError(path.Root("repository"), "Claim for another repository through the broker",
		fmt.Sprintf("Attribute repository is %q, but the broker claims for the repository of the job's OIDC token, %s (GITHUB_REPOSITORY). Remove repository, or set it to %s.", repository.ValueString(), jobRepository, jobRepository))
}

// defaultSpotFallback is the spot fallback of a claim that sets none:
// on-demand for a spot claim, none (null) for the others.
func defaultSpotFallback(usageClass types.String) types.String {
	if usageClass.ValueString() == protocol.UsageSpot {
		return types.StringValue(claim.SpotFallbackOnDemand)
	}
	return types.StringNull()
}

func (r *claimResource) request(ctx context.Context, m claimResourceModel) (claim.Request, error) {
	req := claim.Request{
		Pool: m.Pool.ValueString(), RunID: m.RunID.ValueString(), RunnerGroup: m.RunnerGroup.ValueString(), Claimant: m.Claimant.ValueString(), InstanceCount: int(m.InstanceCount.ValueInt64()),
		ResourceClass: m.ResourceClass.ValueString(), UsageClass: m.UsageClass.ValueString(), FleetFallback: m.FleetFallback.ValueBool(),
		SpotFallback: m.SpotFallback.ValueString(), Timings: claim.DefaultTimings(), Repository: m.Repository.ValueString(),
	}
	if diags := m.AllowedInstanceTypes.ElementsAs(ctx, &req.AllowedTypes, false); diags.HasError() {
		return req, fmt.Errorf("allowed_instance_types: %v", diags)
	}
	// Every duration was validated at plan time; max_runtime null is 0, the pool's.
	var diags diag.Diagnostics
	req.MaxRuntime = m.MaxRuntime.get(&diags)
	req.Timings.HeartbeatMaxAge = m.HeartbeatMaxAge.get(&diags)
	req.Timings.RegistrationWait = m.RegistrationWait.get(&diags)
	req.Timings.FleetValidationWait = m.FleetValidationWait.get(&diags)
	req.Timings.ReleaseWait = m.ReleaseWait.get(&diags)
	if diags.HasError() {
		return req, fmt.Errorf("durations: %v", diags)
	}
	return req, nil
}

func (r *claimResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan claimResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	defaultTimeout := 20 * time.Minute
	if r.data.broker != nil {
		defaultTimeout = broker.MaxInvocationTime // the claim runs in one invocation
	}
	timeout, d := plan.Timeouts.Create(ctx, defaultTimeout)
	resp.Diagnostics.Append(d...)
	if plan.RunID.IsUnknown() || plan.RunID.IsNull() {
		plan.RunID = types.StringValue(newRunID())
	}
	if plan.SpotFallback.IsUnknown() {
		plan.SpotFallback = defaultSpotFallback(plan.UsageClass)
	}
	run := workflowRunOfJob(os.Getenv)
	repositoryGiven := !plan.Repository.IsUnknown() && !plan.Repository.IsNull()
	if !repositoryGiven {
		plan.Repository = types.StringNull()
		if run.Repository != "" {
			plan.Repository = types.StringValue(run.Repository)
		}
	}
	creq, err := r.request(ctx, plan)
	if strings.EqualFold(creq.Repository, run.Repository) {
		creq.WorkflowRun = run.WorkflowRun
	}
	if err != nil {
		resp.Diagnostics.AddError("Invalid claim", err.Error())
	}
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	started := time.Now()
	c, warned := r.data.warnedClaims(ctx)
	// The apply also maintains the pool, beside the claim: at most
	// maintenance.AlongsideBudget more.
	maintained := maintainAlongside(ctx, c, creq.Pool)
	res, err := c.Create(ctx, creq)
	maintained()
	addWarnings(&resp.Diagnostics, warned)
	if errors.Is(err, claim.ErrOtherClaimant) {
		resp.Diagnostics.AddAttributeError(path.Root("run_id"), fmt.Sprintf("Run %s is claimed by another claimant", creq.RunID), err.Error())
		return
	}
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot claim runners from pool %s", creq.Pool), err.Error())
		return
	}
	tflog.Info(ctx, "claimed runners", map[string]any{
		"run_id": creq.RunID, "reused": res.Reused, "started": res.Started, "created": res.Created, "seconds": time.Since(started).Seconds(),
		"received": res.Pickup.Received, "requeued": res.Pickup.Requeued, "discarded": res.Pickup.Discarded,
	})
	for _, w := range res.Warnings {
		resp.Diagnostics.AddWarning("Spot capacity short: on-demand runners launched", fmt.Sprintf("Claim %s/%s: %s.", creq.Pool, creq.RunID, w))
	}
	plan.ID = types.StringValue(creq.Pool + "/" + creq.RunID)
	plan.Label = types.StringValue(res.Label)
	if claimed := res.Repository; !strings.EqualFold(claimed, plan.Repository.ValueString()) {
		// Through the broker, the job's OIDC token names the repository,
		// whatever GITHUB_REPOSITORY says: the state records the claim as
		// made. One the configuration named otherwise is an error, which
		// taints the claim, so that the next apply releases it.
		if repositoryGiven {
			resp.Diagnostics.AddAttributeError(path.Root("repository"), "Claimed for another repository",
				fmt.Sprintf("Claim %s/%s was made for repository %s, the repository of the job's OIDC token, not %q. Run the claim in a job of %s, or remove repository.",
					creq.Pool, creq.RunID, claimed, plan.Repository.ValueString(), plan.Repository.ValueString()))
		}
		plan.Repository = optionalString(claimed)
	}
	setCounts(&plan, res.Instances)
	setInstances(&plan, res.Instances)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	resp.Diagnostics.Append(resp.Identity.Set(ctx, claimIdentity{Pool: plan.Pool, RunID: plan.RunID})...)
}

func (r *claimResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state claimResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Before the read: the framework wants an identity also when the claim is
	// gone, which Terraform before 1.12 never holds.
	resp.Diagnostics.Append(resp.Identity.Set(ctx, claimIdentity{Pool: state.Pool, RunID: state.RunID})...)
	c, warned := r.data.claimReads(ctx)
	rec, live, ok, err := c.Read(ctx, state.Pool.ValueString(), state.RunID.ValueString())
	addWarnings(&resp.Diagnostics, warned)
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot read claim %s", state.ID.ValueString()), err.Error())
		return
	}
	if !ok {
		resp.State.RemoveResource(ctx)
		return
	}
	// A record without live runners stays: destroy still has a release to
	// finish, and apply replaces the claim (ModifyPlan).
	setRecord(&state, rec, live)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update only changes timeouts: every other argument forces replacement.
func (r *claimResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan claimResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	// Terraform before 1.12 plans no identity: set it here too.
	resp.Diagnostics.Append(resp.Identity.Set(ctx, claimIdentity{Pool: plan.Pool, RunID: plan.RunID})...)
}

func (r *claimResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state claimResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	timeout, d := state.Timeouts.Delete(ctx, 10*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, warned := r.data.warnedClaims(ctx)
	// The destroy also maintains the pool, beside the release: at most
	// maintenance.AlongsideBudget more.
	maintained := maintainAlongside(ctx, c, state.Pool.ValueString())
	outcomes, err := c.Release(ctx, state.Pool.ValueString(), state.RunID.ValueString())
	maintained()
	addWarnings(&resp.Diagnostics, warned)
	tflog.Info(ctx, "released runners", map[string]any{"run_id": state.RunID.ValueString(), "outcomes": outcomes})
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot release claim %s", state.ID.ValueString()), err.Error())
	}
}

// maintainAlongside starts the pool's maintenance that a claim's create
// and destroy run alongside (maintenance.Alongside): a reap, when one is
// due, beside the claim or release, then a top-up of the stopped tier, so
// that an apply may take up to maintenance.AlongsideBudget longer. Through
// a broker, the broker runs it.
func maintainAlongside(ctx context.Context, c claimService, poolName string) (wait func()) {
	direct, ok := c.(*claim.Claimer)
	if !ok {
		return func() {}
	}
	return maintenance.Alongside(ctx, direct, poolName)
}

// ImportState takes <pool>/<run_id> as the import ID or, from an import
// block's identity (Terraform 1.12+), identity.pool and identity.run_id.
func (r *claimResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	given := strconv.Quote(req.ID)
	poolName, runID, found := strings.Cut(req.ID, "/")
	if req.ID == "" && req.Identity != nil {
		var id claimIdentity
		resp.Diagnostics.Append(req.Identity.Get(ctx, &id)...)
		poolName, runID, found = id.Pool.ValueString(), id.RunID.ValueString(), true
		given = fmt.Sprintf("identity { pool = %q, run_id = %q }", poolName, runID)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if !found || protocol.ValidatePoolName(poolName) != nil {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("Import a claim as <pool>/<run_id>, e.g. ci-runners/run-1234, or by identity { pool, run_id }; got %s.", given))
		return
	}
	if err := protocol.ValidateRunID(runID); err != nil {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("Import a claim as <pool>/<run_id>, e.g. ci-runners/run-1234, or by identity { pool, run_id }; in %s, the %s.", given, err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), poolName+"/"+runID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("pool"), poolName)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("run_id"), runID)...)
}

// setRecord fills the model from the claim's record and the runners it
// still holds (the framework keeps the user's spelling of equal durations:
// see duration).
func setRecord(m *claimResourceModel, rec claim.Record, live []claim.Instance) {
	q := rec.Request
	m.ID = types.StringValue(q.Pool + "/" + q.RunID)
	m.Pool, m.RunID, m.Label = types.StringValue(q.Pool), types.StringValue(q.RunID), types.StringValue(q.Label)
	m.RunnerGroup, m.Repository, m.Claimant = optionalString(q.RunnerGroup), optionalString(q.Repository), optionalString(q.Claimant)
	m.InstanceCount = types.Int64Value(int64(q.InstanceCount))
	m.ResourceClass = types.StringValue(q.ResourceClass)
	m.UsageClass = types.StringValue(q.UsageClass)
	m.AllowedInstanceTypes = stringListValue(q.AllowedTypes)
	m.FleetFallback = types.BoolValue(q.FleetFallback)
	// None (null): a claim that is not spot, or a spot claim recorded
	// before spot fallbacks, which did not fall back.
	m.SpotFallback = types.StringNull()
	if q.SpotFallback != "" {
		m.SpotFallback = types.StringValue(q.SpotFallback)
	}
	m.MaxRuntime = durationNull()
	if q.MaxRuntime > 0 {
		m.MaxRuntime = durationOf(q.MaxRuntime)
	}
	m.HeartbeatMaxAge = durationOf(q.Timings.HeartbeatMaxAge)
	m.RegistrationWait = durationOf(q.Timings.RegistrationWait)
	m.FleetValidationWait = durationOf(q.Timings.FleetValidationWait)
	m.ReleaseWait = durationOf(q.Timings.ReleaseWait)
	setCounts(m, rec.Instances)
	setInstances(m, live)
}

// setCounts counts the claim's runners by source.
func setCounts(m *claimResourceModel, insts []claim.Instance) {
	reused, started, created := claim.CountSources(insts)
	m.ReusedCount, m.StartedCount, m.CreatedCount = types.Int64Value(int64(reused)), types.Int64Value(int64(started)), types.Int64Value(int64(created))
}

func setInstances(m *claimResourceModel, insts []claim.Instance) {
	ids := make([]string, len(insts))
	objs := make([]attr.Value, len(insts))
	for i, inst := range insts {
		ids[i] = inst.ID
		objs[i] = types.ObjectValueMust(claimInstanceType.AttrTypes, map[string]attr.Value{
			"id": types.StringValue(inst.ID), "instance_type": types.StringValue(inst.InstanceType),
			"usage_class": types.StringValue(inst.UsageClass), "source": types.StringValue(inst.Source),
		})
	}
	m.InstanceIDs = stringListValue(ids)
	m.Instances = types.ListValueMust(claimInstanceType, objs)
}

func stringListValue(values []string) types.List {
	elems := make([]attr.Value, len(values))
	for i, v := range values {
		elems[i] = types.StringValue(v)
	}
	return types.ListValueMust(types.StringType, elems)
}

// jobRun is the workflow run attempt of the GitHub Actions job the
// provider runs in, as its environment tells: GITHUB_REPOSITORY,
// GITHUB_RUN_ID and GITHUB_RUN_ATTEMPT. Outside Actions, or with values
// that are not GitHub's, it is empty.
type jobRun struct {
	Repository  string
	WorkflowRun claim.WorkflowRun
}

// workflowRunOfJob reads the job's run from the environment (getenv).
func workflowRunOfJob(getenv func(string) string) jobRun {
	repository := getenv("GITHUB_REPOSITORY")
	if _, _, err := protocol.ParseRepository(repository); err != nil {
		return jobRun{}
	}
	id, idErr := strconv.ParseInt(getenv("GITHUB_RUN_ID"), 10, 64)
	attempt, attemptErr := strconv.Atoi(getenv("GITHUB_RUN_ATTEMPT"))
	if idErr != nil || attemptErr != nil || id <= 0 || attempt <= 0 {
		return jobRun{Repository: repository}
	}
	return jobRun{Repository: repository, WorkflowRun: claim.WorkflowRun{ID: id, Attempt: attempt}}
}

// newRunID is a unique run id for a claim that names none.
func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	return "run-" + hex.EncodeToString(b)
}

// tflogAdapter logs the pool logic's key-value messages at debug level.
func tflogAdapter(ctx context.Context) claim.Logger {
	return func(msg string, kv ...any) {
		fields := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			fields[fmt.Sprint(kv[i])] = kv[i+1]
		}
		tflog.Debug(ctx, msg, fields)
	}
}
