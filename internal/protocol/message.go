package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Message is the queue message that stands for one idle runner.
type Message struct {
	ID            string `json:"id"`
	ResourceClass string `json:"resourceClass"`
	InstanceType  string `json:"instanceType"`
	CPU           int    `json:"cpu"`
	MemoryMiB     int    `json:"mmem"`
	UsageClass    string `json:"usageClass"`
	Threshold     string `json:"threshold"`
	// Optional facts of the instance, copied from its record: they never
	// change, so a stale message still tells them right.
	LaunchedAt      string `json:"launchedAt,omitempty"`
	TemplateID      string `json:"templateId,omitempty"`
	TemplateVersion string `json:"templateVersion,omitempty"`
}

// Body renders the message body.
func (m Message) Body() string {
	b, _ := json.Marshal(m) // cannot fail: only strings and ints
	return string(b)
}

// ParseMessage decodes a message body; every field is required.
func ParseMessage(body string) (Message, error) {
	var m Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return Message{}, fmt.Errorf("not a runner message: %w", err)
	}
	var missing []string
	for field, empty := range map[string]bool{
		"id": m.ID == "", "resourceClass": m.ResourceClass == "", "instanceType": m.InstanceType == "",
		"cpu": m.CPU <= 0, "mmem": m.MemoryMiB <= 0, "usageClass": m.UsageClass == "", "threshold": m.Threshold == "",
	} {
		if empty {
			missing = append(missing, field)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return Message{}, errors.New("runner message lacks " + strings.Join(missing, ", "))
	}
	if _, err := ParseTime(m.Threshold); err != nil {
		return Message{}, fmt.Errorf("runner message threshold %q is not %s", m.Threshold, TimeLayout)
	}
	if _, err := ParseTime(m.LaunchedAt); m.LaunchedAt != "" && err != nil {
		return Message{}, fmt.Errorf("runner message launchedAt %q is not %s", m.LaunchedAt, TimeLayout)
	}
	return m, nil
}
