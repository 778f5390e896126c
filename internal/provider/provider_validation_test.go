package provider

import (
	"fmt"
	"strings"
	"testing"
)

// TestAccProvider_invalidInput: every provider argument refuses bad values
// when Terraform plans, naming the argument and what it accepts.
func TestAccProvider_invalidInput(t *testing.T) {
	const dataSource = `
data "ec2runners_runner_script" "test" {
  pool         = "ci-runners"
  github_owner = "octo"
}`
	for name, tc := range map[string]struct{ block, want string }{
		"bad region":                {`region = "Mars"`, `Attribute region must be an AWS region such as eu-west-1, got: Mars`},
		"region with upper case":    {`region = "EU-WEST-1"`, `Attribute region must be an AWS region such as eu-west-1, got: EU-WEST-1`},
		"empty region":              {`region = ""`, `Attribute region must be an AWS region such as eu-west-1, got: `},
		"empty profile":             {`profile = ""`, `Attribute profile string length must be at least 1, got: 0`},
		"unknown profile":           {`profile = "` + randomName("no-such-profile") + `"`, `loading AWS configuration: failed to get shared config profile, no-such-profile-`},
		"empty shared config file":  {`shared_config_files = ["", "/etc/aws/config"]`, `Attribute shared_config_files\[0\] string length must be at least 1, got: 0`},
		"empty credentials file":    {`shared_credentials_files = [""]`, `Attribute shared_credentials_files\[0\] string length must be at least 1, got: 0`},
		"config files not a list":   {`shared_config_files = "/etc/aws/config"`, `Inappropriate value for attribute "shared_config_files": list of string required`},
		"access key without secret": {`access_key = "AKIAEXAMPLE"`, `Attribute "secret_key" must be specified when "access_key" is specified`},
		"secret without access key": {`secret_key = "secret"`, `Attribute "access_key" must be specified when "secret_key" is specified`},
		"token without access key":  {`token = "session"`, `Attribute "access_key" must be specified when "token" is specified`},
		"zero retries":              {`max_retries = 0`, `Attribute max_retries value must be at least 1, got: 0`},
		"negative retries":          {`max_retries = -3`, `Attribute max_retries value must be at least 1, got: -3`},
		"retries not a number":      {`max_retries = "many"`, `Inappropriate value for attribute "max_retries": a number is required`},
		"assume role without ARN": {`assume_role {
    session_name = "ci"
  }`, `assume_role.role_arn is required when the assume_role block is present`},
		"role ARN not an ARN": {`assume_role {
    role_arn = "ci-deployer"
  }`, `Attribute assume_role.role_arn must be an IAM role ARN such as arn:aws:iam::123456789012:role/ci, got: ci-deployer`},
		"user ARN for a role": {`assume_role {
    role_arn = "arn:aws:iam::123456789012:user/ci"
  }`, `Attribute assume_role.role_arn must be an IAM role ARN`},
		"bad session name": {`assume_role {
    role_arn     = "arn:aws:iam::123456789012:role/ci"
    session_name = "my session"
  }`, `Attribute assume_role.session_name must be 2-64 characters of letters, digits and \+ = , . @ _ -, got: my session`},
		"session name too long": {`assume_role {
    role_arn     = "arn:aws:iam::123456789012:role/ci"
    session_name = "` + strings.Repeat("s", 65) + `"
  }`, `Attribute assume_role.session_name must be 2-64 characters`},
		"external id too short": {`assume_role {
    role_arn    = "arn:aws:iam::123456789012:role/ci"
    external_id = "x"
  }`, `Attribute assume_role.external_id string length must be between 2 and 1224, got: 1`},
		"external id with a space": {`assume_role {
    role_arn    = "arn:aws:iam::123456789012:role/ci"
    external_id = "my id"
  }`, `Attribute assume_role.external_id must be 2-1224 characters of letters, digits and \+ = , . @ : / _ -, got: my id`},
		"assume role too short": {`assume_role {
    role_arn = "arn:aws:iam::123456789012:role/ci"
    duration = "5m"
  }`, `Attribute assume_role.duration must be a duration such as .90s., .7m. or .1h30m., from 15m to 12h, got "5m"`},
		"assume role duration not a duration": {`assume_role {
    role_arn = "arn:aws:iam::123456789012:role/ci"
    duration = "1 hour"
  }`, `Attribute assume_role.duration must be a duration such as .90s., .7m. or .1h30m., from 15m to 12h, got "1 hour"`},
		"bad DynamoDB endpoint": {`endpoints {
    dynamodb = "localhost:4566"
  }`, `Attribute endpoints.dynamodb must be an http:// or https:// URL, got: localhost:4566`},
		"bad EC2 endpoint": {`endpoints {
    ec2 = "ftp://localhost:4566"
  }`, `Attribute endpoints.ec2 must be an http:// or https:// URL, got: ftp://localhost:4566`},
		"endpoint with a space": {`endpoints {
    sqs = "http://local host:4566"
  }`, `Attribute endpoints.sqs must be an http:// or https:// URL`},
		"bad Lambda endpoint": {`endpoints {
    lambda = "lambda.eu-west-1.amazonaws.com"
  }`, `Attribute endpoints.lambda must be an http:// or https:// URL, got: lambda.eu-west-1.amazonaws.com`},
		"broker function not a function": {`broker {
    function_name = "arn:aws:iam::123456789012:role/broker"
  }`, `Attribute broker.function_name: "arn:aws:iam::123456789012:role/broker" is not a Lambda function's name \(1-64 letters, digits, '-' and '_'\), ARN`},
		"broker function name too long": {`broker {
    function_name = "` + strings.Repeat("b", 65) + `"
  }`, `Attribute broker.function_name: "b+" is not a Lambda function's name`},
		"broker audience with a space": {`broker {
    function_name = "ci-broker"
    audience      = "ec2 runners"
  }`, `Attribute broker.audience: "ec2 runners" is not printable ASCII characters without spaces, such as ec2runners`},
		"broker audience without a function": {`broker {
    audience = "ec2runners"
  }`, `The broker block sets an audience but names no function: set broker.function_name \(or EC2RUNNERS_BROKER_FUNCTION\)`},
		"reserved default tag": {`default_tags {
    tags = { "aws:owner" = "platform" }
  }`, `Attribute default_tags.tags: tag key "aws:owner" starts with aws:, which AWS reserves; tag keys must be 1-128 characters and values at most 256`},
		"default tag value with a bad character": {`default_tags {
    tags = { owner = "platform;drop" }
  }`, `Attribute default_tags.tags: the value of tag "owner" has a character AWS does not allow; tag keys must be 1-128 characters and values at most 256, of letters, digits, spaces and _ . : / = \+ - @`},
		"too many default tags": {`default_tags {
    tags = {` + manyTags(48) + `}
  }`, `Attribute default_tags.tags map must contain at most 47 elements, got: 48`},
		"default tags not a map": {`default_tags {
    tags = ["owner"]
  }`, `Inappropriate value for attribute "tags": map of string required`},
	} {
		t.Run(name, func(t *testing.T) {
			expectPlanError(t, "provider \"ec2runners\" {\n  "+tc.block+"\n}\n"+dataSource, tc.want)
		})
	}
}

// TestAccPoolDataSource_invalidInput: the data source checks the pool name.
func TestAccPoolDataSource_invalidInput(t *testing.T) {
	for name, tc := range map[string]struct{ args, want string }{
		"name with a space": {`name = "my pool"`, `Attribute name may contain only letters, digits, '_' and '-', got: my pool`},
		"empty name":        {`name = ""`, `Attribute name string length must be between 3 and 40, got: 0`},
		"name too short":    {`name = "ci"`, `Attribute name string length must be between 3 and 40, got: 2`},
		"name too long":     {`name = "` + strings.Repeat("p", 41) + `"`, `Attribute name string length must be between 3 and 40, got: 41`},
		"no name":           {``, `The argument "name" is required, but no definition was found`},
		"read-only table":   {"name = \"okay\"\n  table_name = \"okay\"", `(?s)Invalid Configuration for Read-Only Attribute.*table_name = "okay"`},
	} {
		t.Run(name, func(t *testing.T) {
			expectPlanError(t, "data \"ec2runners_pool\" \"test\" {\n  "+tc.args+"\n}", tc.want)
		})
	}
}

// manyTags is n tags in HCL: k00 = "v", k01 = "v", ...
func manyTags(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " k%02d = %q,", i, "v")
	}
	return b.String()
}
