package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
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

// claimer runs the pool logic with the provider's clients, logging to ctx.
func (d *providerData) claimer(ctx context.Context) *claim.Claimer {
	c := d.clients
	return &claim.Claimer{DynamoDB: c.DynamoDB, SQS: c.SQS, EC2: c.EC2, GitHub: d.github, DefaultTags: d.defaultTags, Log: tflogAdapter(ctx)}
}
