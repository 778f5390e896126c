package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// labelIsRunID plans a claim's label as its run id whenever the run id is
// known at plan time (set in the configuration, or kept from the state), so
// that what uses the label (a workflow output, a downstream Terragrunt
// unit) needs no mock value.
type labelIsRunID struct{}

func (labelIsRunID) Description(context.Context) string {
	return "The label is the run id, known at plan time when the run id is."
}

func (m labelIsRunID) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }

func (labelIsRunID) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if !req.PlanValue.IsUnknown() {
		return
	}
	var planned, configured types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("run_id"), &planned)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("run_id"), &configured)...)
	switch {
	case !planned.IsUnknown() && !planned.IsNull():
		resp.PlanValue = planned
	case configured.IsNull() && !req.StateValue.IsNull():
		// The run id is kept from the state (its own plan modifier may not
		// have run yet), and so is its label.
		resp.PlanValue = req.StateValue
	}
}
