package claim

import (
	"fmt"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Verdict is what the Pickup Manager does with a received message.
type Verdict int

const (
	// Discard drops a message that can never be valid (it is already deleted).
	Discard Verdict = iota
	// Requeue sends a valid runner back for other claims, with a short delay.
	Requeue
	// Accept hands the runner to a claim worker.
	Accept
	// Retire drops the message of a runner that must leave the pool
	// (outdated, or past the pool's maximum runner age): the claim ends it.
	Retire
)

func (v Verdict) String() string {
	return [...]string{"discard", "requeue", "accept", "retire"}[v]
}

// Wants is what a claim asks of a runner.
type Wants struct {
	ResourceClass string
	Class         protocol.ResourceClass
	AllowedTypes  []string
	UsageClass    string
	// Template is the launch template version the pool launches now (zero:
	// unknown, no runner is outdated); MaxRunnerAge the pool's (0: none).
	Template     TemplateRef
	MaxRunnerAge time.Duration
}

// Classify decides a message's fate as the pool protocol says; reason explains
// every verdict but Accept.
func Classify(body string, w Wants, now time.Time) (protocol.Message, Verdict, string) {
	m, err := protocol.ParseMessage(body)
	if err != nil {
		return m, Discard, err.Error()
	}
	switch {
	case m.ResourceClass != w.ResourceClass:
		return m, Discard, fmt.Sprintf("resource class %q in the queue of %q", m.ResourceClass, w.ResourceClass)
	case m.CPU != w.Class.CPU:
		return m, Discard, fmt.Sprintf("cpu %d, class %s has %d", m.CPU, w.ResourceClass, w.Class.CPU)
	case m.MemoryMiB < w.Class.MemoryMiB:
		return m, Discard, fmt.Sprintf("memory %d MiB, below class %s's %d", m.MemoryMiB, w.ResourceClass, w.Class.MemoryMiB)
	case m.Threshold <= protocol.FormatTime(now):
		return m, Discard, fmt.Sprintf("idle deadline %s has passed", m.Threshold)
	}
	if why := Retirement(m.LaunchedAt, launchedFrom(m.TemplateID, m.TemplateVersion), w.Template, w.MaxRunnerAge, now); why != "" {
		return m, Retire, why
	}
	switch {
	case !MatchInstanceType(w.AllowedTypes, m.InstanceType):
		return m, Requeue, fmt.Sprintf("instance type %s not allowed", m.InstanceType)
	case m.UsageClass != w.UsageClass:
		return m, Requeue, fmt.Sprintf("usage class %s, wanted %s", m.UsageClass, w.UsageClass)
	}
	return m, Accept, ""
}
