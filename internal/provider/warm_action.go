package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
)

var _ action.ActionWithConfigure = (*warmAction)(nil)

// NewWarmAction is the ec2runners_warm action (Terraform 1.14+).
func NewWarmAction() action.Action { return &warmAction{} }

type warmAction struct{ data *providerData }

func (a *warmAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_warm"
}

func (a *warmAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Fills a pool's warm targets now, as the pool's apply does. " +
			"It first terminates warm runners of another launch template or version than the pool's, or past `max_runner_age`. " +
			"Then it launches, on-demand from the pool's `fleet` settings, what each class's targets in force lack. " +
			"It reports what it launched and terminated as progress messages. " +
			"A class it leaves below its targets is a warning that names the class and says why. " +
			"Invoke it with `terraform apply -invoke=action.ec2runners_warm.<name>`, or from an `action_trigger`. " +
			"Scheduled, run it a boot's time before a schedule window's runs: it fills the targets in force when it runs. " +
			"A pool's broker runs the same fill, after the `ec2runners_reap` action's reap, on the pool stack's schedule.",
		Attributes: poolActionAttributes(),
	}
}

func (a *warmAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	a.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (a *warmAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	cfg, ok := a.data.actionPool(ctx, req, "warm", &resp.Diagnostics)
	if !ok {
		return
	}
	name := cfg.Name
	if len(cfg.Warm) == 0 {
		resp.Diagnostics.AddWarning(fmt.Sprintf("Pool %s has no warm targets", name), "Set the pool's warm attribute for the action to fill anything.")
		return
	}
	resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("Warming pool %s", name)})
	c, warned := a.data.warnedClaimer(ctx)
	res, err := maintenance.Warm(ctx, c, name, maintenance.WarmOptions{Timings: claim.DefaultTimings()})
	addWarnings(&resp.Diagnostics, warned)
	for _, msg := range warmReport(name, res) {
		resp.SendProgress(action.InvokeProgressEvent{Message: msg})
	}
	const next = "Invoke the action again once that is fixed."
	if err := warmDiagnostics(name, res, err, next, &resp.Diagnostics); err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot warm pool %s", name), err.Error())
	}
}

// warmReport says what a fill did: each class's counts before and after,
// and what it launched and retired (what went wrong, and why, are the
// action's warnings).
func warmReport(name string, res maintenance.WarmResult) []string {
	var msgs []string
	for _, class := range slices.Sorted(maps.Keys(res.After)) {
		b, a := res.Before[class], res.After[class]
		msgs = append(msgs, fmt.Sprintf("Pool %s, class %s: hot %d -> %d of %d, stopped %d -> %d of %d",
			name, class, b.Hot, a.Hot, a.HotTarget, b.Stopped, a.Stopped, a.StoppedTarget))
	}
	if len(res.Launched) > 0 {
		msgs = append(msgs, fmt.Sprintf("Pool %s: launched (%d): %s", name, len(res.Launched), strings.Join(res.Launched, ", ")))
	}
	if len(res.Retired) > 0 {
		msgs = append(msgs, fmt.Sprintf("Pool %s: retired outdated runners (%d): %s", name, len(res.Retired), strings.Join(res.Retired, ", ")))
	}
	return msgs
}
