package awslimits_test

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Each rule's refusal is tested through the emulator's front
// (internal/testworld/emulator, front_rules_test.go) and, where it implements the
// action, the fakes (internal/testworld/awsfake): with the SDK, as AWS answers.

// Every rule is complete and named once.
func TestRules_complete(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range awslimits.Rules {
		if r.ID == "" || r.Service == "" || len(r.Actions) == 0 || r.Limit == "" || r.Check == nil || r.Source == "" {
			t.Errorf("rule %q: incomplete (an id, a service, actions, a limit, a check and a source each)", r.ID)
		}
		if seen[r.ID] {
			t.Errorf("rule %s: named twice", r.ID)
		}
		seen[r.ID] = true
	}
}

// A rule applies to its service's actions only.
func TestCheck_onlyItsActions(t *testing.T) {
	entries := func(n int) []any {
		var out []any
		for i := range n {
			out = append(out, map[string]any{"Id": string(rune('a' + i)), "MessageBody": "x"})
		}
		return out
	}
	for _, tc := range []struct {
		service, action string
		req             map[string]any
		refused         bool
	}{
		{"sqs", "SendMessageBatch", map[string]any{"Entries": entries(11)}, true},
		{"sqs", "SendMessageBatch", map[string]any{"Entries": entries(10)}, false},
		{"sqs", "ListQueues", map[string]any{"Entries": entries(11)}, false},
		{"dynamodb", "SendMessageBatch", map[string]any{"Entries": entries(11)}, false},
		{"ec2", "RunInstances", map[string]any{"UserData": "#!"}, true},
		{"ec2", "DescribeInstances", map[string]any{"UserData": "#!"}, false},
	} {
		if got := awslimits.Check(tc.service, tc.action, tc.req) != nil; got != tc.refused {
			t.Errorf("%s %s: refused %v, want %v", tc.service, tc.action, got, tc.refused)
		}
	}
	if !awslimits.Watches("sqs", "SendMessageBatch") || awslimits.Watches("sqs", "ListQueues") || !awslimits.Watches("ec2", "") || awslimits.Watches("sts", "") {
		t.Error("Watches: want the actions some rule reads only")
	}
}

// EC2's query protocol flattens lists with 1-based indexes; the document
// nests them again, in order.
func TestFormDocument(t *testing.T) {
	form := url.Values{
		"Action":                            {"CreateFleet"},
		"TagSpecification.1.ResourceType":   {"instance"},
		"TagSpecification.1.Tag.2.Key":      {"b"},
		"TagSpecification.1.Tag.1.Key":      {"a"},
		"TagSpecification.1.Tag.10.Key":     {"c"},
		"TargetCapacitySpecification.Total": {"2"},
	}
	want := map[string]any{
		"Action": "CreateFleet",
		"TagSpecification": []any{map[string]any{"ResourceType": "instance",
			"Tag": []any{map[string]any{"Key": "a"}, map[string]any{"Key": "b"}, map[string]any{"Key": "c"}}}},
		"TargetCapacitySpecification": map[string]any{"Total": "2"},
	}
	if got := awslimits.FormDocument(form); !reflect.DeepEqual(got, want) {
		t.Errorf("FormDocument:\n got %v\nwant %v", got, want)
	}
}

// The front finds an item's key by the tables' key schema: the protocol's.
func TestKeySchema(t *testing.T) {
	if awslimits.KeySchema.Partition != protocol.AttrPK || awslimits.KeySchema.Sort != protocol.AttrSK {
		t.Errorf("KeySchema %+v, want the protocol's %s and %s", awslimits.KeySchema, protocol.AttrPK, protocol.AttrSK)
	}
}

// An item's size counts names and values as DynamoDB does; numbers by their
// significant digits, as measured against DynamoDB (the conformance suite's
// captures).
func TestItemBytes(t *testing.T) {
	for literal, want := range map[string]int{
		"0": 1, "1": 2, "12": 2, "123": 3, "1234": 3, "12345678901234567890123456789012345678": 20,
		"0042": 2, "100": 2, "1010": 3, "0.0000001": 2, "1E125": 2, "1E-100": 2, "1.5": 3, "15": 2,
		"1.2": 3, "1.200": 3, "1.234": 4, "3.14159": 5, "123456": 4, "100.5": 4, "0.15": 2, "-42": 3, "-0": 1,
	} {
		item := map[string]any{"n": map[string]any{"N": literal}}
		if got := awslimits.ItemBytes(item) - 1; got != want {
			t.Errorf("number %s: %d bytes, want %d", literal, got, want)
		}
	}
	item := map[string]any{
		"PK":   map[string]any{"S": "TYPE#INSTANCE"},                                // 2 + 13
		"ids":  map[string]any{"SS": []any{"i-1", "i-22"}},                          // 3 + 7
		"ok":   map[string]any{"BOOL": true},                                        // 2 + 1
		"blob": map[string]any{"B": "aGVsbG8="},                                     // 4 + 5
		"m":    map[string]any{"M": map[string]any{"a": map[string]any{"S": "xy"}}}, // 1 + 3 + 1 + (1 + 2)
	}
	if got, want := awslimits.ItemBytes(item), 15+10+3+9+8; got != want {
		t.Errorf("ItemBytes: %d, want %d", got, want)
	}
}

// EMFProblem reads an event as CloudWatch's EMF extraction does: a
// document it would take, and each way one breaks the specification.
func TestEMFProblem(t *testing.T) {
	valid := `{"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"EC2Runners","Dimensions":[["Pool","Class"]],` +
		`"Metrics":[{"Name":"Claims","Unit":"Count"},{"Name":"TimeToRunner","Unit":"Milliseconds"}]}]},"Pool":"ci","Class":"large","Claims":1,"TimeToRunner":[1200,800],"RunId":"r"}`
	if problem := awslimits.EMFProblem(valid); problem != "" {
		t.Fatalf("a valid document: %s", problem)
	}
	var dims, dimMembers, metrics, metricDefs []string
	for i := range awslimits.MaxEMFDimensions + 1 {
		dims = append(dims, fmt.Sprintf(`"d%d"`, i))
		dimMembers = append(dimMembers, fmt.Sprintf(`"d%d":"v"`, i))
	}
	for i := range awslimits.MaxEMFMetrics + 1 {
		metrics = append(metrics, fmt.Sprintf(`"m%d":1`, i))
		metricDefs = append(metricDefs, fmt.Sprintf(`{"Name":"m%d"}`, i))
	}
	for name, doc := range map[string]string{
		"not JSON":                 `Claims=1`,
		"two documents":            valid + valid,
		"no _aws":                  `{"Claims":1}`,
		"no timestamp":             strings.Replace(valid, `"Timestamp":1700000000000,`, "", 1),
		"a timestamp in seconds.5": strings.Replace(valid, `1700000000000`, `1700000000.5`, 1),
		"no namespace":             strings.Replace(valid, `"Namespace":"EC2Runners",`, "", 1),
		"AWS's namespace form":     strings.Replace(valid, `"EC2Runners"`, `":x"`, 1),
		"a dimension not a string": strings.Replace(valid, `"Class":"large"`, `"Class":5`, 1),
		"a missing dimension":      strings.Replace(valid, `"Class":"large",`, "", 1),
		"a metric not a number":    strings.Replace(valid, `"Claims":1`, `"Claims":"1"`, 1),
		"an unknown unit":          strings.Replace(valid, `"Unit":"Count"`, `"Unit":"Runners"`, 1),
		"31 dimensions":            `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[` + strings.Join(dims, ",") + `]],"Metrics":[{"Name":"m0"}]}]},"m0":1,` + strings.Join(dimMembers, ",") + `}`,
		"101 metrics":              `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[` + strings.Join(metricDefs, ",") + `]}]},` + strings.Join(metrics, ",") + `}`,
	} {
		if awslimits.EMFProblem(doc) == "" {
			t.Errorf("%s: taken", name)
		}
	}
}

// Where a pool's GitHub credential may live: the names a new parameter or
// secret may have, or their ARNs.
func TestCredentialPlaceProblems(t *testing.T) {
	for _, tc := range []struct {
		problem func(string) string
		value   string
		ok      bool
	}{
		{awslimits.ParameterNameProblem, "/ec2runners/ci/github", true},
		{awslimits.ParameterNameProblem, "ci-github", true},
		{awslimits.ParameterNameProblem, "arn:aws:ssm:eu-west-1:123456789012:parameter/ec2runners/ci/github", true},
		{awslimits.ParameterNameProblem, "", false},
		{awslimits.ParameterNameProblem, "ec2runners/ci/github", false},
		{awslimits.ParameterNameProblem, "/ec2runners//github", false},
		{awslimits.ParameterNameProblem, "/aws/ci", false},
		{awslimits.ParameterNameProblem, "SSM-ci", false},
		{awslimits.ParameterNameProblem, strings.Repeat("/p", 16), false},
		{awslimits.ParameterNameProblem, "/" + strings.Repeat("p", 1011), false},
		// 1,011 characters with the ARN's prefix, at least
		// arn:aws:ssm:us-east-1:123456789012:parameter (44).
		{awslimits.ParameterNameProblem, "/" + strings.Repeat("p", 966), true},
		{awslimits.ParameterNameProblem, "/" + strings.Repeat("p", 967), false},
		{awslimits.ParameterNameProblem, strings.Repeat("p", 966), true},
		{awslimits.ParameterNameProblem, strings.Repeat("p", 967), false},
		{awslimits.ParameterNameProblem, "arn:aws:ssm:eu-west-1:123456789012:parameter/" + strings.Repeat("p", 1011-45), true},
		{awslimits.ParameterNameProblem, "arn:aws:ssm:eu-west-1:123456789012:parameter/" + strings.Repeat("p", 1012-45), false},
		{awslimits.ParameterNameProblem, "arn:aws:s3:::bucket", false},
		{awslimits.SecretIDProblem, "ec2runners/ci/github", true},
		{awslimits.SecretIDProblem, "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ec2runners/ci/github-AbCdEf", true},
		{awslimits.SecretIDProblem, "", false},
		{awslimits.SecretIDProblem, "ec2runners ci", false},
		{awslimits.SecretIDProblem, strings.Repeat("s", 513), false},
		{awslimits.SecretIDProblem, "arn:aws:ssm:eu-west-1:123456789012:parameter/x", false},
	} {
		if p := tc.problem(tc.value); (p == "") != tc.ok {
			t.Errorf("%.60q: problem %q, want ok = %v", tc.value, p, tc.ok)
		}
	}
}
