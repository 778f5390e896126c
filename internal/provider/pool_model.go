package provider

import (
	"context"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var resourceClassType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"cpu":        types.Int64Type,
	"memory_mib": types.Int64Type,
}}

var fleetType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"launch_template_id":      types.StringType,
	"launch_template_name":    types.StringType,
	"launch_template_version": types.StringType,
	"subnet_ids":              types.ListType{ElemType: types.StringType},
	"instance_selection":      types.StringType,
}}

var metricsType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"log_group": types.StringType,
	"namespace": types.StringType,
}}

type metricsModel struct {
	LogGroup  types.String `tfsdk:"log_group"`
	Namespace types.String `tfsdk:"namespace"`
}

func metricsValue(m *protocol.MetricsConfig) types.Object {
	if m == nil {
		return types.ObjectNull(metricsType.AttrTypes)
	}
	return types.ObjectValueMust(metricsType.AttrTypes, map[string]attr.Value{
		"log_group": types.StringValue(m.LogGroup),
		"namespace": types.StringValue(m.Namespace),
	})
}

func metricsFromValue(ctx context.Context, v types.Object) (*protocol.MetricsConfig, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var m metricsModel
	diags := v.As(ctx, &m, objectAsOptions)
	return &protocol.MetricsConfig{LogGroup: m.LogGroup.ValueString(), Namespace: m.Namespace.ValueString()}, diags
}

var githubCredentialType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"ssm_parameter":          types.StringType,
	"secrets_manager_secret": types.StringType,
}}

type githubCredentialModel struct {
	SSMParameter         types.String `tfsdk:"ssm_parameter"`
	SecretsManagerSecret types.String `tfsdk:"secrets_manager_secret"`
}

func githubCredentialValue(c *protocol.GitHubCredential) types.Object {
	if c == nil {
		return types.ObjectNull(githubCredentialType.AttrTypes)
	}
	return types.ObjectValueMust(githubCredentialType.AttrTypes, map[string]attr.Value{
		"ssm_parameter":          optionalString(c.SSMParameter),
		"secrets_manager_secret": optionalString(c.SecretsManagerSecret),
	})
}

func githubCredentialFromValue(ctx context.Context, v types.Object) (*protocol.GitHubCredential, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var m githubCredentialModel
	diags := v.As(ctx, &m, objectAsOptions)
	return &protocol.GitHubCredential{SSMParameter: m.SSMParameter.ValueString(), SecretsManagerSecret: m.SecretsManagerSecret.ValueString()}, diags
}

type fleetModel struct {
	LaunchTemplateID      types.String `tfsdk:"launch_template_id"`
	LaunchTemplateName    types.String `tfsdk:"launch_template_name"`
	LaunchTemplateVersion types.String `tfsdk:"launch_template_version"`
	SubnetIDs             types.List   `tfsdk:"subnet_ids"`
	InstanceSelection     types.String `tfsdk:"instance_selection"`
}

func resourceClassesValue(classes map[string]protocol.ResourceClass) types.Map {
	elems := make(map[string]attr.Value, len(classes))
	for name, c := range classes {
		elems[name] = types.ObjectValueMust(resourceClassType.AttrTypes, map[string]attr.Value{
			"cpu":        types.Int64Value(int64(c.CPU)),
			"memory_mib": types.Int64Value(int64(c.MemoryMiB)),
		})
	}
	return types.MapValueMust(resourceClassType, elems)
}

func resourceClassesFromValue(ctx context.Context, v types.Map) (map[string]protocol.ResourceClass, diag.Diagnostics) {
	var models map[string]resourceClassModel
	diags := v.ElementsAs(ctx, &models, false)
	out := make(map[string]protocol.ResourceClass, len(models))
	for name, m := range models {
		out[name] = m.toProtocol()
	}
	return out, diags
}

func fleetValue(f *protocol.FleetConfig) types.Object {
	if f == nil {
		return types.ObjectNull(fleetType.AttrTypes)
	}
	subnets := make([]attr.Value, len(f.SubnetIDs))
	for i, s := range f.SubnetIDs {
		subnets[i] = types.StringValue(s)
	}
	return types.ObjectValueMust(fleetType.AttrTypes, map[string]attr.Value{
		"launch_template_id":      optionalString(f.LaunchTemplateID),
		"launch_template_name":    optionalString(f.LaunchTemplateName),
		"launch_template_version": types.StringValue(f.LaunchTemplateVersion),
		"subnet_ids":              types.ListValueMust(types.StringType, subnets),
		"instance_selection":      types.StringValue(f.InstanceSelection),
	})
}

func fleetFromValue(ctx context.Context, v types.Object) (*protocol.FleetConfig, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var m fleetModel
	diags := v.As(ctx, &m, objectAsOptions)
	f := &protocol.FleetConfig{
		LaunchTemplateID:      m.LaunchTemplateID.ValueString(),
		LaunchTemplateName:    m.LaunchTemplateName.ValueString(),
		LaunchTemplateVersion: m.LaunchTemplateVersion.ValueString(),
		InstanceSelection:     m.InstanceSelection.ValueString(),
	}
	diags.Append(m.SubnetIDs.ElementsAs(ctx, &f.SubnetIDs, false)...)
	return f, diags
}

func optionalString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func stringMapValue(m map[string]string) types.Map {
	elems := make(map[string]attr.Value, len(m))
	for k, v := range m {
		elems[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, elems)
}

// mergeTags applies a resource's tags over the provider's default tags.
func mergeTags(defaults, own map[string]string) map[string]string {
	all := maps.Clone(defaults)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, own)
	return all
}

// ownTags recovers a resource's own tags from all its tags: those that the
// default tags do not explain, plus those the configuration named before.
func ownTags(all, defaults map[string]string, prior types.Map) types.Map {
	priorKeys := map[string]bool{}
	for k := range prior.Elements() {
		priorKeys[k] = true
	}
	own := map[string]string{}
	for k, v := range all {
		if dv, isDefault := defaults[k]; !isDefault || dv != v || priorKeys[k] {
			own[k] = v
		}
	}
	if len(own) == 0 && prior.IsNull() {
		return types.MapNull(types.StringType)
	}
	return stringMapValue(own)
}

// githubTargetValues are the github_owner and github_repository attributes.
func githubTargetValues(t *protocol.GitHubTarget) (owner, repository types.String) {
	if t == nil {
		return types.StringNull(), types.StringNull()
	}
	return types.StringValue(t.Owner), optionalString(t.Repository)
}
