package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
)

// TestBrokerSettings: the block wins over the environment, the
// environment's values are checked as the block's are, and an audience
// alone names no broker.
func TestBrokerSettings(t *testing.T) {
	for name, tc := range map[string]struct {
		block                  *brokerModel
		env                    map[string]string
		function, audience     string
		errorSummary, errorHas string
	}{
		"none":                 {nil, nil, "", broker.DefaultAudience, "", ""},
		"empty block":          {&brokerModel{}, nil, "", broker.DefaultAudience, "", ""},
		"environment":          {nil, map[string]string{envBrokerFunction: "ci-broker", envBrokerAudience: "ci.example"}, "ci-broker", "ci.example", "", ""},
		"block over env":       {&brokerModel{FunctionName: types.StringValue("arn:aws:lambda:eu-west-1:123456789012:function:b"), Audience: types.StringValue("a")}, map[string]string{envBrokerFunction: "ci-broker", envBrokerAudience: "ci.example"}, "arn:aws:lambda:eu-west-1:123456789012:function:b", "a", "", ""},
		"env function invalid": {nil, map[string]string{envBrokerFunction: "ci broker"}, "", "", "Invalid EC2RUNNERS_BROKER_FUNCTION", `broker.function_name defaults to EC2RUNNERS_BROKER_FUNCTION: "ci broker" is not a Lambda function's name`},
		"env audience invalid": {nil, map[string]string{envBrokerFunction: "ci-broker", envBrokerAudience: "two words"}, "", "", "Invalid EC2RUNNERS_BROKER_AUDIENCE", `"two words" is not printable ASCII characters without spaces`},
		"audience alone":       {&brokerModel{Audience: types.StringValue("a")}, nil, "", "", "Broker without a function", "set broker.function_name (or EC2RUNNERS_BROKER_FUNCTION)"},
		"unknown function":     {&brokerModel{FunctionName: types.StringUnknown()}, nil, "", "", "Unknown provider setting", "broker.function_name must be known"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(envBrokerFunction, tc.env[envBrokerFunction])
			t.Setenv(envBrokerAudience, tc.env[envBrokerAudience])
			function, audience, diags := tc.block.settings()
			if tc.errorSummary != "" {
				if !hasError(diags, tc.errorSummary, tc.errorHas) {
					t.Fatalf("diagnostics %v, want %q: ...%s...", diags, tc.errorSummary, tc.errorHas)
				}
				return
			}
			if diags.HasError() || function != tc.function || audience != tc.audience {
				t.Errorf("function %q, audience %q, diagnostics %v; want %q, %q", function, audience, diags, tc.function, tc.audience)
			}
		})
	}
}

func hasError(diags diag.Diagnostics, summary, detail string) bool {
	for _, d := range diags.Errors() {
		if d.Summary() == summary && strings.Contains(d.Detail(), detail) {
			return true
		}
	}
	return false
}

// TestCheckBrokerRepository: a claim through the broker may name only the
// job's repository, which is the token's.
func TestCheckBrokerRepository(t *testing.T) {
	for _, tc := range []struct {
		repository types.String
		job        string
		refused    bool
	}{
		{types.StringUnknown(), "octo/app", false},
		{types.StringNull(), "octo/app", false},
		{types.StringValue("octo/app"), "octo/app", false},
		{types.StringValue("Octo/App"), "octo/app", false},
		{types.StringValue("octo/other"), "", false}, // outside Actions the token request fails instead
		{types.StringValue("octo/other"), "octo/app", true},
	} {
		var diags diag.Diagnostics
		checkBrokerRepository(tc.repository, tc.job, &diags)
		if diags.HasError() != tc.refused {
			t.Errorf("repository %s in a job of %q: refused %v, want %v (%v)", tc.repository, tc.job, diags.HasError(), tc.refused, diags)
		}
	}
}
