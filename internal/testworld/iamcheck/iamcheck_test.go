package iamcheck

import (
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
)

const (
	account  = "000000000000"
	self     = "arn:aws:ec2:us-east-1:" + account + ":instance/i-0aaa"
	other    = "arn:aws:ec2:us-east-1:" + account + ":instance/i-0bbb"
	table    = "arn:aws:dynamodb:us-east-1:" + account + ":table/pool1"
	queue    = "arn:aws:sqs:us-east-1:" + account + ":pool1-large"
	poolName = "pool1"
	// The log group of pool1's metrics, as examples/complete names it, and
	// pool1's stream in it.
	logGroup  = "arn:aws:logs:us-east-1:" + account + ":log-group:/ec2runners/pool1"
	logStream = logGroup + ":log-stream:pool1"
	// pool1's GitHub credential, as the documents name it.
	credential = "arn:aws:ssm:us-east-1:" + account + ":parameter/ec2runners/pool1/github"
)

func call(role, action, resource string, ctx map[string][]string) awsrecord.Call {
	if role == awsrecord.RoleAgent {
		if ctx == nil {
			ctx = map[string][]string{}
		}
		ctx[awsrecord.KeySourceInstance] = []string{self}
	}
	return awsrecord.Call{Role: role, Action: action, Resource: resource, Partition: "aws", Region: "us-east-1", Account: account, Context: ctx}
}

func leading(keys ...string) map[string][]string {
	return map[string][]string{awsrecord.KeyLeadingKeys: keys}
}

func tagged(pool string) map[string][]string {
	return map[string][]string{awsrecord.KeyPoolTag: {pool}}
}

// documents are the repository's policies.
func documents(t *testing.T) []Policy {
	t.Helper()
	policies, err := Documents("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return policies
}

// Each documented policy pins what the documents promise: checked with
// calls a role makes (granted) and the ones next to them it must not make.
func TestDocumentedPoliciesPinTheirRoles(t *testing.T) {
	cases := []struct {
		name string
		call awsrecord.Call
		want bool
	}{
		{"agent reads an instance record", call(awsrecord.RoleAgent, "dynamodb:GetItem", table, leading("TYPE#INSTANCE")), true},
		{"agent writes its heartbeat", call(awsrecord.RoleAgent, "dynamodb:PutItem", table, leading("AGENT#"+self)), true},
		{"agent reads its tokens", call(awsrecord.RoleAgent, "dynamodb:GetItem", table, leading("AGENT#"+self)), true},
		{"agent terminates itself", call(awsrecord.RoleAgent, "ec2:TerminateInstances", self, tagged(poolName)), true},
		{"agent writes another's heartbeat", call(awsrecord.RoleAgent, "dynamodb:PutItem", table, leading("AGENT#"+other)), false},
		{"agent reads another's tokens", call(awsrecord.RoleAgent, "dynamodb:GetItem", table, leading("AGENT#"+other)), false},
		{"agent reads the pool's config and tokens", call(awsrecord.RoleAgent, "dynamodb:GetItem", table, leading("TYPE#METADATA")), false},
		{"agent writes an instance record", call(awsrecord.RoleAgent, "dynamodb:PutItem", table, leading("TYPE#INSTANCE")), false},
		{"agent terminates another instance", call(awsrecord.RoleAgent, "ec2:TerminateInstances", other, tagged(poolName)), false},
		{"agent terminates itself outside the pool", call(awsrecord.RoleAgent, "ec2:TerminateInstances", self, tagged("pool2")), false},
		{"agent stops itself", call(awsrecord.RoleAgent, "ec2:StopInstances", self, tagged(poolName)), true},
		{"agent stops another instance", call(awsrecord.RoleAgent, "ec2:StopInstances", other, tagged(poolName)), false},
		{"agent stops itself outside the pool", call(awsrecord.RoleAgent, "ec2:StopInstances", self, tagged("pool2")), false},
		{"agent starts an instance", call(awsrecord.RoleAgent, "ec2:StartInstances", other, tagged(poolName)), false},
		{"agent reads a queue", call(awsrecord.RoleAgent, "sqs:ReceiveMessage", queue, nil), false},
		{"claim writes a claim record", call(awsrecord.RoleClaims, "dynamodb:PutItem", table, leading("TYPE#CLAIM")), true},
		{"claim hands tokens to runners", call(awsrecord.RoleClaims, "dynamodb:BatchWriteItem", table, leading("AGENT#"+self, "AGENT#"+other)), true},
		{"claim rewrites the pool's config", call(awsrecord.RoleClaims, "dynamodb:PutItem", table, leading("TYPE#METADATA")), false},
		{"claim batch-writes the config among tokens", call(awsrecord.RoleClaims, "dynamodb:BatchWriteItem", table, leading("AGENT#"+self, "TYPE#METADATA")), false},
		{"claim makes held messages visible again", call(awsrecord.RoleClaims, "sqs:ChangeMessageVisibility", queue, nil), true},
		{"claim terminates a pool instance", call(awsrecord.RoleClaims, "ec2:TerminateInstances", other, tagged(poolName)), true},
		{"claim terminates an instance of no pool", call(awsrecord.RoleClaims, "ec2:TerminateInstances", other, nil), false},
		{"claim tags what it launches", call(awsrecord.RoleClaims, "ec2:CreateTags", "arn:aws:ec2:us-east-1:"+account+":instance/*", map[string][]string{awsrecord.KeyCreateAction: {"CreateFleet"}}), true},
		{"claim tags an existing instance", call(awsrecord.RoleClaims, "ec2:CreateTags", other, tagged("pool2")), false},
		{"claim launches a template of another pool", call(awsrecord.RoleClaims, "ec2:CreateFleet", "arn:aws:ec2:us-east-1:"+account+":launch-template/lt-1", tagged("pool2")), false},
		{"claim launches the pool's template", call(awsrecord.RoleClaims, "ec2:CreateFleet", "arn:aws:ec2:us-east-1:"+account+":launch-template/lt-1", tagged(poolName)), true},
		{"claim deletes the table", call(awsrecord.RoleClaims, "dynamodb:DeleteTable", table, nil), false},
		{"claim deletes a queue", call(awsrecord.RoleClaims, "sqs:DeleteQueue", queue, nil), false},
		{"pool management describes instances", call(awsrecord.RolePoolManagement, "ec2:DescribeInstances", "*", nil), true},
		{"pool management terminates an instance of no pool", call(awsrecord.RolePoolManagement, "ec2:TerminateInstances", other, nil), false},
		{"pool management creates its pool's log stream", call(awsrecord.RolePoolManagement, "logs:CreateLogStream", logGroup, nil), true},
		{"pool management publishes its pool's metrics", call(awsrecord.RolePoolManagement, "logs:PutLogEvents", logStream, nil), true},
		{"pool management publishes into another pool's stream", call(awsrecord.RolePoolManagement, "logs:PutLogEvents", logGroup+":log-stream:pool2", nil), false},
		{"claim publishes its pool's metrics", call(awsrecord.RoleClaims, "logs:PutLogEvents", logStream, nil), true},
		{"claim publishes into another pool's stream", call(awsrecord.RoleClaims, "logs:PutLogEvents", logGroup+":log-stream:pool2", nil), false},
		{"claim publishes into another log group", call(awsrecord.RoleClaims, "logs:PutLogEvents", "arn:aws:logs:us-east-1:"+account+":log-group:/other:log-stream:pool1", nil), false},
		{"claim creates a log stream", call(awsrecord.RoleClaims, "logs:CreateLogStream", logGroup, nil), false},
		{"agent publishes metrics", call(awsrecord.RoleAgent, "logs:PutLogEvents", logStream, nil), false},
		{"claim reads its pool's GitHub credential", call(awsrecord.RoleClaims, "ssm:GetParameter", credential, nil), true},
		{"claim reads another pool's GitHub credential", call(awsrecord.RoleClaims, "ssm:GetParameter", "arn:aws:ssm:us-east-1:"+account+":parameter/ec2runners/pool2/github", nil), false},
		{"claim reads another parameter", call(awsrecord.RoleClaims, "ssm:GetParameter", "arn:aws:ssm:us-east-1:"+account+":parameter/ec2runners/pool1/other", nil), false},
		{"claim reads its pool's GitHub secret", call(awsrecord.RoleClaims, "secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:"+account+":secret:ec2runners/pool1/github-??????", nil), true},
		{"claim reads another pool's GitHub secret", call(awsrecord.RoleClaims, "secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:"+account+":secret:ec2runners/pool2/github-??????", nil), false},
		{"agent reads the GitHub secret", call(awsrecord.RoleAgent, "secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:"+account+":secret:ec2runners/pool1/github-??????", nil), false},
		{"pool management reads its pool's GitHub credential", call(awsrecord.RolePoolManagement, "ssm:GetParameter", credential, nil), true},
		{"agent reads the GitHub credential", call(awsrecord.RoleAgent, "ssm:GetParameter", credential, nil), false},
		{"a plan reads the pool's config", call(awsrecord.RoleReadOnly, "dynamodb:GetItem", table, leading("TYPE#METADATA")), true},
		{"a plan reads instance records", call(awsrecord.RoleReadOnly, "dynamodb:BatchGetItem", table, leading("TYPE#INSTANCE")), true},
		{"a plan lists claims", call(awsrecord.RoleReadOnly, "dynamodb:Query", table, leading("TYPE#CLAIM")), true},
		{"a plan counts a queue's messages", call(awsrecord.RoleReadOnly, "sqs:GetQueueAttributes", queue, nil), true},
		{"a plan reads a runner's tokens", call(awsrecord.RoleReadOnly, "dynamodb:GetItem", table, leading("AGENT#"+self)), false},
		{"a plan takes the reaper's lease", call(awsrecord.RoleReadOnly, "dynamodb:UpdateItem", table, leading("TYPE#LEASE")), false},
		{"a plan writes an instance record", call(awsrecord.RoleReadOnly, "dynamodb:PutItem", table, leading("TYPE#INSTANCE")), false},
		{"a plan deletes a claim record", call(awsrecord.RoleReadOnly, "dynamodb:DeleteItem", table, leading("TYPE#CLAIM")), false},
		{"a plan receives a message", call(awsrecord.RoleReadOnly, "sqs:ReceiveMessage", queue, nil), false},
		{"a plan terminates a pool instance", call(awsrecord.RoleReadOnly, "ec2:TerminateInstances", other, tagged(poolName)), false},
		{"a plan launches", call(awsrecord.RoleReadOnly, "ec2:CreateFleet", "arn:aws:ec2:us-east-1:"+account+":launch-template/lt-1", tagged(poolName)), false},
	}
	for _, p := range documents(t) {
		for _, tc := range cases {
			if tc.call.Role != p.Role {
				continue
			}
			// The test's pool is poolName, whatever pool the call names.
			got, _, err := p.evaluate(tc.call, []map[string]string{{
				varPool: poolName, varRegion: "us-east-1", varAccount: account, varPartition: "aws", varClass: "large", varLogGroup: "/ec2runners/pool1",
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s: %s: allowed = %v, want %v", p.Source, tc.name, got, tc.want)
			}
		}
	}
}

// A documented policy that misses a call its role makes fails the check.
func TestCheckFailsOnACallNotGranted(t *testing.T) {
	calls := []awsrecord.Call{
		call(awsrecord.RolePoolManagement, "dynamodb:CreateTable", table, nil),
		call(awsrecord.RoleClaims, "sqs:ReceiveMessage", queue, nil),
		call(awsrecord.RoleAgent, "dynamodb:PutItem", table, leading("AGENT#"+self)),
		call(awsrecord.RoleReadOnly, "dynamodb:DescribeTable", table, nil),
	}
	report, err := Check(documents(t), calls)
	if err != nil || !report.OK() {
		t.Fatalf("granted calls: %v\n%s", err, report)
	}
	missing := call(awsrecord.RoleAgent, "sqs:ReceiveMessage", queue, nil)
	report, err = Check(documents(t), append(calls, missing))
	if err != nil {
		t.Fatal(err)
	}
	if report.OK() || len(report.Missing) != 2 || !strings.Contains(report.String(), "MISSING README.md (agent) does not grant sqs:ReceiveMessage") {
		t.Errorf("a call no agent policy grants: report\n%s", report)
	}
}

// Without a role's calls the check cannot pass: the suites did not record.
func TestCheckNeedsEveryRole(t *testing.T) {
	_, err := Check(documents(t), []awsrecord.Call{call(awsrecord.RoleClaims, "sqs:ReceiveMessage", queue, nil)})
	if err == nil || !strings.Contains(err.Error(), "no calls recorded for the role pool-management") {
		t.Errorf("err = %v", err)
	}
}

func TestConditionOperators(t *testing.T) {
	c := call(awsrecord.RoleClaims, "x:Y", "*", map[string][]string{"k": {"a1", "a2"}, "one": {"v"}})
	cases := []struct {
		cond Condition
		want bool
	}{
		{Condition{"ForAllValues:StringLike", "k", []string{"a*"}}, true},
		{Condition{"ForAllValues:StringEquals", "k", []string{"a1"}}, false},
		{Condition{"ForAllValues:StringEquals", "absent", []string{"a1"}}, true}, // IAM: an absent key matches ForAllValues
		{Condition{"ForAnyValue:StringEquals", "k", []string{"a2"}}, true},
		{Condition{"ForAnyValue:StringEquals", "absent", []string{"a2"}}, false},
		{Condition{"StringEquals", "one", []string{"w", "v"}}, true},
		{Condition{"StringEquals", "absent", []string{"v"}}, false},
		{Condition{"StringLike", "one", []string{"?"}}, true},
	}
	for _, tc := range cases {
		got, err := tc.cond.holds(c, nil)
		if err != nil || got != tc.want {
			t.Errorf("%+v: %v, %v; want %v", tc.cond, got, err, tc.want)
		}
	}
	if _, err := (Condition{"NumericLessThan", "one", []string{"1"}}).holds(c, nil); err == nil {
		t.Error("an operator the checker does not evaluate must fail the check")
	}
}

// A call whose pool tag the recorder could not learn (a lookup the emulator
// did not answer) is granted as the tag would be, and reported unverified;
// the same call without the tag is still a missing grant.
func TestUnknownTagIsUnverifiedNotMissing(t *testing.T) {
	base := []awsrecord.Call{
		call(awsrecord.RolePoolManagement, "dynamodb:CreateTable", table, nil),
		call(awsrecord.RoleClaims, "sqs:ReceiveMessage", queue, nil),
		call(awsrecord.RoleReadOnly, "dynamodb:DescribeTable", table, nil),
	}
	unknown := call(awsrecord.RoleAgent, "ec2:TerminateInstances", self, nil)
	unknown.Unknown = []string{awsrecord.KeyPoolTag}
	report, err := Check(documents(t), append(base, unknown))
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() || len(report.Unverified) != 1 || !strings.Contains(report.String(), "unverified") {
		t.Errorf("a termination with an unknown pool tag: report\n%s", report)
	}
	untagged := call(awsrecord.RoleAgent, "ec2:TerminateInstances", self, nil)
	report, err = Check(documents(t), append(base, untagged))
	if err != nil {
		t.Fatal(err)
	}
	if report.OK() {
		t.Errorf("a termination of an instance without the pool tag is granted: report\n%s", report)
	}
}

// Every documented policy fits IAM's size limits as a user would attach it,
// its placeholders at their longest: the README's as managed policies
// (6,144 characters), the example's as each role's only inline policy
// (10,240), white space not counted. Past them IAM refuses the policy
// (LimitExceeded).
func TestDocumentedPoliciesFitIAMsSizeLimits(t *testing.T) {
	readme := readFile("../../../README.md")
	for _, p := range documents(t) {
		size, limit := Size(p, readme), MaxRolePolicies
		if strings.HasPrefix(p.Source, "README.md") {
			limit = MaxManagedPolicy
		}
		t.Logf("%s: %d of %d characters", p.Source, size, limit)
		if size > limit {
			t.Errorf("%s: %d characters, past IAM's %d", p.Source, size, limit)
		}
		if size < 500 {
			t.Errorf("%s: %d characters: the policy was not measured", p.Source, size)
		}
	}
}
