package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var _ list.ListResourceWithConfigure = (*claimList)(nil)

// NewClaimListResource is `list "ec2runners_claim"` (Terraform 1.14+): the
// claims of a pool, for `terraform query`, to find and adopt lost ones.
func NewClaimListResource() list.ListResource { return &claimList{} }

type claimList struct{ data *providerData }

type claimListModel struct {
	Pool        types.String `tfsdk:"pool"`
	State       types.String `tfsdk:"state"`
	MinAge      duration     `tfsdk:"min_age"`
	RunIDPrefix types.String `tfsdk:"run_id_prefix"`
}

func (l *claimList) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_claim"
}

func (l *claimList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Lists the claims of a pool, by run id, each with its identity and a display name telling what it holds: with `terraform query -generate-config-out`, the configuration that adopts claims whose state was lost. It writes nothing.",
		Attributes: map[string]schema.Attribute{
			"pool": schema.StringAttribute{
				Required: true, Description: "Name of the pool, 3-40 characters of `A-Z a-z 0-9 _ -`.",
				Validators: poolNameValidators(),
			},
			"state": schema.StringAttribute{
				Optional: true, Description: "Only claims in this state: `complete` (the claim got its runners) or `pending` (an apply under way, or one that crashed). Default: both.",
				Validators: []validator.String{stringvalidator.OneOf(claim.StateComplete, claim.StatePending)},
			},
			"min_age": schema.StringAttribute{
				Optional: true, CustomType: durationType{}, Description: "Only claims whose record was last written at least this long ago (a complete claim's: when it got its runners), as a duration such as `2h`, `0s` to `8760h` (a year).",
				Validators: []validator.String{durationBetween(0, 365*24*time.Hour)},
			},
			"run_id_prefix": schema.StringAttribute{
				Optional: true, Description: "Only claims whose run id starts with this.",
			},
		},
	}
}

func (l *claimList) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	l.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (l *claimList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var cfg claimListModel
	diags := req.Config.Get(ctx, &cfg)
	if diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	filter := claim.ListFilter{State: cfg.State.ValueString(), RunIDPrefix: cfg.RunIDPrefix.ValueString(), MinAge: cfg.MinAge.get(&diags)} // null is 0
	if diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	claims, corrupt, err := l.data.reader(ctx).List(ctx, cfg.Pool.ValueString(), filter)
	if err != nil {
		diags.AddError(fmt.Sprintf("Cannot list the claims of pool %s", cfg.Pool.ValueString()), err.Error())
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	for _, c := range corrupt {
		diags.AddWarning("Skipped an unreadable claim record", c)
	}
	stream.Results = func(push func(list.ListResult) bool) {
		if len(diags) > 0 && !push(list.ListResult{Diagnostics: diags}) {
			return
		}
		for i, c := range claims {
			if req.Limit > 0 && int64(i) >= req.Limit {
				return
			}
			res := req.NewListResult(ctx)
			res.DisplayName = claimDisplayName(c)
			res.Diagnostics.Append(res.Identity.Set(ctx, claimIdentity{Pool: types.StringValue(c.Request.Pool), RunID: types.StringValue(c.Request.RunID)})...)
			if req.IncludeResource {
				m := claimResourceModel{Timeouts: nullTimeouts()}
				setRecord(&m, c.Record, c.Live)
				res.Diagnostics.Append(res.Resource.Set(ctx, &m)...)
			}
			if !push(res) {
				return
			}
		}
	}
}

// claimDisplayName says what a listed claim holds, e.g. "run-1234: holds 2
// of 2 large runners, complete, 1h30m old".
func claimDisplayName(c claim.Listed) string {
	q := c.Request
	return fmt.Sprintf("%s: holds %d of %d %s runners, %s, %s old", q.RunID, len(c.Live), q.InstanceCount, q.ResourceClass, c.State, protocol.FormatDuration(c.Age.Truncate(time.Second)))
}

// nullTimeouts is the claim's timeouts block when it is not configured.
func nullTimeouts() timeouts.Value {
	return timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType, "delete": types.StringType})}
}
