package provider

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// maxHot bounds a hot target: a pool that keeps more idle runners than
// this is more likely a typo than a plan.
const maxHot = 500

var warmWindowType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"days":      types.ListType{ElemType: types.StringType},
	"from":      types.StringType,
	"to":        types.StringType,
	"time_zone": types.StringType,
	"hot":       types.Int64Type,
}}

var warmTargetType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"hot":      types.Int64Type,
	"schedule": types.ListType{ElemType: warmWindowType},
}}

type warmTargetModel struct {
	Hot      types.Int64 `tfsdk:"hot"`
	Schedule types.List  `tfsdk:"schedule"`
}

type warmWindowModel struct {
	Days     []string     `tfsdk:"days"`
	From     types.String `tfsdk:"from"`
	To       types.String `tfsdk:"to"`
	TimeZone types.String `tfsdk:"time_zone"`
	Hot      types.Int64  `tfsdk:"hot"`
}

var clockPattern = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$|^24:00$`)

func warmAttribute() schema.MapNestedAttribute {
	return schema.MapNestedAttribute{
		Optional: true,
		Description: "Hot targets by resource class: how many idle runners of the class the pool keeps running, as releases give them back. " +
			"A released runner is kept hot (its idle deadline is the end of the target it fills, at most 24 h ahead, never less than `idle_timeout`) while fewer runners of its class are kept than the target in force; the others go idle for `idle_timeout` as usual. " +
			"Two releases never keep more than the target between them. Runners are kept as they are released: nothing is launched to fill a target.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"hot": schema.Int64Attribute{
				Optional: true, Computed: true,
				Description: fmt.Sprintf("Hot target outside the schedule's windows, 0 to %d. Default 0.", maxHot),
				Default:     int64default.StaticInt64(0),
				Validators:  []validator.Int64{int64validator.Between(0, maxHot)},
			},
			"schedule": schema.ListNestedAttribute{
				Optional:    true,
				Description: "Weekly windows with targets of their own, e.g. weekdays 08:00-19:00; where windows overlap, the highest target holds.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"days": schema.ListAttribute{
						Required: true, ElementType: types.StringType,
						Description: "Days of the week the window opens: `mon`, `tue`, `wed`, `thu`, `fri`, `sat`, `sun`.",
						Validators: []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues(),
							listvalidator.ValueStringsAre(stringvalidator.OneOf(protocol.WeekDays...))},
					},
					"from": schema.StringAttribute{
						Required: true, Description: "When the window opens, `HH:MM` in `time_zone`.",
						Validators: []validator.String{stringvalidator.RegexMatches(clockPattern, "must be a time of day HH:MM, 00:00 to 23:59")},
					},
					"to": schema.StringAttribute{
						Required: true, Description: "When the window closes, `HH:MM` after `from` (up to `24:00`); a window across midnight is two windows.",
						Validators: []validator.String{stringvalidator.RegexMatches(clockPattern, "must be a time of day HH:MM, 00:00 to 24:00")},
					},
					"time_zone": schema.StringAttribute{
						Required: true, Description: "IANA time zone of `from` and `to`, such as `Europe/Berlin` or `UTC`.",
						Validators: []validator.String{timeZoneValidator{}},
					},
					"hot": schema.Int64Attribute{
						Required: true, Description: fmt.Sprintf("Hot target inside the window, 0 to %d.", maxHot),
						Validators: []validator.Int64{int64validator.Between(0, maxHot)},
					},
				}},
			},
		}},
	}
}

// timeZoneValidator accepts the time zones of the IANA database.
type timeZoneValidator struct{}

func (timeZoneValidator) Description(context.Context) string {
	return "must be an IANA time zone such as Europe/Berlin or UTC"
}
func (v timeZoneValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v timeZoneValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := time.LoadLocation(req.ConfigValue.ValueString()); err != nil || req.ConfigValue.ValueString() == "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid time zone", fmt.Sprintf("Attribute %s %s, got %q.", req.Path, v.Description(ctx), req.ConfigValue.ValueString()))
	}
}

// validateWarm checks what spans attributes (the attributes' own
// validators check the rest): each class of warm must be a resource class
// of the pool, and each window must close after it opens.
func validateWarm(ctx context.Context, warm types.Map, classes map[string]protocol.ResourceClass, diags *diag.Diagnostics) {
	targets, d := warmFromValue(ctx, warm)
	if d.HasError() {
		return // unknown parts: checked at apply
	}
	for class, target := range targets {
		p := path.Root("warm").AtMapKey(class)
		if _, ok := classes[class]; !ok {
			diags.AddAttributeError(p, "Unknown resource class", fmt.Sprintf("Attribute warm names resource class %q, which is not one of the pool's resource_classes.", class))
			continue
		}
		for i, w := range target.Schedule {
			if err := w.CheckOrder(); err != nil {
				diags.AddAttributeError(p.AtName("schedule").AtListIndex(i), "Invalid warm window", fmt.Sprintf("Attribute warm[%q].schedule[%d]: %s.", class, i, err))
			}
		}
	}
}

func warmFromValue(ctx context.Context, v types.Map) (map[string]protocol.WarmTarget, diag.Diagnostics) {
	var diags diag.Diagnostics
	if v.IsNull() || v.IsUnknown() {
		return nil, diags
	}
	var models map[string]warmTargetModel
	if diags.Append(v.ElementsAs(ctx, &models, false)...); diags.HasError() {
		return nil, diags
	}
	out := make(map[string]protocol.WarmTarget, len(models))
	for class, m := range models {
		if m.Hot.IsUnknown() || m.Schedule.IsUnknown() {
			diags.AddError("Unknown warm target", "The warm target of "+class+" is not known yet.")
			continue
		}
		var windows []warmWindowModel
		if diags.Append(m.Schedule.ElementsAs(ctx, &windows, false)...); diags.HasError() {
			return nil, diags
		}
		t := protocol.WarmTarget{Hot: int(m.Hot.ValueInt64())}
		for _, w := range windows {
			t.Schedule = append(t.Schedule, protocol.WarmWindow{Days: w.Days, From: w.From.ValueString(), To: w.To.ValueString(),
				TimeZone: w.TimeZone.ValueString(), Hot: int(w.Hot.ValueInt64())})
		}
		out[class] = t
	}
	return out, diags
}

// warmValue is the attribute for the targets a pool holds; none keeps the
// prior null.
func warmValue(targets map[string]protocol.WarmTarget, prior types.Map) types.Map {
	if len(targets) == 0 && prior.IsNull() {
		return types.MapNull(warmTargetType)
	}
	elems := make(map[string]attr.Value, len(targets))
	for class, t := range targets {
		schedule := types.ListNull(warmWindowType)
		if len(t.Schedule) > 0 {
			windows := make([]attr.Value, len(t.Schedule))
			for i, w := range t.Schedule {
				days := make([]attr.Value, len(w.Days))
				for j, d := range w.Days {
					days[j] = types.StringValue(d)
				}
				windows[i] = types.ObjectValueMust(warmWindowType.AttrTypes, map[string]attr.Value{
					"days": types.ListValueMust(types.StringType, days), "from": types.StringValue(w.From), "to": types.StringValue(w.To),
					"time_zone": types.StringValue(w.TimeZone), "hot": types.Int64Value(int64(w.Hot)),
				})
			}
			schedule = types.ListValueMust(warmWindowType, windows)
		}
		elems[class] = types.ObjectValueMust(warmTargetType.AttrTypes, map[string]attr.Value{
			"hot": types.Int64Value(int64(t.Hot)), "schedule": schedule,
		})
	}
	return types.MapValueMust(warmTargetType, elems)
}
