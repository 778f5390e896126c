package protocol

import (
	"strings"
	"testing"
)

// Records and messages name the launch template a runner was launched from
// (templateId) besides its version; both are optional: records and messages
// written before them read as "" (unknown).
func TestLaunchTemplateAttributes(t *testing.T) {
	in := Instance{ID: "i-0abc", State: StateIdle, Threshold: "2026-06-01T13:00:00Z", ResourceClass: "large", InstanceType: "c6i.large",
		UsageClass: UsageOnDemand, UpdatedAt: "2026-06-01T12:00:00Z", LaunchedAt: "2026-06-01T11:00:00Z", TemplateID: "lt-0123456789abcdef0", TemplateVersion: "3"}
	item := in.Item()
	if got := sAttrs(t, item); got["templateId"] != "lt-0123456789abcdef0" || got["templateVersion"] != "3" || got["launchedAt"] != in.LaunchedAt {
		t.Errorf("Item() = %v, want templateId, templateVersion and launchedAt", got)
	}
	if back, err := InstanceFromItem(item); err != nil || back != in {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, in)
	}
	old := in
	old.TemplateID = ""
	item = old.Item()
	if _, ok := item["templateId"]; ok {
		t.Error("a record without a template id has a templateId attribute")
	}
	if back, err := InstanceFromItem(item); err != nil || back.TemplateID != "" || back.TemplateVersion != "3" {
		t.Errorf("a record from before template ids read as %+v, %v", back, err)
	}

	m := Message{ID: "i-0abc", ResourceClass: "large", InstanceType: "c6i.large", CPU: 2, MemoryMiB: 4096, UsageClass: UsageOnDemand,
		Threshold: "2026-06-01T13:00:00Z", LaunchedAt: in.LaunchedAt, TemplateID: in.TemplateID, TemplateVersion: "3"}
	body := m.Body()
	if !strings.Contains(body, `"templateId":"lt-0123456789abcdef0","templateVersion":"3"`) {
		t.Errorf("body %s does not name the template and its version", body)
	}
	if back, err := ParseMessage(body); err != nil || back != m {
		t.Errorf("ParseMessage(%s) = %+v, %v; want %+v", body, back, err, m)
	}
	// A message of a release before template ids.
	back, err := ParseMessage(`{"id":"i-0abc","resourceClass":"large","instanceType":"c6i.large","cpu":2,"mmem":4096,"usageClass":"on-demand","threshold":"2026-06-01T13:00:00Z","launchedAt":"2026-06-01T11:00:00Z","templateVersion":"3"}`)
	if err != nil || back.TemplateID != "" || back.TemplateVersion != "3" {
		t.Errorf("a message from before template ids read as %+v, %v", back, err)
	}
}
