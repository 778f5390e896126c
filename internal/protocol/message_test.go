package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// protocolBody is the example message of the pool protocol, verbatim.
const protocolBody = `{"id":"i-0abc","resourceClass":"large","instanceType":"c6i.large","cpu":2,"mmem":4096,"usageClass":"on-demand","threshold":"2026-06-01T12:00:00Z"}`

var protocolMessage = Message{
	ID: "i-0abc", ResourceClass: "large", InstanceType: "c6i.large", CPU: 2, MemoryMiB: 4096,
	UsageClass: "on-demand", Threshold: "2026-06-01T12:00:00Z",
}

func TestMessageBodyMatchesProtocol(t *testing.T) {
	if got := protocolMessage.Body(); got != protocolBody {
		t.Errorf("Body() = %s\nwant     %s", got, protocolBody)
	}
	got, err := ParseMessage(protocolBody)
	if err != nil {
		t.Fatalf("ParseMessage(protocol example): %v", err)
	}
	if got != protocolMessage {
		t.Errorf("ParseMessage = %+v, want %+v", got, protocolMessage)
	}
	for _, m := range []Message{
		protocolMessage,
		{ID: "i-1", ResourceClass: "16xlarge", InstanceType: "m7g.16xlarge", CPU: 64, MemoryMiB: 262144, UsageClass: UsageSpot, Threshold: "2030-01-01T00:00:00Z"},
	} {
		back, err := ParseMessage(m.Body())
		if err != nil || back != m {
			t.Errorf("ParseMessage(%+v.Body()) = %+v, %v", m, back, err)
		}
	}
}

func TestParseMessageMalformed(t *testing.T) {
	for _, body := range []string{
		"", "{", "not json", "[]", `"i-0abc"`, "null",
		strings.Replace(protocolBody, `"cpu":2`, `"cpu":"2"`, 1),
		strings.Replace(protocolBody, `"mmem":4096`, `"mmem":4096.5`, 1),
		strings.Replace(protocolBody, `"id":"i-0abc"`, `"id":7`, 1),
		protocolBody + "garbage",
	} {
		if got, err := ParseMessage(body); err == nil {
			t.Errorf("ParseMessage(%q) = %+v, nil; want an error", body, got)
		}
	}
}

func TestParseMessageMissingField(t *testing.T) {
	for _, field := range []string{"id", "resourceClass", "instanceType", "cpu", "mmem", "usageClass", "threshold"} {
		t.Run(field, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal([]byte(protocolBody), &doc); err != nil {
				t.Fatal(err)
			}
			delete(doc, field)
			b, _ := json.Marshal(doc)
			_, err := ParseMessage(string(b))
			if err == nil {
				t.Fatalf("ParseMessage without %s succeeded", field)
			}
			if want := "runner message lacks " + field; err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
		})
	}
	t.Run("zero and empty values count as missing", func(t *testing.T) {
		body := `{"id":"","resourceClass":"large","instanceType":"c6i.large","cpu":0,"mmem":-1,"usageClass":"on-demand","threshold":"2026-06-01T12:00:00Z"}`
		_, err := ParseMessage(body)
		if err == nil || err.Error() != "runner message lacks cpu, id, mmem" {
			t.Errorf("error = %v, want %q", err, "runner message lacks cpu, id, mmem")
		}
	})
	t.Run("all missing", func(t *testing.T) {
		_, err := ParseMessage(`{}`)
		want := "runner message lacks cpu, id, instanceType, mmem, resourceClass, threshold, usageClass"
		if err == nil || err.Error() != want {
			t.Errorf("error = %v, want %q", err, want)
		}
	})
}

func TestParseMessageBadThreshold(t *testing.T) {
	for _, threshold := range []string{
		"2026-06-01 12:00:00Z",
		"2026-06-01T12:00:00",
		"2026-06-01T14:00:00+02:00",
		"2026-06-01T12:00:00.5Z",
		"1780315200",
		"tomorrow",
	} {
		body := strings.Replace(protocolBody, "2026-06-01T12:00:00Z", threshold, 1)
		got, err := ParseMessage(body)
		if err == nil {
			t.Errorf("threshold %q: ParseMessage = %+v, nil; want an error", threshold, got)
			continue
		}
		if !strings.Contains(err.Error(), threshold) || !strings.Contains(err.Error(), TimeLayout) {
			t.Errorf("threshold %q: error %q should quote the threshold and the layout", threshold, err)
		}
	}
}
