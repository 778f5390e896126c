package protocol

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// sAttrs flattens an item whose attributes must all be strings; it fails the
// test on any other attribute type.
func sAttrs(t *testing.T, item map[string]types.AttributeValue) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range item {
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			t.Fatalf("attribute %q is %T, want a string attribute", k, v)
		}
		out[k] = s.Value
	}
	return out
}

func TestKeyAndBaseItem(t *testing.T) {
	tests := []struct {
		typ, id, now   string
		wantSK         string
		wantEntityType string
	}{
		{typ: TypeInstance, id: "i-0abc", now: "2026-06-01T12:00:00Z", wantSK: "ID#i-0abc", wantEntityType: "INSTANCE"},
		{typ: TypeMetadata, id: PoolConfigID, now: "2026-06-01T12:00:00Z", wantSK: "ID#pool_config", wantEntityType: "METADATA"},
		{typ: TypeLease, id: ReaperLeaseID, now: "2026-06-01T12:00:00Z", wantSK: "ID#reaper", wantEntityType: "LEASE"},
		{typ: TypeClaim, id: "run-7", now: "2026-06-01T12:00:00Z", wantSK: "ID#run-7", wantEntityType: "CLAIM"},
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+tt.id, func(t *testing.T) {
			key := sAttrs(t, Key(tt.typ, tt.id))
			if want := map[string]string{"PK": tt.typ, "SK": tt.wantSK}; !reflect.DeepEqual(key, want) {
				t.Errorf("Key = %v, want %v", key, want)
			}
			item := BaseItem(tt.typ, tt.id, tt.now)
			want := map[string]string{
				"PK": tt.typ, "SK": tt.wantSK, "entityType": tt.wantEntityType,
				"identifier": tt.id, "updatedAt": tt.now,
			}
			if got := sAttrs(t, item); !reflect.DeepEqual(got, want) {
				t.Errorf("BaseItem = %v, want %v", got, want)
			}
			if got := IdentifierOf(item); got != tt.id {
				t.Errorf("IdentifierOf = %q, want %q", got, tt.id)
			}
		})
	}
	// The protocol's literal keys.
	for got, want := range map[string]string{
		TypeInstance: "TYPE#INSTANCE", TypeMetadata: "TYPE#METADATA", TypeClaim: "TYPE#CLAIM", TypeLease: "TYPE#LEASE",
		AgentPartitionPrefix: "AGENT#", SortKeyHeartbeat: "HEARTBEAT", SortKeySignal: "SIGNAL",
		SortKeyRegistrationToken: "TOKEN#REGISTER", SortKeyRemovalToken: "TOKEN#REMOVE",
	} {
		if got != want {
			t.Errorf("key constant %q, want %q", got, want)
		}
	}
}

func TestStringAttr(t *testing.T) {
	item := map[string]types.AttributeValue{
		"s": &types.AttributeValueMemberS{Value: "x"},
		"n": &types.AttributeValueMemberN{Value: "5"},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
	}
	for name, want := range map[string]string{"s": "x", "n": "", "m": "", "absent": ""} {
		if got := StringAttr(item, name); got != want {
			t.Errorf("StringAttr(%q) = %q, want %q", name, got, want)
		}
	}
	if got := StringAttr(nil, "s"); got != "" {
		t.Errorf("StringAttr(nil) = %q", got)
	}
}

func TestInstanceItemRoundTrip(t *testing.T) {
	tests := []Instance{
		{ID: "i-0abc", State: StateRunning, RunID: "run-42", Threshold: "2026-06-01T13:00:00Z",
			ResourceClass: "large", InstanceType: "c6i.large", UsageClass: UsageOnDemand, UpdatedAt: "2026-06-01T12:00:00Z"},
		{ID: "i-0def", State: StateIdle, RunID: "", Threshold: "2026-06-01T12:07:00Z",
			ResourceClass: "2xlarge", InstanceType: "m7g.2xlarge", UsageClass: UsageSpot, UpdatedAt: "2026-06-01T12:00:00Z"},
		{ID: "i-1", State: StateTerminated, Threshold: "2026-06-01T12:00:00Z", UpdatedAt: "2026-06-01T12:00:00Z"},
	}
	for _, in := range tests {
		t.Run(in.ID, func(t *testing.T) {
			item := in.Item()
			got := sAttrs(t, item)
			want := map[string]string{
				"PK": "TYPE#INSTANCE", "SK": "ID#" + in.ID, "entityType": "INSTANCE", "identifier": in.ID,
				"updatedAt": in.UpdatedAt, "state": in.State, "runId": in.RunID, "threshold": in.Threshold,
				"resourceClass": in.ResourceClass, "instanceType": in.InstanceType, "usageClass": in.UsageClass,
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Item() = %v\nwant      %v", got, want)
			}
			// runId is present even when empty: conditions test runId = "".
			if _, ok := item["runId"].(*types.AttributeValueMemberS); !ok {
				t.Errorf("runId attribute is %T, want a string attribute even when empty", item["runId"])
			}
			back, err := InstanceFromItem(item)
			if err != nil {
				t.Fatalf("InstanceFromItem: %v", err)
			}
			if back != in {
				t.Errorf("round trip = %+v, want %+v", back, in)
			}
		})
	}
}

func TestInstanceFromItemRejects(t *testing.T) {
	good := Instance{ID: "i-1", State: StateIdle, Threshold: "2026-06-01T12:00:00Z", UpdatedAt: "2026-06-01T12:00:00Z"}
	without := func(attr string) map[string]types.AttributeValue {
		item := good.Item()
		delete(item, attr)
		return item
	}
	tests := []struct {
		name string
		item map[string]types.AttributeValue
	}{
		{name: "nil", item: nil},
		{name: "heartbeat", item: HeartbeatItem(testARN("i-1"), "2026-06-01T12:00:00Z")},
		{name: "signal", item: Signal{InstanceARN: testARN("i-1"), State: SignalRegistered, RunID: "r"}.Item()},
		{name: "pool config", item: PoolConfig{Name: "p"}.Item("2026-06-01T12:00:00Z")},
		{name: "no state", item: without("state")},
		{name: "no PK", item: without("PK")},
		{name: "no SK", item: without("SK")},
		{name: "bare id in SK", item: func() map[string]types.AttributeValue {
			item := good.Item()
			item["SK"] = &types.AttributeValueMemberS{Value: "ID#"}
			return item
		}()},
		{name: "state not a string", item: func() map[string]types.AttributeValue {
			item := good.Item()
			item["state"] = &types.AttributeValueMemberN{Value: "1"}
			return item
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := InstanceFromItem(tt.item)
			if err == nil {
				t.Fatalf("InstanceFromItem = %+v, nil; want an error", got)
			}
			if !strings.Contains(err.Error(), "not an instance record") {
				t.Errorf("error %q does not say it is not an instance record", err)
			}
			if got != (Instance{}) {
				t.Errorf("InstanceFromItem returned %+v with its error, want the zero Instance", got)
			}
		})
	}
}

func TestSignalItemRoundTrip(t *testing.T) {
	for _, in := range []Signal{
		{InstanceARN: testARN("i-0abc"), State: SignalRegistered, RunID: "run-1", UpdatedAt: "2026-06-01T12:00:00Z"},
		{InstanceARN: testARN("i-0abc"), State: SignalUserDataOK, RunID: "", UpdatedAt: "2026-06-01T12:00:00Z"},
		{InstanceARN: "arn:aws-cn:ec2:cn-north-1:210987654321:instance/i-2", State: SignalReleased, RunID: "run-9", UpdatedAt: "2026-06-01T12:00:00Z"},
		{InstanceARN: testARN("i-3"), State: SignalRegistered, RunID: "run-1", Label: "run-1-abcdefgh23456", UpdatedAt: "2026-06-01T12:00:00Z"},
	} {
		item := in.Item()
		value, ok := item["value"].(*types.AttributeValueMemberM)
		if !ok {
			t.Fatalf("%+v: value is %T, want a map", in, item["value"])
		}
		want := map[string]string{"state": in.State, "runId": in.RunID}
		if in.Label != "" {
			want["label"] = in.Label
		}
		if got := sAttrs(t, value.Value); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: value = %v, want %v", in, got, want)
		}
		delete(item, "value")
		if ttl, ok := item[AttrExpiresAt].(*types.AttributeValueMemberN); !ok || ttl.Value != "1780401600" {
			t.Errorf("%+v: expiresAt = %v, want N 1780401600 (a day later)", in, item[AttrExpiresAt])
		}
		delete(item, AttrExpiresAt)
		_, id, _ := SplitInstanceARN(in.InstanceARN)
		want = map[string]string{"PK": "AGENT#" + in.InstanceARN, "SK": "SIGNAL", "entityType": "WS", "identifier": id, "updatedAt": in.UpdatedAt}
		if got := sAttrs(t, item); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: item = %v, want %v", in, got, want)
		}
		back, ok := SignalFromItem(in.Item())
		if !ok || back != in {
			t.Errorf("SignalFromItem(%+v.Item()) = %+v, %v", in, back, ok)
		}
	}
}

func TestSignalFromItemWithoutSignal(t *testing.T) {
	good := func() map[string]types.AttributeValue {
		return Signal{InstanceARN: testARN("i-1"), State: SignalRegistered, RunID: "r", UpdatedAt: "2026-06-01T12:00:00Z"}.Item()
	}
	with := func(attr string, v types.AttributeValue) map[string]types.AttributeValue {
		item := good()
		if v == nil {
			delete(item, attr)
		} else {
			item[attr] = v
		}
		return item
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	tests := []struct {
		name string
		item map[string]types.AttributeValue
	}{
		{name: "nil item", item: nil},
		{name: "no value", item: with("value", nil)},
		{name: "string value (a heartbeat)", item: HeartbeatItem(testARN("i-1"), "2026-06-01T12:00:00Z")},
		{name: "map without state", item: with("value", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"runId": s("r")}})},
		{name: "empty state", item: with("value", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"state": s(""), "runId": s("r")}})},
		{name: "old key TYPE#WS", item: with("PK", s("TYPE#WS"))},
		{name: "bare instance id as partition", item: with("PK", s("AGENT#i-1"))},
		{name: "prefix without instance id", item: with("PK", s("AGENT#"+testPrefix))},
		{name: "other sort key", item: with("SK", s("HEARTBEAT"))},
		{name: "identifier of another instance", item: with("identifier", s("i-2"))},
		{name: "no identifier", item: with("identifier", nil)},
	}
	for _, tt := range tests {
		if got, ok := SignalFromItem(tt.item); ok {
			t.Errorf("%s: SignalFromItem = %+v, true; want ok = false", tt.name, got)
		}
	}
}

func TestHeartbeatItem(t *testing.T) {
	item := HeartbeatItem(testARN("i-0abc"), "2026-06-01T12:00:05Z")
	arn, at, ok := HeartbeatFromItem(item)
	if !ok || arn != testARN("i-0abc") || FormatTime(at) != "2026-06-01T12:00:05Z" {
		t.Errorf("HeartbeatFromItem = %q, %v, %v", arn, at, ok)
	}
	// The TTL: a day after the heartbeat, so a gone agent's item expires.
	if ttl, ok := item[AttrExpiresAt].(*types.AttributeValueMemberN); !ok || ttl.Value != "1780401605" {
		t.Errorf("expiresAt = %v, want N 1780401605", item[AttrExpiresAt])
	}
	delete(item, AttrExpiresAt)
	got := sAttrs(t, item)
	want := map[string]string{
		"PK": "AGENT#" + testARN("i-0abc"), "SK": "HEARTBEAT", "entityType": "HEARTBEAT", "identifier": "i-0abc",
		"updatedAt": "2026-06-01T12:00:05Z", "value": "PING",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("HeartbeatItem = %v, want %v", got, want)
	}
	for name, bad := range map[string]map[string]types.AttributeValue{
		"signal":          Signal{InstanceARN: testARN("i-1"), State: SignalRegistered, UpdatedAt: "2026-06-01T12:00:05Z"}.Item(),
		"no timestamp":    HeartbeatItem(testARN("i-1"), ""),
		"fractional time": HeartbeatItem(testARN("i-1"), "2026-06-01T12:00:05.5Z"),
		"not PING": func() map[string]types.AttributeValue {
			it := HeartbeatItem(testARN("i-1"), "2026-06-01T12:00:05Z")
			it["value"] = &types.AttributeValueMemberS{Value: "PONG"}
			return it
		}(),
	} {
		if arn, at, ok := HeartbeatFromItem(bad); ok {
			t.Errorf("%s: HeartbeatFromItem = %q, %v, true; want ok = false", name, arn, at)
		}
	}
}

func TestSignalConstants(t *testing.T) {
	got := []string{SignalUserDataOK, SignalUserDataFailed, SignalRegistered, SignalRegistrationFailed,
		SignalDeregistered, SignalDeregistrationFailed, SignalReleased}
	want := []string{"UD_OK", "UD_FAILED", "UD_REG_OK", "UD_REG_FAILED", "UD_REMOVE_REG_OK", "UD_REMOVE_REG_FAILED", "UD_REMOVE_REG_REMOVE_RUN_OK"}
	if !slices.Equal(got, want) {
		t.Errorf("signals = %q, want %q", got, want)
	}
}

func TestPoolConfigItemRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		cfg  PoolConfig
	}{
		{name: "without fleet", cfg: PoolConfig{
			Name:              "ci-runners",
			InstanceARNPrefix: testPrefix,
			ResourceClasses:   DefaultResourceClasses(),
			IdleTimeout:       Duration(7 * time.Minute),
			MaxRuntime:        Duration(90 * time.Minute),
			QueueURLs:         map[string]string{"large": "https://sqs.eu-west-1.amazonaws.com/123/ci-large"},
		}},
		{name: "with fleet by id", cfg: PoolConfig{
			Name:              "gpu_pool-2",
			InstanceARNPrefix: "arn:aws-us-gov:ec2:us-gov-west-1:000000000000:instance/",
			ResourceClasses:   map[string]ResourceClass{"big": {CPU: 8, MemoryMiB: 32768}},
			IdleTimeout:       Duration(45 * time.Second),
			MaxRuntime:        Duration(2*time.Hour + 5*time.Second),
			Fleet: &FleetConfig{
				LaunchTemplateID:      "lt-0123",
				LaunchTemplateVersion: "$Latest",
				SubnetIDs:             []string{"subnet-a", "subnet-b"},
				InstanceSelection:     SelectionAttributeBased,
			},
			QueueURLs: map[string]string{"big": "https://sqs/123/gpu_pool-2-big"},
		}},
		{name: "with fleet by name", cfg: PoolConfig{
			Name:              "pool",
			InstanceARNPrefix: testPrefix,
			ResourceClasses:   map[string]ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}},
			IdleTimeout:       Duration(time.Hour),
			MaxRuntime:        Duration(6 * time.Hour),
			Fleet: &FleetConfig{
				LaunchTemplateName:    "runner",
				LaunchTemplateVersion: "3",
				SubnetIDs:             []string{"subnet-a"},
				InstanceSelection:     SelectionExplicit,
			},
			QueueURLs: map[string]string{},
		}},
		{name: "with metrics", cfg: PoolConfig{
			Name:              "ci-runners",
			InstanceARNPrefix: testPrefix,
			ResourceClasses:   map[string]ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}},
			IdleTimeout:       Duration(time.Hour),
			MaxRuntime:        Duration(6 * time.Hour),
			QueueURLs:         map[string]string{},
			Metrics:           &MetricsConfig{Namespace: "EC2Runners", LogGroup: "/ec2runners/metrics"},
		}},
		{name: "with a GitHub credential", cfg: PoolConfig{
			Name:              "ci-runners",
			InstanceARNPrefix: testPrefix,
			ResourceClasses:   map[string]ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}},
			IdleTimeout:       Duration(time.Hour),
			MaxRuntime:        Duration(6 * time.Hour),
			QueueURLs:         map[string]string{},
			GitHub:            &GitHubTarget{Owner: "octo", Repository: "app"},
			GitHubCredential:  &GitHubCredential{SSMParameter: "/ec2runners/ci-runners/github"},
		}},
		{name: "with an access policy", cfg: PoolConfig{
			Name:              "ci-runners",
			InstanceARNPrefix: testPrefix,
			ResourceClasses:   map[string]ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}, "xlarge": {CPU: 4, MemoryMiB: 8192}},
			IdleTimeout:       Duration(7 * time.Minute),
			MaxRuntime:        Duration(6 * time.Hour),
			QueueURLs:         map[string]string{},
			Access: &Access{Repositories: []RepositoryAccess{
				{
					Repository:      "octo/app",
					Workflows:       []string{"octo/app/.github/workflows/ci.yml@refs/heads/main", "octo/app/.github/workflows/release-*"},
					MaxRunners:      10,
					MaxRuntime:      Duration(90 * time.Minute),
					ResourceClasses: []string{"xlarge", "large"},
				},
				{Repository: "Octo/Docs"},
			}},
		}},
		// Written before '-' was refused in class names (ValidateClassName):
		// still read, so that the pool can be refreshed and its class renamed.
		{name: "class with a dash", cfg: PoolConfig{
			Name:              "ci-runners",
			InstanceARNPrefix: testPrefix,
			ResourceClasses:   map[string]ResourceClass{"gpu-big": {CPU: 8, MemoryMiB: 32768}},
			IdleTimeout:       Duration(time.Hour),
			MaxRuntime:        Duration(6 * time.Hour),
			QueueURLs:         map[string]string{"gpu-big": "https://sqs/123/ci-gpu-big"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const now = "2026-06-01T12:00:00Z"
			item := tt.cfg.Item(now)
			attrs := sAttrs(t, item)
			doc := attrs["value"]
			delete(attrs, "value")
			want := map[string]string{"PK": "TYPE#METADATA", "SK": "ID#pool_config", "entityType": "METADATA", "identifier": "pool_config", "updatedAt": now}
			if !reflect.DeepEqual(attrs, want) {
				t.Errorf("item keys = %v, want %v", attrs, want)
			}
			if hasFleet := strings.Contains(doc, `"fleet"`); hasFleet != (tt.cfg.Fleet != nil) {
				t.Errorf("value %s: fleet present = %v, want %v", doc, hasFleet, tt.cfg.Fleet != nil)
			}
			if want := `"idleTimeout":"` + FormatDuration(time.Duration(tt.cfg.IdleTimeout)) + `"`; !strings.Contains(doc, want) {
				t.Errorf("value %s lacks %s", doc, want)
			}
			got, err := PoolConfigFromItem(item)
			if err != nil {
				t.Fatalf("PoolConfigFromItem: %v", err)
			}
			if !reflect.DeepEqual(got, tt.cfg) {
				t.Errorf("round trip = %+v\nwant        %+v", got, tt.cfg)
			}
			if a := tt.cfg.Access; a != nil {
				// The policy's spelling, as the broker reads it.
				for _, want := range []string{`"access":{"repositories":[{"repository":"octo/app","workflows":[`, `"maxRunners":10,"maxRuntime":"1h30m","resourceClasses":["xlarge","large"]}`, `{"repository":"Octo/Docs"}`} {
					if !strings.Contains(doc, want) {
						t.Errorf("value %s lacks %s", doc, want)
					}
				}
			} else if strings.Contains(doc, `"access"`) {
				t.Errorf("value %s holds an access policy, want none", doc)
			}
			if (got.Fleet == nil) != (tt.cfg.Fleet == nil) {
				t.Errorf("round trip Fleet = %v, want %v", got.Fleet, tt.cfg.Fleet)
			}
		})
	}
}

func TestPoolConfigFromItemInvalid(t *testing.T) {
	item := func(value types.AttributeValue) map[string]types.AttributeValue {
		it := BaseItem(TypeMetadata, PoolConfigID, "2026-06-01T12:00:00Z")
		if value != nil {
			it["value"] = value
		}
		return it
	}
	tests := []struct {
		name string
		item map[string]types.AttributeValue
	}{
		{name: "not JSON", item: item(&types.AttributeValueMemberS{Value: "{not json"})},
		{name: "truncated JSON", item: item(&types.AttributeValueMemberS{Value: `{"name":"ci","resourceClasses":{`})},
		{name: "wrong type", item: item(&types.AttributeValueMemberS{Value: `{"name":5}`})},
		{name: "bad duration", item: item(&types.AttributeValueMemberS{Value: `{"name":"ci","idleTimeout":"soon"}`})},
		{name: "no value", item: item(nil)},
		{name: "value not a string", item: item(&types.AttributeValueMemberN{Value: "1"})},
		{name: "no instance ARN prefix", item: PoolConfig{Name: "ci", ResourceClasses: DefaultResourceClasses()}.Item("2026-06-01T12:00:00Z")},
		{name: "instance ARN prefix of another service", item: PoolConfig{Name: "ci", ResourceClasses: DefaultResourceClasses(),
			InstanceARNPrefix: "arn:aws:ecs:eu-west-1:123456789012:instance/"}.Item("2026-06-01T12:00:00Z")},
		{name: "metrics in AWS's namespace", item: PoolConfig{Name: "ci", ResourceClasses: DefaultResourceClasses(), InstanceARNPrefix: testPrefix,
			Metrics: &MetricsConfig{Namespace: "AWS/EC2", LogGroup: "g"}}.Item("2026-06-01T12:00:00Z")},
		{name: "GitHub credential without a GitHub target", item: PoolConfig{Name: "ci", ResourceClasses: DefaultResourceClasses(), InstanceARNPrefix: testPrefix,
			GitHubCredential: &GitHubCredential{SSMParameter: "/ec2runners/ci/github"}}.Item("2026-06-01T12:00:00Z")},
		{name: "GitHub credential in two places", item: PoolConfig{Name: "ci", ResourceClasses: DefaultResourceClasses(), InstanceARNPrefix: testPrefix,
			GitHub:           &GitHubTarget{Owner: "octo"},
			GitHubCredential: &GitHubCredential{SSMParameter: "/ec2runners/ci/github", SecretsManagerSecret: "ec2runners/ci/github"}}.Item("2026-06-01T12:00:00Z")},
		{name: "GitHub credential in a parameter of no valid name", item: PoolConfig{Name: "ci", ResourceClasses: DefaultResourceClasses(), InstanceARNPrefix: testPrefix,
			GitHub:           &GitHubTarget{Owner: "octo"},
			GitHubCredential: &GitHubCredential{SSMParameter: "ec2runners//github"}}.Item("2026-06-01T12:00:00Z")},
		{name: "metrics in a log group of no valid name", item: PoolConfig{Name: "ci", ResourceClasses: DefaultResourceClasses(), InstanceARNPrefix: testPrefix,
			Metrics: &MetricsConfig{Namespace: "EC2Runners", LogGroup: "a:b"}}.Item("2026-06-01T12:00:00Z")},
		{name: "access policy of no repository", item: PoolConfig{Name: "ci", ResourceClasses: DefaultResourceClasses(), InstanceARNPrefix: testPrefix,
			MaxRuntime: Duration(time.Hour), Access: &Access{}}.Item("2026-06-01T12:00:00Z")},
		{name: "access to another repository's workflows", item: PoolConfig{Name: "ci", ResourceClasses: DefaultResourceClasses(), InstanceARNPrefix: testPrefix,
			MaxRuntime: Duration(time.Hour), Access: &Access{Repositories: []RepositoryAccess{{Repository: "octo/app", Workflows: []string{"octo/other/.github/workflows/*"}}}}}.Item("2026-06-01T12:00:00Z")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PoolConfigFromItem(tt.item)
			if err == nil {
				t.Fatalf("PoolConfigFromItem = %+v, nil; want an error", got)
			}
			if !strings.Contains(err.Error(), "pool config item is not valid") {
				t.Errorf("error %q does not name the pool config item", err)
			}
		})
	}
}
