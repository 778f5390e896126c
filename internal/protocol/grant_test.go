package protocol

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestRegistrationGrantRoundTrip(t *testing.T) {
	in := RegistrationGrant{InstanceARN: testARN("i-0abc"), Grant: NewGrantSecret(), ExpiresAt: time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC),
		RunID: "run-1", Target: "octo/app", Label: "run-1-abcdefgh23456", UpdatedAt: "2026-06-01T12:00:00Z"}
	item := in.Item()
	if ttl, ok := item[AttrExpiresAt].(*types.AttributeValueMemberN); !ok || ttl.Value != "1780318800" {
		t.Errorf("expiresAt = %v, want the grant's expiry N 1780318800", item[AttrExpiresAt])
	}
	value := sAttrs(t, item[AttrValue].(*types.AttributeValueMemberM).Value)
	want := map[string]string{"grant": in.Grant, "expires_at": "2026-06-01T13:00:00Z", "runId": "run-1", "target": "octo/app", "label": in.Label}
	if !reflect.DeepEqual(value, want) {
		t.Errorf("value = %v, want %v", value, want)
	}
	delete(item, AttrExpiresAt)
	delete(item, AttrValue)
	want = map[string]string{"PK": "AGENT#" + in.InstanceARN, "SK": "JIT#GRANT", "entityType": "GRANT", "identifier": "i-0abc", "updatedAt": in.UpdatedAt}
	if got := sAttrs(t, item); !reflect.DeepEqual(got, want) {
		t.Errorf("item = %v, want %v", got, want)
	}
	back, err := RegistrationGrantFromItem(in.Item())
	if err != nil || !reflect.DeepEqual(back, in) {
		t.Errorf("RegistrationGrantFromItem(%+v.Item()) = %+v, %v", in, back, err)
	}
}

func TestNewGrantSecret(t *testing.T) {
	a, b := NewGrantSecret(), NewGrantSecret()
	if !grantSecretPattern.MatchString(a) || a == b {
		t.Errorf("secrets %q and %q: want two different ones of %d hex digits", a, b, GrantSecretLength)
	}
}

func TestRegistrationGrantFromItemRejects(t *testing.T) {
	good := RegistrationGrant{InstanceARN: testARN("i-1"), Grant: NewGrantSecret(), ExpiresAt: time.Now(), RunID: "run-1", Target: "octo/app", Label: "run-1-abcdefgh23456"}
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
		"nil":                   nil,
		"registration token":    RunnerToken{InstanceARN: testARN("i-1"), SortKey: SortKeyRegistrationToken, Token: "AABB", ExpiresAt: time.Now(), RunID: "run-1", Target: "octo/app"}.Item(),
		"shared partition":      with(AttrPK, s(TypeInstance)),
		"other sort key":        with(AttrSK, s(SortKeyRegistrationToken)),
		"identifier mismatch":   with(AttrIdentifier, s("i-2")),
		"value a string":        with(AttrValue, s(good.Grant)),
		"no secret":             withValue("grant", ""),
		"short secret":          withValue("grant", good.Grant[:63]),
		"secret in capitals":    withValue("grant", strings.ToUpper(good.Grant)),
		"secret not hex":        withValue("grant", strings.Repeat("z", 64)),
		"no run id":             withValue("runId", ""),
		"run id in capitals":    withValue("runId", "Run-1"),
		"organization target":   withValue("target", "octo"),
		"target not GitHub's":   withValue("target", "octo/app/extra"),
		"owner starts with '-'": withValue("target", "-octo/app"),
		"expiry missing":        withValue("expires_at", ""),
		"expiry not wire time":  withValue("expires_at", "2026-06-01T13:00:00.5Z"),
		"no label":              withValue("label", ""),
		"label the bare run id": withValue("label", "run-1"),
		"label of another run":  withValue("label", "run-2-abcdefgh23456"),
	} {
		got, err := RegistrationGrantFromItem(item)
		if err == nil || !strings.HasPrefix(err.Error(), "registration grant item") || !reflect.DeepEqual(got, RegistrationGrant{}) {
			t.Errorf("%s: RegistrationGrantFromItem = %+v, %v; want the zero grant and an error about the grant item", name, got, err)
		}
		if err != nil && strings.Contains(err.Error(), good.Grant) {
			t.Errorf("%s: the error shows the secret: %v", name, err)
		}
	}
}

// A grant matches its own secret alone.
func TestRegistrationGrantMatches(t *testing.T) {
	g := RegistrationGrant{Grant: NewGrantSecret()}
	if !g.Matches(g.Grant) {
		t.Error("the grant does not match its own secret")
	}
	for _, other := range []string{"", g.Grant[:63], g.Grant + "0", NewGrantSecret(), strings.ToUpper(g.Grant)} {
		if g.Matches(other) {
			t.Errorf("the grant matches %q", other)
		}
	}
}

// A runner runs on the instance it is named after, with or without a
// just-in-time suffix; never on another whose id its name merely starts
// with.
func TestRunnerOfInstance(t *testing.T) {
	id := "i-0123456789abcdef0"
	for name, want := range map[string]bool{
		id:                            true,
		JITRunnerName(id, "k2m4q7x3"): true,
		"i-0123456789abcdef01":        false,
		"i-0123456789abcdef":          false,
		"x" + id:                      false,
	} {
		if got := RunnerOfInstance(name, id); got != want {
			t.Errorf("RunnerOfInstance(%q, %q) = %v, want %v", name, id, got, want)
		}
	}
}
