package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
)

// configuredData unpacks what Configure handed over; nil before configuration.
func configuredData(v any, diags *diag.Diagnostics) *providerData {
	if v == nil {
		return nil
	}
	data, ok := v.(*providerData)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("Expected *providerData, got %T. This is a bug in the provider.", v))
	}
	return data
}

// claimer runs the pool logic with the provider's clients, logging to ctx;
// what goes wrong without failing the operation (metrics not published)
// is only logged.
func (d *providerData) claimer(ctx context.Context) *claim.Claimer {
	c := d.clients
	return &claim.Claimer{DynamoDB: c.DynamoDB, SQS: c.SQS, EC2: c.EC2, GitHub: d.github, StoredGitHub: d.storedGitHub, DefaultTags: d.defaultTags, Log: tflogAdapter(ctx),
		Metrics: &metrics.Publisher{Logs: c.Logs}}
}

// warnedClaimer is claimer whose warnings are collected, for the
// operation's diagnostics (warnings.into).
func (d *providerData) warnedClaimer(ctx context.Context) (*claim.Claimer, *claim.Warnings) {
	c := d.claimer(ctx)
	w := &claim.Warnings{}
	c.Warn = w.Add
	return c, w
}

// claimService is how the claim resource reaches its pool, with the pool
// logic's methods: claim.Claimer directly, or broker.Client through the
// pool's broker.
type claimService interface {
	Create(ctx context.Context, req claim.Request) (*claim.Result, error)
	Read(ctx context.Context, pool, runID string) (claim.Record, []claim.Instance, bool, error)
	Release(ctx context.Context, pool, runID string) ([]string, error)
}

// warnedClaims makes and releases claims: through the broker when the
// provider has one, else directly (warnedClaimer); warnings are
// collected.
func (d *providerData) warnedClaims(ctx context.Context) (claimService, *claim.Warnings) {
	if d.broker == nil {
		return d.warnedClaimer(ctx)
	}
	c, w := *d.broker, &claim.Warnings{}
	c.Warn = w.Add
	return &c, w
}

// claimReads reads claims: through the broker when the provider has one,
// else directly with clients that refuse writes (reader).
func (d *providerData) claimReads(ctx context.Context) (claimService, *claim.Warnings) {
	if d.broker == nil {
		return d.reader(ctx), &claim.Warnings{}
	}
	return d.warnedClaims(ctx)
}

// addWarnings adds an operation's warnings to diags.
func addWarnings(diags *diag.Diagnostics, w *claim.Warnings) {
	for _, x := range w.List() {
		diags.AddWarning(x[0], x[1])
	}
}
