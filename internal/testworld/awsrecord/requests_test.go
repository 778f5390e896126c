package awsrecord

import (
	"context"
	"net/url"
	"testing"
)

// CloudWatch Logs authorizes a stream's writes on the stream's ARN and a
// stream's creation on its log group's, where the policies pin them.
func TestLogsCalls(t *testing.T) {
	r := &recorder{partition: "aws", account: "000000000000"}
	for action, want := range map[string]string{
		"PutLogEvents":    "arn:aws:logs:eu-west-1:000000000000:log-group:/ec2runners/ci:log-stream:ci",
		"CreateLogStream": "arn:aws:logs:eu-west-1:000000000000:log-group:/ec2runners/ci",
	} {
		q := request{service: "logs", action: action, body: []byte(`{"logGroupName":"/ec2runners/ci","logStreamName":"ci","logEvents":[]}`),
			base: Call{Role: RoleBroker, Partition: "aws", Region: "eu-west-1", Account: "000000000000"}}
		calls := q.calls(context.Background(), r)
		if len(calls) != 1 || calls[0].Action != "logs:"+action || calls[0].Resource != want {
			t.Errorf("%s: %v, want logs:%s on %s", action, calls, action, want)
		}
	}
}

// SSM and Secrets Manager authorize a read on the parameter's or the
// secret's ARN, however the call names it.
func TestCredentialReads(t *testing.T) {
	r := &recorder{partition: "aws", account: "000000000000"}
	for _, tc := range []struct{ service, action, body, want string }{
		{"ssm", "GetParameter", `{"Name":"/ec2runners/ci/github","WithDecryption":true}`, "arn:aws:ssm:eu-west-1:000000000000:parameter/ec2runners/ci/github"},
		{"ssm", "GetParameter", `{"Name":"/ec2runners/ci/github:3"}`, "arn:aws:ssm:eu-west-1:000000000000:parameter/ec2runners/ci/github"},
		{"ssm", "GetParameter", `{"Name":"ci-github"}`, "arn:aws:ssm:eu-west-1:000000000000:parameter/ci-github"},
		{"ssm", "GetParameter", `{"Name":"arn:aws:ssm:eu-west-1:000000000000:parameter/x"}`, "arn:aws:ssm:eu-west-1:000000000000:parameter/x"},
		{"secretsmanager", "GetSecretValue", `{"SecretId":"ec2runners/ci/github"}`, "arn:aws:secretsmanager:eu-west-1:000000000000:secret:ec2runners/ci/github-??????"},
		{"secretsmanager", "GetSecretValue", `{"SecretId":"arn:aws:secretsmanager:eu-west-1:000000000000:secret:x-AbCdEf"}`, "arn:aws:secretsmanager:eu-west-1:000000000000:secret:x-AbCdEf"},
	} {
		q := request{service: tc.service, action: tc.action, body: []byte(tc.body),
			base: Call{Role: RoleBroker, Partition: "aws", Region: "eu-west-1", Account: "000000000000"}}
		calls := q.calls(context.Background(), r)
		if len(calls) != 1 || calls[0].Action != tc.service+":"+tc.action || calls[0].Resource != tc.want {
			t.Errorf("%s: %v, want %s:%s on %s", tc.body, calls, tc.service, tc.action, tc.want)
		}
	}
}

// Lambda authorizes an Invoke as lambda:InvokeFunction on the function's
// ARN, qualified as invoked, however the call names the function.
func TestLambdaInvokes(t *testing.T) {
	const function = "arn:aws:lambda:eu-west-1:000000000000:function:ci-broker"
	for _, tc := range []struct{ path, want string }{
		{"/2015-03-31/functions/ci-broker/invocations", function},
		{"/2015-03-31/functions/ci-broker/invocations?Qualifier=live", function + ":live"},
		{"/2015-03-31/functions/ci-broker%3A3/invocations", function + ":3"},
		{"/2015-03-31/functions/000000000000%3Afunction%3Aci-broker/invocations", function},
		{"/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-west-2%3A111111111111%3Afunction%3Aci-broker%3A%24LATEST/invocations",
			"arn:aws:lambda:us-west-2:111111111111:function:ci-broker:$LATEST"},
	} {
		u, err := url.Parse(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		q := request{service: "lambda", action: "Invoke", url: u, body: []byte(`{"operation":"claim"}`),
			base: Call{Role: RoleCI, Partition: "aws", Region: "eu-west-1", Account: "000000000000"}}
		calls := q.calls(context.Background(), &recorder{partition: "aws", account: "000000000000"})
		if len(calls) != 1 || calls[0].Action != "lambda:InvokeFunction" || calls[0].API != "Invoke" || calls[0].Resource != tc.want {
			t.Errorf("%s: %v, want lambda:InvokeFunction on %s", tc.path, calls, tc.want)
		}
	}
}
