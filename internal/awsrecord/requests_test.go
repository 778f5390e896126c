package awsrecord

import (
	"context"
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
			base: Call{Role: RoleClaims, Partition: "aws", Region: "eu-west-1", Account: "000000000000"}}
		calls := q.calls(context.Background(), r)
		if len(calls) != 1 || calls[0].Action != "logs:"+action || calls[0].Resource != want {
			t.Errorf("%s: %v, want logs:%s on %s", action, calls, action, want)
		}
	}
}
