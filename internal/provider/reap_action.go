package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var _ action.ActionWithConfigure = (*reapAction)(nil)

// NewReapAction is the ec2runners_reap action (Terraform 1.14+).
func NewReapAction() action.Action { return &reapAction{} }

type reapAction struct{ data *providerData }

// poolActionModel is the configuration of the actions on a pool.
type poolActionModel struct {
	Pool types.String `tfsdk:"pool"`
}

// poolActionAttributes are the attributes of the actions on a pool.
func poolActionAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"pool": schema.StringAttribute{
			Required: true, Description: "Name of the pool, 3-40 characters of `A-Z a-z 0-9 _ -`.",
			Validators: poolNameValidators(),
		},
	}
}

// actionPool reads the configuration of the pool an action is invoked on;
// ok is false when the error is in diags.
func (d *providerData) actionPool(ctx context.Context, req action.InvokeRequest, verb string, diags *diag.Diagnostics) (cfg protocol.PoolConfig, ok bool) {
	var m poolActionModel
	if diags.Append(req.Config.Get(ctx, &m)...); diags.HasError() {
		return cfg, false
	}
	name := m.Pool.ValueString()
	cfg, err := pool.ReadConfig(ctx, d.clients.DynamoDB, name)
	if errors.Is(err, pool.ErrNotFound) {
		err = fmt.Errorf("pool %s does not exist", name)
	}
	if err != nil {
		diags.AddError(fmt.Sprintf("Cannot %s pool %s", verb, name), err.Error())
		return cfg, false
	}
	return cfg, true
}

func (a *reapAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_reap"
}

func (a *reapAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Reaps a pool now, as claims, releases and the pool's applies do at most once a minute. " +
			"It terminates runners past their deadline and instances without a live record, closes the records of vanished instances, and deletes the records of claims whose apply crashed. " +
			"It releases, as their destroy would, the claims whose GitHub Actions workflow run ended without releasing them (see the claim's `repository`). " +
			"It reports what it did as progress messages. " +
			"Invoke it with `terraform apply -invoke=action.ec2runners_reap.<name>`, or from an `action_trigger`. " +
			"A pool's broker runs the same reap, and then the `ec2runners_warm` action's fill, on the pool stack's schedule.",
		Attributes: poolActionAttributes(),
	}
}

func (a *reapAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	a.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (a *reapAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	cfg, ok := a.data.actionPool(ctx, req, "reap", &resp.Diagnostics)
	if !ok {
		return
	}
	name := cfg.Name
	resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("Reaping pool %s", name)})
	c, warned := a.data.warnedClaimer(ctx)
	res, err := maintenance.Reap(ctx, c, name)
	addWarnings(&resp.Diagnostics, warned)
	for _, msg := range reapReport(name, res) {
		resp.SendProgress(action.InvokeProgressEvent{Message: msg})
	}
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot reap pool %s", name), err.Error())
	} else if res.TerminateFail != nil {
		resp.Diagnostics.AddWarning(fmt.Sprintf("Pool %s: some instances could not be terminated", name),
			fmt.Sprintf("Their records are terminated; the next reap terminates them as orphans: %v", res.TerminateFail))
	}
}

// reapReport says what a reap did, a message per kind of cleanup.
func reapReport(name string, res maintenance.ReapResult) []string {
	if res.Empty() {
		return []string{fmt.Sprintf("Pool %s: nothing to reap", name)}
	}
	var msgs []string
	add := func(what string, items []string) {
		if len(items) > 0 {
			msgs = append(msgs, fmt.Sprintf("Pool %s: %s (%d): %s", name, what, len(items), strings.Join(items, ", ")))
		}
	}
	add("terminated runners past their deadline", res.Expired)
	add("terminated instances without a live record", res.Orphans)
	add("closed the records of instances gone from EC2", res.Vanished)
	add("deleted claim records of crashed attempts", res.StaleClaims)
	add("released the claims of ended workflow runs", res.EndedRuns)
	add("held the runners of claims whose jobs still run on them", res.HeldRuns)
	add("revived released claims whose label a re-run's job waits for", res.RevivedRuns)
	add("skipped unreadable records", res.CorruptItems)
	if res.TerminateFail != nil {
		msgs = append(msgs, fmt.Sprintf("Pool %s: terminating failed, the next reap retries: %v", name, res.TerminateFail))
	}
	return msgs
}
