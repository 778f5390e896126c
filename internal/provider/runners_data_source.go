package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var _ datasource.DataSourceWithConfigure = (*runnersDataSource)(nil)

// NewRunnersDataSource is the ec2runners_runners data source.
func NewRunnersDataSource() datasource.DataSource { return &runnersDataSource{} }

type runnersDataSource struct{ data *providerData }

type runnersDataSourceModel struct {
	Pool    types.String  `tfsdk:"pool"`
	Runners []runnerModel `tfsdk:"runners"`
}

type runnerModel struct {
	ID            types.String `tfsdk:"id"`
	ResourceClass types.String `tfsdk:"resource_class"`
	InstanceType  types.String `tfsdk:"instance_type"`
	UsageClass    types.String `tfsdk:"usage_class"`
	State         types.String `tfsdk:"state"`
	RunID         types.String `tfsdk:"run_id"`
	LaunchedAt    types.String `tfsdk:"launched_at"`
	Age           duration     `tfsdk:"age"`
}

func (d *runnersDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_runners"
}

func (d *runnersDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computedString := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	resp.Schema = schema.Schema{
		Description: "Lists a pool's runners as its table records them: idle in the pool, stopped in its stopped tier, or claimed by a run. " +
			"Runners terminated, or past their last deadline (the reaper ends those), are not listed. It writes nothing.",
		Attributes: map[string]schema.Attribute{
			"pool": schema.StringAttribute{
				Required: true, Description: "Name of the pool, 3-40 characters of `A-Z a-z 0-9 _ -`.",
				Validators: poolNameValidators(),
			},
			"runners": schema.ListNestedAttribute{
				Computed: true, Description: "The pool's runners, by instance id.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"id":             computedString("EC2 instance id."),
					"resource_class": computedString("Resource class."),
					"instance_type":  computedString("EC2 instance type."),
					"usage_class":    computedString("`on-demand` or `spot`."),
					"state": computedString("`idle` (waiting in the pool, running), `stopped` (in the pool's stopped tier: its instance stopped, or about to stop) " +
						"or `claimed` (held by a run: being launched or checked for its claim, or running its jobs)."),
					"run_id":      computedString("Run id of the claim that holds it; null when it is in the pool."),
					"launched_at": computedString("When it was launched (RFC 3339); null when its record does not say."),
					"age": schema.StringAttribute{
						Computed: true, CustomType: durationType{},
						Description: "Time since it was launched when read, e.g. `3h10m`; null when its record does not say.",
					},
				}},
			},
		},
	}
}

func (d *runnersDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (d *runnersDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m runnersDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Pool.ValueString()
	runners, corrupt, err := d.data.reader(ctx).Runners(ctx, name)
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot list the runners of pool %s", name), err.Error())
		return
	}
	for _, c := range corrupt {
		resp.Diagnostics.AddWarning("Skipped an unreadable runner record", c)
	}
	now := time.Now()
	m.Runners = make([]runnerModel, 0, len(runners))
	for _, r := range runners {
		m.Runners = append(m.Runners, runnerValue(r, now))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func runnerValue(r claim.Runner, now time.Time) runnerModel {
	v := runnerModel{
		ID:            types.StringValue(r.ID),
		ResourceClass: types.StringValue(r.ResourceClass),
		InstanceType:  types.StringValue(r.InstanceType),
		UsageClass:    types.StringValue(r.UsageClass),
		State:         types.StringValue(r.State),
		RunID:         types.StringNull(),
		LaunchedAt:    types.StringNull(),
		Age:           durationNull(),
	}
	if r.RunID != "" {
		v.RunID = types.StringValue(r.RunID)
	}
	if !r.LaunchedAt.IsZero() {
		v.LaunchedAt = types.StringValue(protocol.FormatTime(r.LaunchedAt))
		v.Age = durationOf(now.Sub(r.LaunchedAt).Truncate(time.Second))
	}
	return v
}
