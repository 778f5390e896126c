package claim

import (
	"fmt"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Timings are the claim's check deadlines; the defaults are the seeds'.
type Timings struct {
	HeartbeatMaxAge     time.Duration // a heartbeat older than this is unhealthy
	RegistrationWait    time.Duration // for UD_REG_OK after claiming a warm runner
	FleetValidationWait time.Duration // for UD_REG_OK and a heartbeat after CreateFleet
	ReleaseWait         time.Duration // for UD_REMOVE_REG_REMOVE_RUN_OK after release
	PollInterval        time.Duration // between reads of agent signals
}

// DefaultTimings are the seeds' values.
func DefaultTimings() Timings {
	return Timings{
		HeartbeatMaxAge:     15 * time.Second,
		RegistrationWait:    20 * time.Second,
		FleetValidationWait: 180 * time.Second,
		ReleaseWait:         120 * time.Second,
		PollInterval:        250 * time.Millisecond,
	}
}

// Request is one claim: InstanceCount runners of a class for a run.
type Request struct {
	Pool  string
	RunID string
	// Label is the one label the runners register with: the run id and a
	// secret (protocol.NewLabel). "" in a Request to Create: it makes one.
	// A claim recorded before labels carried a secret has the run id.
	Label string
	// RunnerGroup is the organization's runner group the runners register
	// in ("": the default group). Only organization runners have groups.
	RunnerGroup string
	// Claimant says who makes the claim, such as a CI job; "" for none. An
	// apply finds the run id's record made by another claimant an error,
	// not a claim to wait for or adopt: two claimants never share runners.
	Claimant      string
	InstanceCount int
	ResourceClass string
	UsageClass    string
	AllowedTypes  []string
	MaxRuntime    time.Duration // 0: the pool's
	FleetFallback bool
	// SpotFallback is what a spot claim launches for the spot capacity
	// EC2 does not have: SpotFallbackOnDemand, or nothing (the claim
	// fails; SpotFallbackNone or "", as claims recorded before it).
	SpotFallback string
	Timings      Timings
	// Repository ("owner/name") and WorkflowRun name the GitHub Actions
	// workflow run attempt the claim serves: once GitHub says it ended,
	// the pool's maintenance releases a claim its run did not release,
	// and while a job of it runs on the claim's runners, it holds them
	// past their deadline (internal/maintenance). "" and zero: not known (a claim
	// made outside Actions), neither released nor held so.
	Repository  string
	WorkflowRun WorkflowRun
	// RegisterWithRepository registers the runners with Repository, as
	// its repository-level runners, instead of the pool's GitHub target:
	// no label and no runner group of another repository reaches them.
	// Repository's owner must be the pool's GitHub owner; a pool without
	// a GitHub target registers its runners nowhere either way. The
	// release mints the removal token for the same repository. The broker
	// sets it on every claim it makes (no runner group then).
	RegisterWithRepository bool
}

// WorkflowRun is one attempt of a GitHub Actions workflow run: its
// GITHUB_RUN_ID and GITHUB_RUN_ATTEMPT.
type WorkflowRun struct {
	ID      int64
	Attempt int
}

// RunAttempt is the workflow run attempt the claim serves; ok is false
// when the claim does not know it.
func (r Request) RunAttempt() (a github.RunAttempt, ok bool) {
	owner, name, err := protocol.ParseRepository(r.Repository)
	if err != nil || r.WorkflowRun.ID <= 0 || r.WorkflowRun.Attempt <= 0 {
		return a, false
	}
	return github.RunAttempt{Repository: github.Target{Owner: owner, Repository: name}, RunID: r.WorkflowRun.ID, Attempt: r.WorkflowRun.Attempt}, true
}

// What a spot claim falls back to when EC2 has too little spot capacity.
const (
	SpotFallbackOnDemand = protocol.UsageOnDemand // on-demand instances for the rest
	SpotFallbackNone     = "none"                 // none: the claim fails
)

// fallsBack tells whether the claim launches on-demand instances for the
// spot capacity EC2 does not have.
func (r Request) fallsBack() bool {
	return r.UsageClass == protocol.UsageSpot && r.SpotFallback == SpotFallbackOnDemand
}

// Sources of a claimed instance.
const (
	SourcePool    = "pool"
	SourceStopped = "stopped"
	SourceFleet   = "fleet"
)

// Instance is one runner a claim holds.
type Instance struct {
	ID           string `json:"id"`
	InstanceType string `json:"instanceType"`
	UsageClass   string `json:"usageClass"`
	Source       string `json:"source"`
	// When, from which launch template and which of its versions it was
	// launched ("" unknown).
	LaunchedAt      string `json:"launchedAt,omitempty"`
	TemplateID      string `json:"templateId,omitempty"`
	TemplateVersion string `json:"templateVersion,omitempty"`
}

// CountSources counts runners by where they came from: the pool's queue,
// the stopped tier, a launch.
func CountSources(insts []Instance) (reused, started, created int) {
	for _, inst := range insts {
		switch inst.Source {
		case SourcePool:
			reused++
		case SourceStopped:
			started++
		default:
			created++
		}
	}
	return reused, started, created
}

// wants derives what the Pickup Manager filters for.
func (r Request) wants(cfg protocol.PoolConfig) (Wants, error) {
	class, ok := cfg.ResourceClasses[r.ResourceClass]
	if !ok {
		return Wants{}, fmt.Errorf("pool %s has no resource class %q (it has %v)", r.Pool, r.ResourceClass, protocol.SortedClassNames(cfg.ResourceClasses))
	}
	return Wants{ResourceClass: r.ResourceClass, Class: class, AllowedTypes: r.AllowedTypes, UsageClass: r.UsageClass, MaxRunnerAge: time.Duration(cfg.MaxRunnerAge)}, nil
}

// maxRuntime is the claim's own, or the pool's.
func (r Request) maxRuntime(cfg protocol.PoolConfig) time.Duration {
	if r.MaxRuntime > 0 {
		return r.MaxRuntime
	}
	return time.Duration(cfg.MaxRuntime)
}
