// Package awslimits holds limits that AWS enforces on requests and the
// emulator does not (moto takes user data of any size), as data: the
// service, actions and parameter each rule applies to, its check, AWS's own
// answer to a request past it, and where that limit and answer are
// documented or reported.
//
// Two places apply the rules: the emulator's front (internal/emulator),
// which every test, the demo and the Terraform runs they start talk to, and
// the in-memory fakes (internal/awsfake), which check their typed inputs.
// So a fixture, an example or a rendered user data that grows past a limit
// fails the tests as it would fail a user's first apply.
//
// Adding a limit: one more Rule in Rules, with its Source, and a test of
// its refusal through the front (internal/emulator's front_test.go).
package awslimits

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"

	"github.com/aws/smithy-go"
)

// Refusal is AWS's answer to a request past a limit: the HTTP status and
// the error's code and message, word for word.
type Refusal struct {
	Status  int
	Code    string
	Message string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// APIError is the refusal as an AWS SDK client returns it (for an EC2
// query-protocol error the SDK builds exactly this, wrapped in its
// operation error).
func (r *Refusal) APIError() *smithy.GenericAPIError {
	return &smithy.GenericAPIError{Code: r.Code, Message: r.Message}
}

// Rule is one limit AWS enforces on one parameter of some actions.
type Rule struct {
	// Service is the SigV4 signing name of the service ("ec2").
	Service string
	// Actions are the API actions whose requests carry Param.
	Actions []string
	// Param is the parameter as the service's query protocol names it
	// (nested members joined by dots: "LaunchTemplateData.UserData").
	Param string
	// Check returns AWS's answer to a request whose Param is value, or nil
	// when AWS takes it.
	Check func(value string) *Refusal
	// Source is where the limit and AWS's answer are documented or
	// reported.
	Source string
}

// MaxUserDataBytes is EC2's limit on an instance's user data: 16 KB in raw
// form, before base64 (EC2 User Guide, "Work with instance user data",
// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html:
// "User data is limited to 16 KB, in raw form, before it is
// base64-encoded"). Base64 makes that at most 21848 characters.
const MaxUserDataBytes = 16 * 1024

// EC2's messages for user data past MaxUserDataBytes and for user data that
// is not base64. RunInstances ends them without a period, the launch
// template actions with one (see Rules).
var (
	userDataTooLong   = fmt.Sprintf("User data is limited to %d bytes", MaxUserDataBytes)
	userDataNotBase64 = "Invalid BASE64 encoding of user data"
)

// Rules are the limits the front and the fakes enforce.
//
// Not a rule here: "Member must have length less than or equal to 21847"
// (a ValidationError at 'userData') is Auto Scaling's answer to
// CreateLaunchConfiguration (its API model caps the base64 text at 21847
// characters), not EC2's: https://github.com/kubicorn/kubicorn/issues/667,
// https://github.com/banzaicloud/pipeline/issues/453.
var Rules = []Rule{
	{
		Service: "ec2", Actions: []string{"RunInstances"}, Param: "UserData",
		Check: userData("InvalidParameterValue", ""),
		Source: "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html (the limit); " +
			"HTTP 400 InvalidParameterValue \"User data is limited to 16384 bytes\": " +
			"https://github.com/deckhouse/deckhouse/issues/5949, https://github.com/FINRAOS/herd/issues/393; " +
			"\"Invalid BASE64 encoding of user data\": https://github.com/hashicorp/packer/issues/2616",
	},
	{
		// CreateLaunchTemplate validates LaunchTemplateData as
		// CreateLaunchTemplateVersion does: both answer invalid base64
		// with InvalidUserData.Malformed; the too-long answer is reported
		// for CreateLaunchTemplateVersion.
		Service: "ec2", Actions: []string{"CreateLaunchTemplate", "CreateLaunchTemplateVersion"}, Param: "LaunchTemplateData.UserData",
		Check: userData("InvalidUserData.Malformed", "."),
		Source: "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html and " +
			"https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RequestLaunchTemplateData.html (the limit); " +
			"HTTP 400 InvalidUserData.Malformed \"User data is limited to 16384 bytes.\" (CreateLaunchTemplateVersion): " +
			"https://github.com/github-aws-runners/terraform-aws-github-runner/issues/3700, " +
			"https://github.com/hashicorp/terraform-provider-aws/pull/49234; " +
			"\"Invalid BASE64 encoding of user data.\" (CreateLaunchTemplate): " +
			"https://github.com/awslabs/ec2-spot-workshops/issues/15, https://github.com/pulumi/pulumi-aws/issues/2284",
	},
}

// userData checks base64 user data as EC2 does: text that is not base64 is
// refused, and so is more than MaxUserDataBytes once decoded; code and the
// messages' end (end: "" or ".") are the action's.
func userData(code, end string) func(string) *Refusal {
	return func(value string) *Refusal {
		raw, err := base64.StdEncoding.DecodeString(value)
		switch {
		case err != nil:
			return &Refusal{Status: http.StatusBadRequest, Code: code, Message: userDataNotBase64 + end}
		case len(raw) > MaxUserDataBytes:
			return &Refusal{Status: http.StatusBadRequest, Code: code, Message: userDataTooLong + end}
		}
		return nil
	}
}

// Watches reports whether a rule applies to some action of service: the
// front reads only those requests.
func Watches(service string) bool {
	return slices.ContainsFunc(Rules, func(r Rule) bool { return r.Service == service })
}

// Check applies the rules of service's action to a request, whose
// parameters param looks up by Rule.Param, and returns AWS's answer to the
// first it breaks, or nil.
func Check(service, action string, param func(name string) (value string, ok bool)) *Refusal {
	for _, r := range Rules {
		if r.Service != service || !slices.Contains(r.Actions, action) {
			continue
		}
		if v, ok := param(r.Param); ok {
			if refusal := r.Check(v); refusal != nil {
				return refusal
			}
		}
	}
	return nil
}
