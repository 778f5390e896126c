// Package awsrecord records which AWS actions the provider and the agent
// call, per IAM role, so that the documented policies can be checked against
// them (internal/testworld/iamcheck).
//
// Tests put a recording reverse proxy in front of the emulator (Start) and
// give each role its own test access key: the provider's pool management
// configuration PoolManagementKey, the claim code's configuration ClaimsKey
// (the broker's rights), the configuration of claims made through the
// broker CIKey (the CI role's), the pool's schedule invoking its broker's
// maintenance SchedulerKey, the read-only configuration of plans
// ReadOnlyKey, and each instance stand-in's role credentials
// AgentKey(instance id). The
// proxy attributes every request by the access key id of its SigV4
// credential, turns it into the IAM authorizations AWS would evaluate for it
// (a TransactWriteItems into one PutItem, UpdateItem, DeleteItem or
// ConditionCheckItem per item, a TerminateInstances or StopInstances into
// one per instance, with the condition keys the documents pin:
// dynamodb:LeadingKeys, aws:ResourceTag/ec2runners:pool,
// ec2:SourceInstanceARN, ec2:CreateAction; a CloudWatch Logs write on its
// log stream's ARN; a Lambda Invoke on its function's ARN), and appends
// each distinct one to a file. Requests with any other key (the
// tests' own setup and checks) pass unrecorded.
//
// The emulator serves no Lambda (moto's needs Docker): the tests run
// Lambda functions in internal/testworld/lambdaworld, and StartFor puts a
// recorder in front of it, naming the emulator's account in its calls.
//
// The proxy only forwards: with EC2RUNNERS_AWS_CALLS unset, Start returns
// the endpoint itself, and the tests run as they would without it.
package awsrecord

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// EnvDir names the directory the recorders write to (one file per test
// package); unset, nothing is recorded.
const EnvDir = "EC2RUNNERS_AWS_CALLS"

// Roles, as the documents name their policies.
const (
	RolePoolManagement = "pool-management" // applies ec2runners_pool, reads its data sources
	// RoleBroker makes the claim code's AWS calls (claims, releases, reaps
	// and fills): the pool's broker, its scheduled maintenance included,
	// and, in a pool without a broker, whatever applies claims directly.
	RoleBroker   = "broker"
	RoleAgent    = "agent"     // the runner instances' role
	RoleReadOnly = "read-only" // plans, refreshes, data sources and queries: no writes
	// RoleCI is the role workflows assume to claim through the broker: it
	// may only invoke the broker's function. The broker's acceptance tests
	// give the claims' provider its key, and put a recorder in front of
	// their Lambda (StartFor).
	RoleCI = "ci"
	// RoleScheduler is the role the pool stack's EventBridge schedule
	// invokes the broker's maintenance with: it may only invoke the
	// broker's function. The broker's maintenance test gives its
	// invocations its key, through a recorder in front of Lambda
	// (StartFor).
	RoleScheduler = "scheduler"
)

// Roles lists every role whose calls the tests record, in the order
// reports show them.
var Roles = []string{RolePoolManagement, RoleBroker, RoleCI, RoleScheduler, RoleAgent, RoleReadOnly}

// Test access keys, one per role. Any secret signs (the emulator checks
// none); TestSecret is the conventional one.
const (
	PoolManagementKey = "AKIATESTPOOLMANAGER1"
	ClaimsKey         = "AKIATESTCLAIMSONLY01"
	CIKey             = "AKIATESTCIINVOKER001"
	SchedulerKey      = "AKIATESTSCHEDULER001"
	ReadOnlyKey       = "AKIATESTREADONLY0001"
	TestSecret        = "test"
	agentKeyPrefix    = "ASIATESTAGENT"
)

// AgentKey is the access key id of instance id's role credentials: every
// instance its own, as on EC2, so that a request names the instance it
// comes from (the ec2:SourceInstanceARN of AWS's condition context).
func AgentKey(instanceID string) string {
	return agentKeyPrefix + strings.ToUpper(strings.TrimPrefix(instanceID, "i-"))
}

// role is the role of an access key id, and the instance of an agent's key.
func role(accessKeyID string) (role, instanceID string) {
	switch {
	case accessKeyID == PoolManagementKey:
		return RolePoolManagement, ""
	case accessKeyID == ClaimsKey:
		return RoleBroker, ""
	case accessKeyID == CIKey:
		return RoleCI, ""
	case accessKeyID == SchedulerKey:
		return RoleScheduler, ""
	case accessKeyID == ReadOnlyKey:
		return RoleReadOnly, ""
	case strings.HasPrefix(accessKeyID, agentKeyPrefix) && len(accessKeyID) > len(agentKeyPrefix):
		return RoleAgent, "i-" + strings.ToLower(strings.TrimPrefix(accessKeyID, agentKeyPrefix))
	}
	return "", ""
}

// Call is one authorization AWS evaluates for a request: the IAM action, the
// resource, and the condition keys of the request's context.
type Call struct {
	Role      string              `json:"role"`
	Action    string              `json:"action"`        // IAM action, "dynamodb:PutItem"
	API       string              `json:"api,omitempty"` // the API call, when it is not Action's ("TransactWriteItems")
	Resource  string              `json:"resource"`      // an ARN, or "*"
	Partition string              `json:"partition"`
	Region    string              `json:"region"`
	Account   string              `json:"account"`
	Context   map[string][]string `json:"context,omitempty"`
	// Unknown are condition keys AWS would know for the call but the
	// recorder could not learn (a tag lookup the emulator did not answer):
	// the policy check takes them as satisfied, and reports the call as
	// unverified, instead of reading them as absent.
	Unknown []string `json:"unknown,omitempty"`
}

// String is a Call's line in reports.
func (c Call) String() string {
	s := c.Action + " on " + c.Resource
	if c.API != "" {
		s += " (" + c.API + ")"
	}
	for _, k := range slices.Sorted(maps.Keys(c.Context)) {
		s += fmt.Sprintf(" %s=%v", k, c.Context[k])
	}
	for _, k := range c.Unknown {
		s += " " + k + "=(unknown)"
	}
	return s
}

// Read returns the calls recorded in every file of dir.
func Read(dir string) ([]Call, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var calls []Call
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		f, err := os.Open(dir + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			var c Call
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", e.Name(), err)
			}
			calls = append(calls, c)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
	}
	if len(calls) == 0 {
		return nil, errors.New("no calls recorded in " + dir)
	}
	return calls, nil
}
