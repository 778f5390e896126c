package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
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

	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// maxWarm bounds a tier's target: a pool that keeps more idle runners than
// this is more likely a typo than a plan.
const maxWarm = 500

// The types of a class's warm target, of a window of its schedule and of
// a class's warm status, as their schemas say.
var (
	warmTargetType = warmAttribute().NestedObject.Type().(types.ObjectType)
	warmWindowType = warmTargetType.AttrTypes["schedule"].(types.ListType).ElemType.(types.ObjectType)
	warmStatusType = warmStatusAttribute().NestedObject.Type().(types.ObjectType)
)

type warmTargetModel struct {
	Hot      types.Int64 `tfsdk:"hot"`
	Stopped  types.Int64 `tfsdk:"stopped"`
	Schedule types.List  `tfsdk:"schedule"`
}

type warmWindowModel struct {
	Days     []string     `tfsdk:"days"`
	From     types.String `tfsdk:"from"`
	To       types.String `tfsdk:"to"`
	TimeZone types.String `tfsdk:"time_zone"`
	Hot      types.Int64  `tfsdk:"hot"`
	Stopped  types.Int64  `tfsdk:"stopped"`
}

// windowCount is the attribute of a window's target of a tier: optional,
// the base target holding where it is not set.
func windowCount(description string) schema.Int64Attribute {
	return schema.Int64Attribute{
		Optional:    true,
		Description: fmt.Sprintf("%s, 0 to %d. Without it, the base target holds in the window; a window sets at least one of `hot` and `stopped`.", description, maxWarm),
		Validators:  []validator.Int64{int64validator.Between(0, maxWarm)},
	}
}

// tierCount is the attribute of a tier's target: optional, 0 by default.
func tierCount(description string) schema.Int64Attribute {
	return schema.Int64Attribute{
		Optional: true, Computed: true,
		Description: fmt.Sprintf("%s, 0 to %d. Default 0.", description, maxWarm),
		Default:     int64default.StaticInt64(0),
		Validators:  []validator.Int64{int64validator.Between(0, maxWarm)},
	}
}

var clockPattern = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$|^24:00$`)

func warmAttribute() schema.MapNestedAttribute {
	return schema.MapNestedAttribute{
		Optional: true,
		Description: "Warm runners to keep, by resource class, in two tiers. " +
			"Hot runners wait, running, in the class's queue: a claim gets one in seconds. " +
			"Stopped runners are on-demand instances kept stopped: a claim starts one in tens of seconds. " +
			"With `fleet` set, the pool's apply launches what the targets lack. " +
			"When it cannot, it warns, naming the class and why; the apply still succeeds. See the section \"Warm capacity\".",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"hot":     tierCount("Hot target outside the schedule's windows"),
			"stopped": tierCount("Stopped target outside the schedule's windows"),
			"schedule": schema.ListNestedAttribute{
				Optional:    true,
				Description: "Weekly windows with targets of their own, e.g. weekdays 08:00-19:00; where windows overlap, each tier's highest target holds.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"days": schema.ListAttribute{
						Required: true, ElementType: types.StringType,
						Description: "Days of the week the window opens, at least one, each once: `mon`, `tue`, `wed`, `thu`, `fri`, `sat`, `sun`.",
						Validators: []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues(),
							listvalidator.ValueStringsAre(stringvalidator.OneOf(protocol.WeekDays...))},
					},
					"from": schema.StringAttribute{
						Required: true, Description: "When the window opens, `HH:MM` in `time_zone`, `00:00` to `23:59`.",
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
					"hot":     windowCount("Hot target inside the window"),
					"stopped": windowCount("Stopped target inside the window"),
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
			if err := errors.Join(w.CheckTargets(), w.CheckOrder()); err != nil {
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
		if m.Hot.IsUnknown() || m.Stopped.IsUnknown() || m.Schedule.IsUnknown() {
			diags.AddError("Unknown warm target", "The warm target of "+class+" is not known yet.")
			continue
		}
		var windows []warmWindowModel
		if diags.Append(m.Schedule.ElementsAs(ctx, &windows, false)...); diags.HasError() {
			return nil, diags
		}
		t := protocol.WarmTarget{Hot: int(m.Hot.ValueInt64()), Stopped: int(m.Stopped.ValueInt64())}
		for _, w := range windows {
			if w.Hot.IsUnknown() || w.Stopped.IsUnknown() {
				diags.AddError("Unknown warm target", "A window's target of "+class+" is not known yet.")
				return nil, diags
			}
			t.Schedule = append(t.Schedule, protocol.WarmWindow{Days: w.Days, From: w.From.ValueString(), To: w.To.ValueString(),
				TimeZone: w.TimeZone.ValueString(), Hot: countFromValue(w.Hot), Stopped: countFromValue(w.Stopped)})
		}
		out[class] = t
	}
	return out, diags
}

// countFromValue is a window's target of a tier; nil when not set.
func countFromValue(v types.Int64) *int {
	if v.IsNull() {
		return nil
	}
	return protocol.Count(int(v.ValueInt64()))
}

func countValue(n *int) types.Int64 {
	if n == nil {
		return types.Int64Null()
	}
	return types.Int64Value(int64(*n))
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
					"time_zone": types.StringValue(w.TimeZone), "hot": countValue(w.Hot), "stopped": countValue(w.Stopped),
				})
			}
			schedule = types.ListValueMust(warmWindowType, windows)
		}
		elems[class] = types.ObjectValueMust(warmTargetType.AttrTypes, map[string]attr.Value{
			"hot": types.Int64Value(int64(t.Hot)), "stopped": types.Int64Value(int64(t.Stopped)), "schedule": schedule,
		})
	}
	return types.MapValueMust(warmTargetType, elems)
}

func warmStatusAttribute() schema.MapNestedAttribute {
	count := func(description string) schema.Int64Attribute {
		return schema.Int64Attribute{Computed: true, Description: description}
	}
	return schema.MapNestedAttribute{
		Computed: true,
		Description: "Each class's warm runners against its targets in force when the pool was read: the runners holding the tier's slots (a hot one idle in the queue, a stopped one in its stopped time or about to stop). " +
			"When a tier lacks runners and the pool has `fleet` settings, the plan shows this as known after apply: the apply launches what lacks.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"hot":            count("Hot runners."),
			"hot_target":     count("Hot target in force."),
			"stopped":        count("Stopped runners."),
			"stopped_target": count("Stopped target in force."),
		}},
	}
}

// warmStatusValue is the attribute for the counts of each class.
func warmStatusValue(counts map[string]maintenance.TierCounts) types.Map {
	elems := make(map[string]attr.Value, len(counts))
	for class, c := range counts {
		elems[class] = types.ObjectValueMust(warmStatusType.AttrTypes, map[string]attr.Value{
			"hot": types.Int64Value(int64(c.Hot)), "hot_target": types.Int64Value(int64(c.HotTarget)),
			"stopped": types.Int64Value(int64(c.Stopped)), "stopped_target": types.Int64Value(int64(c.StoppedTarget)),
		})
	}
	return types.MapValueMust(warmStatusType, elems)
}

type warmStatusModel struct {
	Hot           types.Int64 `tfsdk:"hot"`
	HotTarget     types.Int64 `tfsdk:"hot_target"`
	Stopped       types.Int64 `tfsdk:"stopped"`
	StoppedTarget types.Int64 `tfsdk:"stopped_target"`
}

// warmLacks tells whether, by the counts in status, some class has fewer
// runners than targets ask for at now.
func warmLacks(ctx context.Context, status types.Map, targets map[string]protocol.WarmTarget, now time.Time) bool {
	var counts map[string]warmStatusModel
	if status.IsNull() || status.IsUnknown() || status.ElementsAs(ctx, &counts, false).HasError() {
		return len(targets) > 0
	}
	for class, t := range targets {
		c := counts[class]
		if c.Hot.ValueInt64() < int64(t.At(protocol.TierHot, now)) || c.Stopped.ValueInt64() < int64(t.At(protocol.TierStopped, now)) {
			return true
		}
	}
	return false
}

// warmDiagnostics adds the warnings of a fill of pool name to diags: one
// per class the fill left below its targets, naming the class, its counts
// and why (the launch template check, CreateFleet's errors, runners not
// ready: Warm's shortfalls), then the fill's notes on other classes. next
// says what the user may do about it. It returns the part of the fill's
// error that no class's warning says (such as a failure to read the pool).
func warmDiagnostics(name string, res maintenance.WarmResult, err error, next string, diags *diag.Diagnostics) error {
	said := map[string]bool{}
	for _, class := range slices.Sorted(maps.Keys(res.Short)) {
		why := res.Short[class]
		reasons := make([]string, len(why))
		for i, w := range why {
			said[w] = true
			reasons[i] = strings.TrimPrefix(w, "class "+class+": ")
		}
		a := res.After[class]
		var tiers []string
		if a.HotTarget > 0 || a.Hot > 0 {
			tiers = append(tiers, fmt.Sprintf("%d of %d hot", a.Hot, a.HotTarget))
		}
		if a.StoppedTarget > 0 || a.Stopped > 0 {
			tiers = append(tiers, fmt.Sprintf("%d of %d stopped", a.Stopped, a.StoppedTarget))
		}
		diags.AddWarning(fmt.Sprintf("Pool %s: class %s lacks warm runners", name, class),
			fmt.Sprintf("The fill left class %s with %s runners: %s. %s",
				class, strings.Join(tiers, " and "), strings.Join(reasons, "; "), next))
	}
	for _, note := range res.Notes {
		if !said[note] {
			diags.AddWarning(fmt.Sprintf("Pool %s: warm targets", name), note)
		}
	}
	if err == nil {
		return nil
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	var rest []error
	for _, e := range errs {
		if !said[e.Error()] {
			rest = append(rest, e)
		}
	}
	return errors.Join(rest...)
}
