package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var _ datasource.DataSourceWithConfigure = (*poolDataSource)(nil)

// NewPoolDataSource is the ec2runners_pool data source.
func NewPoolDataSource() datasource.DataSource { return &poolDataSource{} }

type poolDataSource struct{ data *providerData }

type poolDataSourceModel struct {
	ID                types.String `tfsdk:"id"`
	Name              types.String `tfsdk:"name"`
	ResourceClasses   types.Map    `tfsdk:"resource_classes"`
	IdleTimeout       duration     `tfsdk:"idle_timeout"`
	MaxRuntime        duration     `tfsdk:"max_runtime"`
	MaxRunnerAge      duration     `tfsdk:"max_runner_age"`
	Fleet             types.Object `tfsdk:"fleet"`
	GitHubOwner       types.String `tfsdk:"github_owner"`
	GitHubRepo        types.String `tfsdk:"github_repository"`
	InstanceARNPrefix types.String `tfsdk:"instance_arn_prefix"`
	TableName         types.String `tfsdk:"table_name"`
	TableARN          types.String `tfsdk:"table_arn"`
	QueueURLs         types.Map    `tfsdk:"queue_urls"`
	IdleMessages      types.Map    `tfsdk:"idle_messages"`
	InstanceCounts    types.Map    `tfsdk:"instance_counts"`
	WarmStatus        types.Map    `tfsdk:"warm_status"`
	Metrics           types.Object `tfsdk:"metrics"`
	Access            types.List   `tfsdk:"access"`
}

func (d *poolDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pool"
}

func (d *poolDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computedString := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	computedDuration := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, CustomType: durationType{}, Description: desc}
	}
	resp.Schema = schema.Schema{
		Description: "Reads a pool by name, for stacks that claim runners from a pool managed elsewhere, and reports how full it is. It writes nothing: no reap, no message received.",
		Attributes: map[string]schema.Attribute{
			"id": computedString("The pool's name."),
			"name": schema.StringAttribute{
				Required: true, Description: "Name of the pool, 3-40 characters of `A-Z a-z 0-9 _ -`.",
				Validators: poolNameValidators(),
			},
			"resource_classes": schema.MapNestedAttribute{
				Computed: true, Description: "Runner sizes by class name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"cpu":        schema.Int64Attribute{Computed: true, Description: "vCPUs of the class's runners."},
					"memory_mib": schema.Int64Attribute{Computed: true, Description: "Minimum memory of the class's runners, in MiB."},
				}},
			},
			"idle_timeout":   computedDuration("How long a released runner waits in the pool."),
			"max_runtime":    computedDuration("Default longest time a claim may hold a runner."),
			"max_runner_age": computedDuration("Longest time since launch a runner is handed out or kept in the pool."),
			"fleet": schema.SingleNestedAttribute{
				Computed: true, Description: "How claims launch missing capacity; null when the pool has no fleet settings.",
				Attributes: map[string]schema.Attribute{
					"launch_template_id":      computedString("ID of the launch template."),
					"launch_template_name":    computedString("Name of the launch template."),
					"launch_template_version": computedString("Launch template version."),
					"subnet_ids":              schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: "Subnets to launch in."},
					"instance_selection":      computedString("`attribute-based` or `explicit`."),
				},
			},
			"github_owner": computedString("GitHub user or organization the runners register with; null when the pool records none."),
			"metrics": schema.SingleNestedAttribute{
				Computed: true, Description: "Where the pool publishes its metrics (see the pool resource's `metrics`), for a dashboard in another stack; null when it publishes none.",
				Attributes: map[string]schema.Attribute{
					"log_group": computedString("Log group of the metrics' events; the pool's log stream in it is named after the pool."),
					"namespace": computedString("CloudWatch namespace of the metrics."),
				},
			},
			"access": schema.ListNestedAttribute{
				Computed: true, Description: "The repositories that may claim runners through the pool's broker, and their caps (see the pool resource's `access`), in the pool's order. " +
					"Claims made with direct AWS access are not checked. Null when the pool has no policy: its broker refuses every claim.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"repository":       computedString(accessRepositoryDescription),
					"workflows":        schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: accessWorkflowsDescription},
					"max_runners":      schema.Int64Attribute{Computed: true, Description: accessMaxRunnersDescription},
					"max_runtime":      computedDuration(accessMaxRuntimeDescription),
					"resource_classes": schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: accessResourceClassesDescription},
				}},
			},
			"github_repository":   computedString("Repository the runners register with; null for organization runners."),
			"instance_arn_prefix": computedString("`arn:<partition>:ec2:<region>:<account>:instance/` of the pool's runners: each runner's agent partition in the table is `AGENT#<prefix><instance id>`, for IAM policies (`dynamodb:LeadingKeys`)."),
			"table_name":          computedString("Name of the DynamoDB table."),
			"table_arn":           computedString("ARN of the DynamoDB table."),
			"queue_urls":          schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "URL of each class's SQS queue."},
			"idle_messages": schema.MapAttribute{
				Computed: true, ElementType: types.Int64Type,
				Description: "Approximate number of visible idle-runner messages in each class's queue.",
			},
			"instance_counts": schema.MapAttribute{
				Computed: true, ElementType: types.Int64Type,
				Description: "Number of instance records in each state: `created`, `running`, `idle`, `stopped` (idle in its stopped time: see the pool's `warm`), `claimed`, `terminated`.",
			},
			"warm_status": schema.MapNestedAttribute{
				Computed: true, Description: "Each class with warm targets: its hot and stopped runners against the targets in force (see the pool resource's `warm_status`).",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"hot":            schema.Int64Attribute{Computed: true, Description: "Hot runners."},
					"hot_target":     schema.Int64Attribute{Computed: true, Description: "Hot target in force."},
					"stopped":        schema.Int64Attribute{Computed: true, Description: "Stopped runners."},
					"stopped_target": schema.Int64Attribute{Computed: true, Description: "Stopped target in force."},
				}},
			},
		},
	}
}

func (d *poolDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (d *poolDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m poolDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	mgr := d.data.readManager()
	name := m.Name.ValueString()
	st, err := mgr.Read(ctx, name)
	if err == nil && st != nil {
		var counts pool.Counts
		if counts, err = mgr.Count(ctx, st); err == nil {
			m.IdleMessages = intMapValue(counts.IdleMessages)
			m.InstanceCounts = intMapValue(counts.InstanceStates)
		}
	}
	if err == nil {
		var warm map[string]maintenance.TierCounts
		if warm, err = maintenance.WarmStatus(ctx, d.data.reader(ctx), name); err == nil {
			m.WarmStatus = warmStatusValue(warm)
		}
	}
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot read pool %s", name), err.Error())
		return
	}
	cfg := st.Config
	m.ID = types.StringValue(name)
	m.ResourceClasses = resourceClassesValue(cfg.ResourceClasses)
	m.IdleTimeout = durationOf(time.Duration(cfg.IdleTimeout))
	m.MaxRuntime = durationOf(time.Duration(cfg.MaxRuntime))
	m.MaxRunnerAge = durationOf(time.Duration(cfg.MaxRunnerAge))
	m.Fleet = fleetValue(cfg.Fleet)
	m.GitHubOwner, m.GitHubRepo = githubTargetValues(cfg.GitHub)
	m.Metrics = metricsValue(cfg.Metrics)
	m.Access = accessValue(cfg.Access)
	m.InstanceARNPrefix = types.StringValue(cfg.InstanceARNPrefix)
	m.TableName = types.StringValue(protocol.TableName(name))
	m.TableARN = types.StringValue(st.TableARN)
	m.QueueURLs = stringMapValue(st.QueueURLs)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func intMapValue(m map[string]int) types.Map {
	elems := make(map[string]attr.Value, len(m))
	for k, v := range m {
		elems[k] = types.Int64Value(int64(v))
	}
	return types.MapValueMust(types.Int64Type, elems)
}
