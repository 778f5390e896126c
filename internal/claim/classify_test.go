package claim

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

func TestClassify(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	wants := Wants{
		ResourceClass: "large", Class: protocol.ResourceClass{CPU: 2, MemoryMiB: 4096},
		AllowedTypes: []string{"c*", "m6i.*"}, UsageClass: protocol.UsageOnDemand,
	}
	// ok is the pool protocol's example message, idle for another hour.
	ok := map[string]any{
		"id": "i-0abc", "resourceClass": "large", "instanceType": "c6i.large", "cpu": 2, "mmem": 4096,
		"usageClass": "on-demand", "threshold": "2026-06-01T13:00:00Z",
	}
	body := func(change func(map[string]any)) string {
		m := map[string]any{}
		for k, v := range ok {
			m[k] = v
		}
		if change != nil {
			change(m)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	set := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	without := func(k string) func(map[string]any) { return func(m map[string]any) { delete(m, k) } }

	tests := []struct {
		name       string
		body       string
		want       Verdict
		reasonHas  string
		wantParsed bool
	}{
		{"ok", body(nil), Accept, "", true},
		{"memory above the class is fine", body(set("mmem", 8192)), Accept, "", true},
		{"second allowed pattern", body(set("instanceType", "m6i.large")), Accept, "", true},
		{"allowed pattern case-insensitive", body(set("instanceType", "C6I.LARGE")), Accept, "", true},
		{"threshold one second ahead", body(set("threshold", "2026-06-01T12:00:01Z")), Accept, "", true},

		{"invalid json", `{"id":"i-0abc",`, Discard, "not a runner message", false},
		{"not an object", `"i-0abc"`, Discard, "not a runner message", false},
		{"empty body", ``, Discard, "not a runner message", false},
		{"wrong field type", body(set("cpu", "2")), Discard, "not a runner message", false},
		{"missing id", body(without("id")), Discard, "id", false},
		{"missing resourceClass", body(without("resourceClass")), Discard, "resourceClass", false},
		{"missing instanceType", body(without("instanceType")), Discard, "instanceType", false},
		{"missing cpu", body(without("cpu")), Discard, "cpu", false},
		{"missing mmem", body(without("mmem")), Discard, "mmem", false},
		{"missing usageClass", body(without("usageClass")), Discard, "usageClass", false},
		{"missing threshold", body(without("threshold")), Discard, "threshold", false},
		{"threshold not the protocol format", body(set("threshold", "2026-06-01T13:00:00.5Z")), Discard, "threshold", false},
		{"threshold not UTC Z", body(set("threshold", "2026-06-01T13:00:00+00:00")), Discard, "threshold", false},

		{"unknown resource class", body(set("resourceClass", "huge")), Discard, "huge", true},
		{"other resource class", body(set("resourceClass", "xlarge")), Discard, "xlarge", true},
		{"cpu above the class", body(set("cpu", 4)), Discard, "cpu 4", true},
		{"cpu below the class", body(set("cpu", 1)), Discard, "cpu 1", true},
		{"memory below the class", body(set("mmem", 4095)), Discard, "memory 4095", true},
		{"threshold in the past", body(set("threshold", "2026-06-01T11:59:59Z")), Discard, "has passed", true},
		{"threshold equal to now", body(set("threshold", "2026-06-01T12:00:00Z")), Discard, "has passed", true},

		{"type not allowed", body(set("instanceType", "r6i.large")), Requeue, "r6i.large", true},
		{"type matched only by a prefix", body(set("instanceType", "m6in.large")), Requeue, "m6in.large", true},
		{"usage class differs", body(set("usageClass", "spot")), Requeue, "spot", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, v, reason := Classify(tt.body, wants, now)
			if v != tt.want {
				t.Fatalf("verdict %v (%q), want %v", v, reason, tt.want)
			}
			if tt.want == Accept && reason != "" {
				t.Errorf("accept with reason %q", reason)
			}
			if tt.want != Accept && !strings.Contains(reason, tt.reasonHas) {
				t.Errorf("reason %q does not mention %q", reason, tt.reasonHas)
			}
			if tt.wantParsed && m.ID != "i-0abc" {
				t.Errorf("parsed id %q, want i-0abc", m.ID)
			}
		})
	}
}

func TestClassifyRequeueKeepsTheBody(t *testing.T) {
	// A requeued message goes back as received: Classify must not need to
	// re-render it, but the parsed message must round-trip to an equal one.
	m := idleMessage("i-1", "r6i.large", time.Now().Add(time.Hour))
	got, v, _ := Classify(m.Body(), Wants{ResourceClass: "large", Class: protocol.ResourceClass{CPU: 2, MemoryMiB: 4096}, AllowedTypes: []string{"c*"}, UsageClass: protocol.UsageOnDemand}, time.Now())
	if v != Requeue || got != m {
		t.Errorf("got %+v %v, want %+v requeue", got, v, m)
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Discard: "discard", Requeue: "requeue", Accept: "accept"} {
		if v.String() != want {
			t.Errorf("%d.String() = %q, want %q", v, v.String(), want)
		}
	}
}
