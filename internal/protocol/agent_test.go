package protocol

import (
	"cmp"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const testPrefix = "arn:aws:ec2:eu-west-1:123456789012:instance/"

func testARN(id string) string { return InstanceARN(testPrefix, id) }

func TestInstanceARNPrefix(t *testing.T) {
	if got := InstanceARNPrefix("aws", "eu-west-1", "123456789012"); got != testPrefix {
		t.Errorf("InstanceARNPrefix = %q, want %q", got, testPrefix)
	}
	for _, ok := range []string{
		testPrefix,
		"arn:aws-cn:ec2:cn-north-1:123456789012:instance/",
		"arn:aws-us-gov:ec2:us-gov-west-1:123456789012:instance/",
		"arn:aws-iso-b:ec2:us-isob-east-1:123456789012:instance/",
	} {
		if err := ValidateInstanceARNPrefix(ok); err != nil {
			t.Errorf("ValidateInstanceARNPrefix(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "arn:aws:ec2:eu-west-1:123456789012:instance", "arn:aws:ec2:eu-west-1:123456789012:instance/i-1",
		"arn:aws:ec2:eu-west-1:12345678901:instance/", "arn:aws:ec2:eu-west-1:1234567890123:instance/",
		"arn:aws:ec2::123456789012:instance/", "arn:aws:ec2:EU-WEST-1:123456789012:instance/",
		"arn:aws:sts::123456789012:instance/", "arn:aws:ec2:eu-west-1:123456789012:volume/",
		"arn:azure:ec2:eu-west-1:123456789012:instance/", "arn::ec2:eu-west-1:123456789012:instance/",
		" " + testPrefix, testPrefix + "\n",
	} {
		err := ValidateInstanceARNPrefix(bad)
		if err == nil || !strings.Contains(err.Error(), "arn:<partition>:ec2:<region>:<12-digit account>:instance/") {
			t.Errorf("ValidateInstanceARNPrefix(%q) = %v, want an error naming the form", bad, err)
		}
	}
}

func TestSplitInstanceARN(t *testing.T) {
	prefix, id, ok := SplitInstanceARN(testARN("i-0123456789abcdef0"))
	if !ok || prefix != testPrefix || id != "i-0123456789abcdef0" {
		t.Errorf("SplitInstanceARN = %q, %q, %v", prefix, id, ok)
	}
	for _, bad := range []string{"", "i-1", testPrefix, testPrefix + "i-1/x", testPrefix + "i 1", "arn:aws:ec2:eu-west-1:123:instance/i-1"} {
		if p, id, ok := SplitInstanceARN(bad); ok || p != "" || id != "" {
			t.Errorf("SplitInstanceARN(%q) = %q, %q, %v; want nothing", bad, p, id, ok)
		}
	}
}

func TestAgentKey(t *testing.T) {
	got := sAttrs(t, AgentKey(testARN("i-1"), SortKeySignal))
	if want := map[string]string{"PK": "AGENT#" + testPrefix + "i-1", "SK": "SIGNAL"}; !reflect.DeepEqual(got, want) {
		t.Errorf("AgentKey = %v, want %v", got, want)
	}
}

func TestRunnerTokenRoundTrip(t *testing.T) {
	expires := time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC)
	for _, in := range []RunnerToken{
		{InstanceARN: testARN("i-0abc"), SortKey: SortKeyRegistrationToken, Token: "AABBCC", ExpiresAt: expires, RunID: "run-1", Target: "octo/app", UpdatedAt: "2026-06-01T12:00:00Z"},
		{InstanceARN: testARN("i-2"), SortKey: SortKeyRemovalToken, Token: "RRMM", ExpiresAt: expires, RunID: "run-2", Target: "octo", UpdatedAt: "2026-06-01T12:00:00Z"},
		{InstanceARN: testARN("i-3"), SortKey: SortKeyRegistrationToken, Token: "AABBCC", ExpiresAt: expires, RunID: "run-3", Target: "octo",
			Label: "run-3-abcdefgh23456", RunnerGroup: "Trusted builds", UpdatedAt: "2026-06-01T12:00:00Z"},
	} {
		item := in.Item()
		if ttl, ok := item[AttrExpiresAt].(*types.AttributeValueMemberN); !ok || ttl.Value != "1780318800" {
			t.Errorf("%s: expiresAt = %v, want the token's expiry N 1780318800", in.SortKey, item[AttrExpiresAt])
		}
		value := sAttrs(t, item[AttrValue].(*types.AttributeValueMemberM).Value)
		want := map[string]string{"token": in.Token, "expires_at": "2026-06-01T13:00:00Z", "runId": in.RunID, "target": in.Target}
		if in.Label != "" {
			want["label"], want["runnerGroup"] = in.Label, in.RunnerGroup
		}
		if !reflect.DeepEqual(value, want) {
			t.Errorf("%s: value = %v, want %v", in.SortKey, value, want)
		}
		delete(item, AttrExpiresAt)
		delete(item, AttrValue)
		_, id, _ := SplitInstanceARN(in.InstanceARN)
		want = map[string]string{"PK": "AGENT#" + in.InstanceARN, "SK": in.SortKey, "entityType": "TOKEN", "identifier": id, "updatedAt": in.UpdatedAt}
		if got := sAttrs(t, item); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: item = %v, want %v", in.SortKey, got, want)
		}
		back, err := RunnerTokenFromItem(in.Item())
		if err != nil || !reflect.DeepEqual(back, in) {
			t.Errorf("RunnerTokenFromItem(%+v.Item()) = %+v, %v", in, back, err)
		}
		if want := cmp.Or(in.Label, in.RunID); back.RunnerLabel() != want {
			t.Errorf("%+v: RunnerLabel() = %q, want %q", in, back.RunnerLabel(), want)
		}
	}
}

func TestRunnerTokenFromItemRejects(t *testing.T) {
	good := RunnerToken{InstanceARN: testARN("i-1"), SortKey: SortKeyRegistrationToken, Token: "AABB", ExpiresAt: time.Now(), RunID: "run-1", Target: "octo/app"}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	withValue := func(field, v string) map[string]types.AttributeValue {
		item := good.Item()
		item[AttrValue].(*types.AttributeValueMemberM).Value[field] = s(v)
		return item
	}
	with := func(attr string, v types.AttributeValue) map[string]types.AttributeValue {
		item := good.Item()
		item[attr] = v
		return item
	}
	for name, item := range map[string]map[string]types.AttributeValue{
		"nil":                                 nil,
		"signal":                              Signal{InstanceARN: testARN("i-1"), State: SignalRegistered, RunID: "run-1"}.Item(),
		"old shared item":                     with(AttrPK, s(TypeMetadata)),
		"other sort key":                      with(AttrSK, s("TOKEN#OTHER")),
		"identifier mismatch":                 with(AttrIdentifier, s("i-2")),
		"value a string":                      with(AttrValue, s("AABB")),
		"no token":                            withValue("token", ""),
		"no run id":                           withValue("runId", ""),
		"no target":                           withValue("target", ""),
		"target not GitHub's":                 withValue("target", "octo/app/extra"),
		"owner starts with '-'":               withValue("target", "-octo"),
		"expiry not wire time":                withValue("expires_at", "2026-06-01T13:00:00.5Z"),
		"expiry missing":                      withValue("expires_at", ""),
		"label of another run":                withValue("label", "run-2-abcdefgh23456"),
		"label without secret":                withValue("label", "run-1-"),
		"label secret too long":               withValue("label", "run-1-abcdefgh234567"),
		"label in capitals":                   withValue("label", "run-1-ABCDEFGH23456"),
		"runner group blank":                  withValue("runnerGroup", " "),
		"runner group of a repository runner": withValue("runnerGroup", "Trusted"),
	} {
		got, err := RunnerTokenFromItem(item)
		if err == nil || !strings.HasPrefix(err.Error(), "runner token item") || !reflect.DeepEqual(got, RunnerToken{}) {
			t.Errorf("%s: RunnerTokenFromItem = %+v, %v; want the zero token and an error about the runner token item", name, got, err)
		}
	}
}
