package provider

import (
	"cmp"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The environment's broker settings, when the provider block sets none.
const (
	envBrokerFunction = "EC2RUNNERS_BROKER_FUNCTION"
	envBrokerAudience = "EC2RUNNERS_BROKER_AUDIENCE"
)

// brokerModel is the provider's broker block.
type brokerModel struct {
	FunctionName types.String `tfsdk:"function_name"`
	Audience     types.String `tfsdk:"audience"`
}

func brokerBlock() schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: "The pool's broker: the Lambda function, deployed with the pool, through which a GitHub Actions job claims runners when its role may only invoke it (`lambda:InvokeFunction`). " +
			"With a broker, `ec2runners_claim` creates, reads, imports and destroys claims by invoking it with the job's OIDC token (the job needs `permissions: id-token: write`), and reads nothing of the pool's table itself: " +
			"the broker checks the token and the pool's `access`, and claims for the token's repository and workflow run. " +
			"Everything else the provider does (the pool resource, the data sources, the claim list resource, the actions) calls AWS directly, as without a broker. " +
			fmt.Sprintf("A claim runs in one Lambda invocation, which lasts at most %s: with a broker, a claim's create timeout defaults to that. ", protocol.FormatDuration(broker.MaxInvocationTime)) +
			"Without a function here or in `" + envBrokerFunction + "`, claims are made directly with the provider's AWS credentials.",
		Attributes: map[string]schema.Attribute{
			"function_name": schema.StringAttribute{
				Optional: true,
				Description: "The broker function's name (`ec2runners-broker-ci`), ARN (`arn:aws:lambda:<region>:<account>:function:<name>`) or partial ARN (`<account>:function:<name>`), optionally followed by `:<version or alias>`: a name is 1-64 letters, digits, `-` and `_`, the whole at most 170 characters. " +
					"A name is looked up in the provider's region. Default: `" + envBrokerFunction + "`.",
				Validators: []validator.String{brokerFunctionValidator()},
			},
			"audience": schema.StringAttribute{
				Optional: true,
				Description: "The audience the job's OIDC token is requested for, printable ASCII without spaces: the broker accepts only its own. " +
					"Default: `" + envBrokerAudience + "`, then `" + broker.DefaultAudience + "`.",
				Validators: []validator.String{brokerAudienceValidator()},
			},
		},
	}
}

// settings are the broker's function and audience, from the block
// and then the environment; function is "" when neither names one.
func (m *brokerModel) settings() (function, audience string, diags diag.Diagnostics) {
	if m == nil {
		m = &brokerModel{} // no block: the environment alone
	}
	for name, unknown := range map[string]bool{"function_name": m.FunctionName.IsUnknown(), "audience": m.Audience.IsUnknown()} {
		if unknown {
			diags.AddAttributeError(path.Root("broker").AtName(name), "Unknown provider setting",
				fmt.Sprintf("Attribute broker.%s must be known when Terraform plans: it cannot depend on a resource that is not created yet.", name))
		}
	}
	if diags.HasError() {
		return "", "", diags
	}
	// The block's values were validated at plan time; the environment's
	// are checked here.
	function = m.FunctionName.ValueString()
	if function == "" {
		function = os.Getenv(envBrokerFunction)
		if err := checkOptional(function, broker.ValidateFunction); err != nil {
			diags.AddAttributeError(path.Root("broker").AtName("function_name"), "Invalid "+envBrokerFunction,
				fmt.Sprintf("broker.function_name defaults to %s: %s. Set broker.function_name, or fix the variable.", envBrokerFunction, err))
		}
	}
	audience = m.Audience.ValueString()
	if audience == "" {
		audience = os.Getenv(envBrokerAudience)
		if err := checkOptional(audience, broker.ValidateAudience); err != nil {
			diags.AddAttributeError(path.Root("broker").AtName("audience"), "Invalid "+envBrokerAudience,
				fmt.Sprintf("broker.audience defaults to %s: %s. Set broker.audience, or fix the variable.", envBrokerAudience, err))
		}
	}
	if function == "" && !m.Audience.IsNull() {
		diags.AddAttributeError(path.Root("broker").AtName("function_name"), "Broker without a function",
			fmt.Sprintf("The broker block sets an audience but names no function: set broker.function_name (or %s) to the pool's broker function.", envBrokerFunction))
	}
	return function, cmp.Or(audience, broker.DefaultAudience), diags
}

// checkOptional checks a value that may be unset.
func checkOptional(v string, check func(string) error) error {
	if v == "" {
		return nil
	}
	return check(v)
}

func brokerFunctionValidator() validator.String {
	return ruleValidator{summary: "Invalid broker function", description: "must be " + broker.FunctionRule, check: broker.ValidateFunction}
}

func brokerAudienceValidator() validator.String {
	return ruleValidator{summary: "Invalid broker audience", description: "must be " + broker.AudienceRule, check: broker.ValidateAudience}
}
