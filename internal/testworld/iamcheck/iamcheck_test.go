package iamcheck

import (
	"os"
	"path/filepath"
	"slices"
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
	// pool1's GitHub credential, as the documents name it, in SSM or in
	// Secrets Manager (whose ARN ends in 6 random characters).
	credential = "arn:aws:ssm:us-east-1:" + account + ":parameter/ec2runners/pool1/github"
	secret     = "arn:aws:secretsmanager:us-east-1:" + account + ":secret:ec2runners/pool1/github-a1B2c3"
	// pool1's broker function, as examples/complete names it.
	functionName   = "pool1-broker"
	brokerFunction = "arn:aws:lambda:us-east-1:" + account + ":function:" + functionName
	// A KMS key, as the credential's key, and the pool's Terraform state.
	kmsKey    = "arn:aws:kms:us-east-1:" + account + ":key/1234abcd-12ab-34cd-56ef-1234567890ab"
	poolState = "arn:aws:s3:::acme-state/ec2runners/pool/terraform.tfstate"
)

// testBindings bind the documents' variables to pool1's deployment, whatever
// pool a call names.
var testBindings = []map[string]string{{
	varPool: poolName, varRegion: "us-east-1", varAccount: account, varPartition: "aws", varClass: "large",
	varLogGroup: "/ec2runners/pool1", varFunction: functionName, "doc:state-bucket": "acme-state",
}}

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

// decrypting is the context of SSM decrypting parameter for the caller.
func decrypting(parameter string) map[string][]string {
	return map[string][]string{"kms:ViaService": {"ssm.us-east-1.amazonaws.com"}, "kms:EncryptionContext:PARAMETER_ARN": {parameter}}
}

// decryptingSecret is the context of Secrets Manager decrypting secret for
// the caller.
func decryptingSecret(secret string) map[string][]string {
	return map[string][]string{"kms:ViaService": {"secretsmanager.us-east-1.amazonaws.com"}, "kms:EncryptionContext:SecretARN": {secret}}
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
		{"broker writes a claim record", call(awsrecord.RoleBroker, "dynamodb:PutItem", table, leading("TYPE#CLAIM")), true},
		{"broker hands tokens to runners", call(awsrecord.RoleBroker, "dynamodb:BatchWriteItem", table, leading("AGENT#"+self, "AGENT#"+other)), true},
		{"broker rewrites the pool's config", call(awsrecord.RoleBroker, "dynamodb:PutItem", table, leading("TYPE#METADATA")), false},
		{"broker batch-writes the config among tokens", call(awsrecord.RoleBroker, "dynamodb:BatchWriteItem", table, leading("AGENT#"+self, "TYPE#METADATA")), false},
		{"broker makes held messages visible again", call(awsrecord.RoleBroker, "sqs:ChangeMessageVisibility", queue, nil), true},
		{"broker terminates a pool instance", call(awsrecord.RoleBroker, "ec2:TerminateInstances", other, tagged(poolName)), true},
		{"broker terminates an instance of no pool", call(awsrecord.RoleBroker, "ec2:TerminateInstances", other, nil), false},
		{"broker tags what it launches", call(awsrecord.RoleBroker, "ec2:CreateTags", "arn:aws:ec2:us-east-1:"+account+":instance/*", map[string][]string{awsrecord.KeyCreateAction: {"CreateFleet"}}), true},
		{"broker tags an existing instance", call(awsrecord.RoleBroker, "ec2:CreateTags", other, tagged("pool2")), false},
		{"broker launches a template of another pool", call(awsrecord.RoleBroker, "ec2:CreateFleet", "arn:aws:ec2:us-east-1:"+account+":launch-template/lt-1", tagged("pool2")), false},
		{"broker launches the pool's template", call(awsrecord.RoleBroker, "ec2:CreateFleet", "arn:aws:ec2:us-east-1:"+account+":launch-template/lt-1", tagged(poolName)), true},
		{"broker deletes the table", call(awsrecord.RoleBroker, "dynamodb:DeleteTable", table, nil), false},
		{"broker deletes a queue", call(awsrecord.RoleBroker, "sqs:DeleteQueue", queue, nil), false},
		{"pool management describes instances", call(awsrecord.RolePoolManagement, "ec2:DescribeInstances", "*", nil), true},
		{"pool management terminates an instance of no pool", call(awsrecord.RolePoolManagement, "ec2:TerminateInstances", other, nil), false},
		{"pool management creates its pool's log stream", call(awsrecord.RolePoolManagement, "logs:CreateLogStream", logGroup, nil), true},
		{"pool management publishes its pool's metrics", call(awsrecord.RolePoolManagement, "logs:PutLogEvents", logStream, nil), true},
		{"pool management publishes into another pool's stream", call(awsrecord.RolePoolManagement, "logs:PutLogEvents", logGroup+":log-stream:pool2", nil), false},
		{"broker publishes its pool's metrics", call(awsrecord.RoleBroker, "logs:PutLogEvents", logStream, nil), true},
		{"broker publishes into another pool's stream", call(awsrecord.RoleBroker, "logs:PutLogEvents", logGroup+":log-stream:pool2", nil), false},
		{"broker publishes into another log group", call(awsrecord.RoleBroker, "logs:PutLogEvents", "arn:aws:logs:us-east-1:"+account+":log-group:/other:log-stream:pool1", nil), false},
		{"broker creates a log stream", call(awsrecord.RoleBroker, "logs:CreateLogStream", logGroup, nil), false},
		{"agent publishes metrics", call(awsrecord.RoleAgent, "logs:PutLogEvents", logStream, nil), false},
		{"broker reads its pool's GitHub credential", call(awsrecord.RoleBroker, "ssm:GetParameter", credential, nil), true},
		{"broker reads another pool's GitHub credential", call(awsrecord.RoleBroker, "ssm:GetParameter", "arn:aws:ssm:us-east-1:"+account+":parameter/ec2runners/pool2/github", nil), false},
		{"broker reads another parameter", call(awsrecord.RoleBroker, "ssm:GetParameter", "arn:aws:ssm:us-east-1:"+account+":parameter/ec2runners/pool1/other", nil), false},
		{"broker reads its pool's GitHub secret", call(awsrecord.RoleBroker, "secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:"+account+":secret:ec2runners/pool1/github-??????", nil), true},
		{"broker reads another pool's GitHub secret", call(awsrecord.RoleBroker, "secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:"+account+":secret:ec2runners/pool2/github-??????", nil), false},
		{"agent reads the GitHub secret", call(awsrecord.RoleAgent, "secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:"+account+":secret:ec2runners/pool1/github-??????", nil), false},
		{"broker decrypts its pool's GitHub credential through SSM", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, decrypting(credential)), true},
		{"broker decrypts with the key directly", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, map[string][]string{"kms:EncryptionContext:PARAMETER_ARN": {credential}}), false},
		{"broker decrypts another parameter", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, decrypting("arn:aws:ssm:us-east-1:"+account+":parameter/ec2runners/pool2/github")), false},
		{"broker decrypts its pool's GitHub secret through Secrets Manager", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, decryptingSecret(secret)), true},
		{"broker decrypts the secret with the key directly", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, map[string][]string{"kms:EncryptionContext:SecretARN": {secret}}), false},
		{"broker decrypts another pool's secret", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, decryptingSecret("arn:aws:secretsmanager:us-east-1:"+account+":secret:ec2runners/pool2/github-a1B2c3")), false},
		{"broker decrypts the secret through SSM", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, map[string][]string{"kms:ViaService": {"ssm.us-east-1.amazonaws.com"}, "kms:EncryptionContext:SecretARN": {secret}}), false},
		{"pool management decrypts its pool's GitHub credential through SSM", call(awsrecord.RolePoolManagement, "kms:Decrypt", kmsKey, decrypting(credential)), true},
		{"pool management decrypts with the key directly", call(awsrecord.RolePoolManagement, "kms:Decrypt", kmsKey, map[string][]string{"kms:EncryptionContext:PARAMETER_ARN": {credential}}), false},
		{"pool management decrypts another parameter", call(awsrecord.RolePoolManagement, "kms:Decrypt", kmsKey, decrypting("arn:aws:ssm:us-east-1:"+account+":parameter/ec2runners/pool2/github")), false},
		{"pool management decrypts its pool's GitHub secret through Secrets Manager", call(awsrecord.RolePoolManagement, "kms:Decrypt", kmsKey, decryptingSecret(secret)), true},
		{"pool management decrypts the secret with the key directly", call(awsrecord.RolePoolManagement, "kms:Decrypt", kmsKey, map[string][]string{"kms:EncryptionContext:SecretARN": {secret}}), false},
		{"pool management decrypts another pool's secret", call(awsrecord.RolePoolManagement, "kms:Decrypt", kmsKey, decryptingSecret("arn:aws:secretsmanager:us-east-1:"+account+":secret:ec2runners/pool2/github-a1B2c3")), false},
		{"ci invokes the broker", call(awsrecord.RoleCI, "lambda:InvokeFunction", brokerFunction, nil), true},
		{"ci invokes a version of the broker", call(awsrecord.RoleCI, "lambda:InvokeFunction", brokerFunction+":3", nil), true},
		{"ci invokes another function", call(awsrecord.RoleCI, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:pool1-other", nil), false},
		{"ci invokes another pool's broker", call(awsrecord.RoleCI, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:pool2-broker", nil), false},
		{"agent invokes the broker", call(awsrecord.RoleAgent, "lambda:InvokeFunction", brokerFunction, nil), true},
		{"agent invokes a version of the broker", call(awsrecord.RoleAgent, "lambda:InvokeFunction", brokerFunction+":3", nil), true},
		{"agent invokes another function", call(awsrecord.RoleAgent, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:pool1-other", nil), false},
		{"agent invokes another pool's broker", call(awsrecord.RoleAgent, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:pool2-broker", nil), false},
		{"the schedule invokes the broker", call(awsrecord.RoleScheduler, "lambda:InvokeFunction", brokerFunction, nil), true},
		{"the schedule invokes another pool's broker", call(awsrecord.RoleScheduler, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:pool2-broker", nil), false},
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
			got, _, err := p.evaluate(tc.call, testBindings)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s: %s: allowed = %v, want %v", p.Source, tc.name, got, tc.want)
			}
		}
	}
}

// The boundaries between a workflow, an instance and the pool, one call
// each that a documented policy must deny: the CI role (every workflow of
// the access list) and the schedule's role reach nothing of the pool but
// the broker, a runner nothing of another runner, the broker not the
// pool's config.
//
// Each case also widens the policy as a change of the documents could, and
// requires the widened policy to grant the call: so no case passes only
// because the checker cannot match its call, and each fails once a
// document is widened so.
func TestDocumentedPoliciesHoldTheBoundaries(t *testing.T) {
	docs := documents(t)
	// A role that only invokes the broker given the broker's rights: what a
	// pool without a broker gives the roles that claim and maintain it.
	brokerRights := func(p Policy) Policy {
		for _, b := range docs {
			if b.Role == awsrecord.RoleBroker && sameFile(b, p) {
				p.Statements = append(slices.Clone(p.Statements), b.Statements...)
				return p
			}
		}
		t.Fatalf("%s: no broker policy in the same document", p.Source)
		return p
	}
	grant := func(action, resource string) func(Policy) Policy {
		return func(p Policy) Policy {
			p.Statements = append(slices.Clone(p.Statements), Statement{Sid: "Widened", Effect: "Allow", Actions: []string{action}, Resources: []string{resource}})
			return p
		}
	}
	// condition replaces the condition on key in statement sid (none: drops it).
	condition := func(sid, key string, replacement ...Condition) func(Policy) Policy {
		return func(p Policy) Policy {
			p.Statements = slices.Clone(p.Statements)
			for i, s := range p.Statements {
				if s.Sid != sid {
					continue
				}
				c := slices.IndexFunc(s.Conditions, func(c Condition) bool { return c.Key == key })
				if c < 0 {
					t.Fatalf("%s: statement %s has no condition on %s", p.Source, sid, key)
				}
				s.Conditions = slices.Concat(s.Conditions[:c], replacement, s.Conditions[c+1:])
				p.Statements[i] = s
				return p
			}
			t.Fatalf("%s: no statement %s", p.Source, sid)
			return p
		}
	}
	anyLeadingKey := func(prefix string) Condition {
		return Condition{"ForAllValues:StringLike", awsrecord.KeyLeadingKeys, []string{prefix + "*"}}
	}
	template := "arn:aws:ec2:us-east-1:" + account + ":launch-template/lt-1"
	cases := []struct {
		name  string
		call  awsrecord.Call
		widen func(Policy) Policy
	}{
		{"ci reads the GitHub credential", call(awsrecord.RoleCI, "ssm:GetParameter", credential, nil), brokerRights},
		{"ci decrypts the GitHub credential", call(awsrecord.RoleCI, "kms:Decrypt", kmsKey, decrypting(credential)), brokerRights},
		{"ci reads the GitHub secret", call(awsrecord.RoleCI, "secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:"+account+":secret:ec2runners/pool1/github-??????", nil), brokerRights},
		{"ci reads a claim record", call(awsrecord.RoleCI, "dynamodb:GetItem", table, leading("TYPE#CLAIM")), brokerRights},
		{"ci lists the claim records", call(awsrecord.RoleCI, "dynamodb:Query", table, leading("TYPE#CLAIM")), brokerRights},
		{"ci reads a runner's token item", call(awsrecord.RoleCI, "dynamodb:GetItem", table, leading("AGENT#"+self)), brokerRights},
		{"ci queries a runner's partition", call(awsrecord.RoleCI, "dynamodb:Query", table, leading("AGENT#"+self)), brokerRights},
		{"ci batch-reads runners' token items", call(awsrecord.RoleCI, "dynamodb:BatchGetItem", table, leading("AGENT#"+self, "AGENT#"+other)), brokerRights},
		{"ci updates an instance record", call(awsrecord.RoleCI, "dynamodb:UpdateItem", table, leading("TYPE#INSTANCE")), brokerRights},
		{"ci receives from a class queue", call(awsrecord.RoleCI, "sqs:ReceiveMessage", queue, nil), brokerRights},
		{"ci launches from the pool's template", call(awsrecord.RoleCI, "ec2:CreateFleet", template, tagged(poolName)), brokerRights},
		{"ci terminates a pool instance", call(awsrecord.RoleCI, "ec2:TerminateInstances", other, tagged(poolName)), brokerRights},
		{"ci reads the pool's state, which holds the credential", call(awsrecord.RoleCI, "s3:GetObject", poolState, nil), grant("s3:GetObject", "arn:aws:s3:::acme-state/ec2runners/*")},
		{"ci invokes another function", call(awsrecord.RoleCI, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:other", nil), grant("lambda:InvokeFunction", "*")},
		{"agent invokes another function", call(awsrecord.RoleAgent, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:other", nil), grant("lambda:InvokeFunction", "*")},
		{"the schedule reads the GitHub credential", call(awsrecord.RoleScheduler, "ssm:GetParameter", credential, nil), brokerRights},
		{"the schedule reads the GitHub secret", call(awsrecord.RoleScheduler, "secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:"+account+":secret:ec2runners/pool1/github-??????", nil), brokerRights},
		{"the schedule reads a claim record", call(awsrecord.RoleScheduler, "dynamodb:GetItem", table, leading("TYPE#CLAIM")), brokerRights},
		{"the schedule reads a runner's token item", call(awsrecord.RoleScheduler, "dynamodb:GetItem", table, leading("AGENT#"+self)), brokerRights},
		{"the schedule launches from the pool's template", call(awsrecord.RoleScheduler, "ec2:CreateFleet", template, tagged(poolName)), brokerRights},
		{"the schedule invokes another function", call(awsrecord.RoleScheduler, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:other", nil), grant("lambda:InvokeFunction", "*")},
		{"agent reads another instance's tokens", call(awsrecord.RoleAgent, "dynamodb:GetItem", table, leading("AGENT#"+other)), condition("OwnAgentPartition", awsrecord.KeyLeadingKeys, anyLeadingKey("AGENT#"))},
		{"agent writes another instance's partition", call(awsrecord.RoleAgent, "dynamodb:PutItem", table, leading("AGENT#"+other)), condition("OwnAgentPartition", awsrecord.KeyLeadingKeys, anyLeadingKey("AGENT#"))},
		{"broker writes the pool's config", call(awsrecord.RoleBroker, "dynamodb:PutItem", table, leading("TYPE#METADATA")), condition("WritePoolTable", awsrecord.KeyLeadingKeys, anyLeadingKey(""))},
		{"broker updates the pool's access list", call(awsrecord.RoleBroker, "dynamodb:UpdateItem", table, leading("TYPE#METADATA")), condition("WritePoolTable", awsrecord.KeyLeadingKeys, anyLeadingKey(""))},
		{"broker batch-writes the config among tokens", call(awsrecord.RoleBroker, "dynamodb:BatchWriteItem", table, leading("AGENT#"+self, "TYPE#METADATA")), condition("WritePoolTable", awsrecord.KeyLeadingKeys, anyLeadingKey(""))},
		{"broker decrypts with the credential's key outside SSM", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, map[string][]string{"kms:EncryptionContext:PARAMETER_ARN": {credential}}), condition("DecryptPoolGitHubCredential", "kms:ViaService")},
		{"broker decrypts another parameter", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, decrypting("arn:aws:ssm:us-east-1:"+account+":parameter/other")), condition("DecryptPoolGitHubCredential", "kms:EncryptionContext:PARAMETER_ARN")},
		{"broker decrypts with the secret's key outside Secrets Manager", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, map[string][]string{"kms:EncryptionContext:SecretARN": {secret}}), condition("DecryptPoolGitHubSecret", "kms:ViaService")},
		{"broker decrypts another secret", call(awsrecord.RoleBroker, "kms:Decrypt", kmsKey, decryptingSecret("arn:aws:secretsmanager:us-east-1:"+account+":secret:other-a1B2c3")), condition("DecryptPoolGitHubSecret", "kms:EncryptionContext:SecretARN")},
		{"ci decrypts the GitHub secret", call(awsrecord.RoleCI, "kms:Decrypt", kmsKey, decryptingSecret(secret)), brokerRights},
		{"a plan reads a runner's tokens", call(awsrecord.RoleReadOnly, "dynamodb:GetItem", table, leading("AGENT#"+self)), condition("ReadPoolRecords", awsrecord.KeyLeadingKeys, anyLeadingKey(""))},
	}
	for _, tc := range cases {
		checked := 0
		for _, p := range docs {
			if p.Role != tc.call.Role {
				continue
			}
			checked++
			if got, _, err := p.evaluate(tc.call, testBindings); err != nil || got {
				t.Errorf("%s: %s: allowed = %v (%v), want denied", p.Source, tc.name, got, err)
			}
			wide := tc.widen(p)
			if got, _, err := wide.evaluate(tc.call, testBindings); err != nil || !got {
				t.Errorf("%s: %s: still denied (%v) once the policy is widened: the case checks nothing", p.Source, tc.name, err)
			}
		}
		if checked < 2 {
			t.Errorf("%s: %d documented policies of the role %s, want the IAM guide's and the example's", tc.name, checked, tc.call.Role)
		}
	}
}

// sameFile tells whether two policies are documented in the same file.
func sameFile(a, b Policy) bool {
	file := func(p Policy) string { f, _, _ := strings.Cut(p.Source, " "); return f }
	return file(a) == file(b)
}

// A documented policy that misses a call its role makes fails the check.
func TestCheckFailsOnACallNotGranted(t *testing.T) {
	calls := []awsrecord.Call{
		call(awsrecord.RolePoolManagement, "dynamodb:CreateTable", table, nil),
		call(awsrecord.RoleBroker, "sqs:ReceiveMessage", queue, nil),
		call(awsrecord.RoleCI, "lambda:InvokeFunction", brokerFunction, nil),
		call(awsrecord.RoleScheduler, "lambda:InvokeFunction", brokerFunction, nil),
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
	if report.OK() || len(report.Missing) != 2 || !strings.Contains(report.String(), "MISSING "+Guide+" (agent) does not grant sqs:ReceiveMessage") {
		t.Errorf("a call no agent policy grants: report\n%s", report)
	}
}

// The CI role's calls are checked as any other role's: its invocation of
// the broker, however qualified, is granted, bound to the function it names;
// a call to the pool's table is not.
func TestCheckChecksTheCIRole(t *testing.T) {
	calls := []awsrecord.Call{
		call(awsrecord.RolePoolManagement, "dynamodb:CreateTable", table, nil),
		call(awsrecord.RoleBroker, "sqs:ReceiveMessage", queue, nil),
		call(awsrecord.RoleCI, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:acc-broker-1a2b-broker", nil),
		call(awsrecord.RoleCI, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:acc-broker-1a2b-broker:live", nil),
		call(awsrecord.RoleScheduler, "lambda:InvokeFunction", "arn:aws:lambda:us-east-1:"+account+":function:acc-broker-1a2b-broker", nil),
		call(awsrecord.RoleAgent, "dynamodb:PutItem", table, leading("AGENT#"+self)),
		call(awsrecord.RoleReadOnly, "dynamodb:DescribeTable", table, nil),
	}
	report, err := Check(documents(t), calls)
	if err != nil || !report.OK() || strings.Contains(report.String(), `ci), statement "InvokeBroker": lambda:InvokeFunction granted, no test used it`) {
		t.Errorf("the CI role's invocations of the broker: %v, report\n%s", err, report)
	}
	report, err = Check(documents(t), append(calls, call(awsrecord.RoleCI, "dynamodb:Query", table, leading("TYPE#CLAIM"))))
	if err != nil || report.OK() || len(report.Missing) != 2 || !strings.Contains(report.String(), "MISSING "+Guide+" (ci) does not grant dynamodb:Query") {
		t.Errorf("a recorded CI call to the table: %v, report\n%s", err, report)
	}
}

// Without a role's calls the check cannot pass: the suites did not record.
func TestCheckNeedsEveryRole(t *testing.T) {
	_, err := Check(documents(t), []awsrecord.Call{call(awsrecord.RoleBroker, "sqs:ReceiveMessage", queue, nil)})
	if err == nil || !strings.Contains(err.Error(), "no calls recorded for the role pool-management") {
		t.Errorf("err = %v", err)
	}
}

func TestConditionOperators(t *testing.T) {
	c := call(awsrecord.RoleBroker, "x:Y", "*", map[string][]string{"k": {"a1", "a2"}, "one": {"v"}})
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
		call(awsrecord.RoleBroker, "sqs:ReceiveMessage", queue, nil),
		call(awsrecord.RoleCI, "lambda:InvokeFunction", brokerFunction, nil),
		call(awsrecord.RoleScheduler, "lambda:InvokeFunction", brokerFunction, nil),
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
// its placeholders at their longest: the IAM guide's as managed policies
// (6,144 characters), the example's as each role's only inline policy
// (10,240), white space not counted. Past them IAM refuses the policy
// (LimitExceeded).
func TestDocumentedPoliciesFitIAMsSizeLimits(t *testing.T) {
	for _, p := range documents(t) {
		size, limit := Size(p), MaxRolePolicies
		if strings.HasPrefix(p.Source, Guide) {
			if p.JSON == "" {
				t.Fatalf("%s: no JSON to measure", p.Source)
			}
			limit = MaxManagedPolicy
		}
		t.Logf("%s: %d of %d characters", p.Source, size, limit)
		if size > limit {
			t.Errorf("%s: %d characters, past IAM's %d", p.Source, size, limit)
		}
		if size < 200 {
			t.Errorf("%s: %d characters: the policy was not measured", p.Source, size)
		}
	}
}

// The page on the Registry, docs/guides/iam.md, holds the policies of its
// template, the one checked: every role's, in the same order, the same
// statements.
func TestGeneratedGuideHasTheCheckedPolicies(t *testing.T) {
	checked, err := GuidePolicies("../../..", Guide)
	if err != nil {
		t.Fatal(err)
	}
	published, err := GuidePolicies("../../..", GeneratedGuide)
	if err != nil {
		t.Fatalf("%v (make docs renders it)", err)
	}
	if len(published) != len(checked) {
		t.Fatalf("%s has %d policies, %s %d: run make docs", GeneratedGuide, len(published), Guide, len(checked))
	}
	for i := range checked {
		if published[i].Role != checked[i].Role || published[i].JSON != checked[i].JSON {
			t.Errorf("%s: the %s policy is not the one of %s: run make docs", GeneratedGuide, checked[i].Role, Guide)
		}
	}
}

// The guide gives each role the tests record a policy, marked with the
// role's name, and names no other role nor a placeholder the check does
// not know.
func TestGuidePoliciesNeedEveryRole(t *testing.T) {
	dir := t.TempDir()
	page := func(text string) error {
		if err := os.WriteFile(filepath.Join(dir, "iam.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := GuidePolicies(dir, "iam.md")
		return err
	}
	policy := func(role string) string {
		return "<!-- policy: " + role + " -->\n```json\n{\"Version\": \"2012-10-17\", \"Statement\": [{\"Effect\": \"Allow\", \"Action\": \"sqs:GetQueueUrl\", \"Resource\": \"arn:aws:sqs:<region>:<account>:<pool>-<class>\"}]}\n```\n"
	}
	var all strings.Builder
	for _, role := range awsrecord.Roles {
		all.WriteString(policy(role))
	}
	if err := page(all.String()); err != nil {
		t.Errorf("a page with every role's policy: %v", err)
	}
	if err := page(strings.Replace(all.String(), policy(awsrecord.RoleAgent), "", 1)); err == nil || !strings.Contains(err.Error(), "no policy for the role agent") {
		t.Errorf("a page without the agent's policy: err = %v", err)
	}
	if err := page(all.String() + policy("admin")); err == nil || !strings.Contains(err.Error(), `unknown role "admin"`) {
		t.Errorf("a page with a policy for an unknown role: err = %v", err)
	}
	if err := page(all.String() + strings.Replace(policy(awsrecord.RoleCI), "<pool>", "<bucket>", 1)); err == nil || !strings.Contains(err.Error(), "placeholder <bucket>") {
		t.Errorf("a policy with an unknown placeholder: err = %v", err)
	}
}
