package awsrecord

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// flakyEC2 fails its first failures calls with err, then describes the
// instance i-1 (tagged with tags) and nothing else.
type flakyEC2 struct {
	failures int32
	err      error
	tags     []ec2types.Tag
	calls    atomic.Int32
}

func (f *flakyEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	if f.calls.Add(1) <= f.failures {
		return nil, f.err
	}
	out := &ec2.DescribeInstancesOutput{}
	if in.InstanceIds[0] == "i-1" {
		out.Reservations = []ec2types.Reservation{{Instances: []ec2types.Instance{{InstanceId: aws.String("i-1"), Tags: f.tags}}}}
	}
	return out, nil
}

func (f *flakyEC2) DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	return nil, errors.New("not used")
}

func lookupOn(api ec2API) *tagLookup {
	return &tagLookup{clients: map[string]ec2API{}, backoff: time.Millisecond, api: func(string) ec2API { return api }}
}

var poolTagged = []ec2types.Tag{{Key: aws.String(protocol.TagPool), Value: aws.String("p1")}}

// A lookup the emulator refuses for a while is retried, and one it never
// answers, or answers without the instance, is unknown: never "no tag",
// which the policy check would read as a missing grant.
func TestPoolTagLookupRetriesAndNeverGuesses(t *testing.T) {
	busy := &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "busy"}
	cases := []struct {
		name      string
		api       *flakyEC2
		id        string
		wantPool  string
		wantState tagState
	}{
		{"answered at once", &flakyEC2{tags: poolTagged}, "i-1", "p1", tagFound},
		{"refused, then answered", &flakyEC2{failures: 3, err: busy, tags: poolTagged}, "i-1", "p1", tagFound},
		{"untagged", &flakyEC2{}, "i-1", "", tagAbsent},
		{"never answered", &flakyEC2{failures: 1000, err: busy, tags: poolTagged}, "i-1", "", tagUnknown},
		{"connection refused", &flakyEC2{failures: 1000, err: errors.New("dial tcp: connection refused")}, "i-1", "", tagUnknown},
		{"gone", &flakyEC2{failures: 1000, err: &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound"}}, "i-1", "", tagUnknown},
		{"not listed", &flakyEC2{}, "i-2", "", tagUnknown},
	}
	for _, tc := range cases {
		pool, state := lookupOn(tc.api).poolTag(context.Background(), "us-east-1", "instance", tc.id)
		if pool != tc.wantPool || state != tc.wantState {
			t.Errorf("%s: poolTag = %q, %v; want %q, %v", tc.name, pool, state, tc.wantPool, tc.wantState)
		}
	}
	gone := &flakyEC2{failures: 1000, err: &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound"}}
	lookupOn(gone).poolTag(context.Background(), "us-east-1", "instance", "i-1")
	if n := gone.calls.Load(); n != 1 {
		t.Errorf("a NotFound answer was asked %d times; retrying cannot change it", n)
	}
	never := &flakyEC2{failures: 1000, err: busy}
	lookupOn(never).poolTag(context.Background(), "us-east-1", "instance", "i-1")
	if n := never.calls.Load(); n != lookupAttempts {
		t.Errorf("a refused lookup was made %d times, want %d", n, lookupAttempts)
	}
}

// A termination whose tag lookup failed is recorded with the pool tag as
// an unknown key, not without it.
func TestTerminationWithUnknownTagIsRecordedAsUnknown(t *testing.T) {
	busy := &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "busy"}
	for _, tc := range []struct {
		api         *flakyEC2
		wantContext []string
		wantUnknown []string
	}{
		{&flakyEC2{tags: poolTagged}, []string{"p1"}, nil},
		{&flakyEC2{failures: 1000, err: busy}, nil, []string{KeyPoolTag}},
	} {
		r := &recorder{lookup: lookupOn(tc.api), partition: "aws", account: "000000000000"}
		q := request{service: "ec2", action: "TerminateInstances", body: []byte("Action=TerminateInstances&InstanceId.1=i-1"),
			base: Call{Role: RoleAgent, Partition: "aws", Region: "us-east-1", Account: "000000000000"}}
		calls := q.calls(context.Background(), r)
		if len(calls) != 1 {
			t.Fatalf("calls = %v", calls)
		}
		c := calls[0]
		if got := c.Context[KeyPoolTag]; len(got) != len(tc.wantContext) || (len(got) > 0 && got[0] != tc.wantContext[0]) {
			t.Errorf("context %s = %v, want %v", KeyPoolTag, got, tc.wantContext)
		}
		if len(c.Unknown) != len(tc.wantUnknown) || (len(c.Unknown) > 0 && c.Unknown[0] != tc.wantUnknown[0]) {
			t.Errorf("unknown = %v, want %v (%s)", c.Unknown, tc.wantUnknown, c)
		}
	}
}
