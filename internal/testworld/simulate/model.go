package simulate

import (
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
)

// The simulation's only model: AWS's latencies and list prices. Everything
// else (which runner a claim gets, when a runner leaves the pool) is the
// real claim code deciding on the fakes. Each figure is documented with its
// source here and in the guide (templates/guides/simulate.md.tmpl).
const (
	// ColdBoot is a fleet runner's time to runner: CreateFleet, EC2
	// pending to running, the OS boot, the agent's start and the GitHub
	// runner's registration. 75 s is the middle of the 60-90 s that issue
	// 13 and the claim's default fleet_validation_wait (180 s, a ceiling)
	// allow for; this repository has not measured it on AWS (the emulator
	// boots nothing). Measure yours (a claim's create time when
	// created_count > 0) and pass -cold-boot.
	ColdBoot = 75 * time.Second
	// HotClaim is the claim's own part of a pool runner's time to runner:
	// a whole `terraform apply` of a one-runner claim from a warm pool
	// with agents polling every 250 ms, 480 ms (docs/guides/performance.md,
	// "End to end").
	HotClaim = 480 * time.Millisecond
	// RunnerRegistration is the rest of it: the GitHub runner's
	// registration for the run, config.sh and then run.sh until its
	// listener has a session (performance guide, "Runner registration").
	// Estimated from the runner's source (actions/runner,
	// ConfigurationManager.cs and MessageListener.cs): a 2048-bit RSA key,
	// 0.2-0.4 s measured here with OpenSSL, which .NET uses on Linux; two
	// starts of the .NET listener, 0.5 s each, and 12 sequential HTTPS
	// requests to GitHub (9 in config.sh, 3 before the listener listens),
	// 150 ms each, both assumed: GitHub publishes no figure, and this
	// machine can run neither the runner nor reach GitHub. A cold or
	// stopped runner pays it inside ColdBoot and StoppedStart.
	RunnerRegistration = 3 * time.Second
	// PoolClaim is a pool runner's time to runner.
	PoolClaim = HotClaim + RunnerRegistration
	// StoppedStart is a stopped runner's time to runner: StartInstances,
	// EC2's pending to running, the OS booting from its prepared volume,
	// the agent's service and the runner's registration for the run. AWS
	// publishes no figure (its user guide says a start "can take a few
	// minutes" to reach running, a ceiling); 15 s is what two vendors of
	// EC2 runner pools publish for theirs: RunsOn "< 15 s" queue time from
	// a stopped instance, Linux on m7a (https://runs-on.com/runners/pools),
	// WarpBuild "~15 seconds" from a standby disk
	// (https://docs.warpbuild.com/byoc/standby-disks). This repository has
	// not measured it on AWS: measure yours (a claim's create time when
	// started_count > 0 and created_count = 0) and pass -stopped-start.
	StoppedStart = 15 * time.Second
	// SelfTerminationGrace: an idle agent stops or terminates its
	// instance once its idle deadline is this far past, at its first
	// check after (it checks every SelfCheckInterval from its boot):
	// the protocol guide, "The agent". The agent's own defaults,
	// which the simulated agents (package agent) run with.
	SelfTerminationGrace = agent.DefaultSelfTerminationGrace
	SelfCheckInterval    = agent.DefaultSelfCheckInterval
	// MinimumBilled: EC2 bills Linux on-demand instances per second with
	// a 60 s minimum (https://aws.amazon.com/ec2/pricing/on-demand/), at
	// each launch and at each start of a stopped instance (EC2 API
	// Reference, StopInstances: "Every time you start your instance,
	// Amazon EC2 charges a one-minute minimum"). A stopped (or stopping)
	// instance is not billed, its volumes are (EC2 User Guide, "Instance
	// state changes"). Billing is counted here from the launch or start
	// call: the few seconds in pending, not billed, are paid.
	MinimumBilled = time.Minute
	// RootVolumeGiB is each runner's gp3 root volume, examples/complete's
	// default (root_volume_size = 40); it lives as long as its instance,
	// running or stopped.
	RootVolumeGiB = 40
	// GP3PerGiBMonth is the EBS gp3 list price in us-east-1, USD per
	// GiB-month (https://aws.amazon.com/ebs/pricing/, $0.08; the 3,000
	// IOPS and 125 MB/s included cost nothing more).
	GP3PerGiBMonth = 0.08
	// hoursPerMonth is the month AWS prorates EBS over (730 hours).
	hoursPerMonth = 730
)

// Sources of a runner, as claim.Instance.Source says.
const (
	SourcePool    = claim.SourcePool
	SourceStopped = claim.SourceStopped
	SourceFleet   = claim.SourceFleet
)

// Sources lists them, warmest first.
var Sources = []string{SourcePool, SourceStopped, SourceFleet}

// LatencyBySource is a job's time to runner by where its runner came
// from. A launched instance's agent answers coldBoot after the launch, a
// started one's stoppedStart after the start, on the replay's clock.
func LatencyBySource(coldBoot, stoppedStart time.Duration) map[string]time.Duration {
	return map[string]time.Duration{SourcePool: PoolClaim, SourceStopped: stoppedStart, SourceFleet: coldBoot}
}

// Class is a resource class of the simulated pool and the instance type
// its fleet launches.
type Class struct {
	CPU, MemoryMiB int
	InstanceType   string
	// OnDemandPerHour is the Linux on-demand list price in us-east-1, USD
	// (https://aws.amazon.com/ec2/pricing/on-demand/: c6i.large $0.085,
	// c6i.xlarge $0.17; not looked up live: prices change, the page rules).
	OnDemandPerHour float64
}

// Classes are the simulated pool's resource classes, the provider's
// default large and xlarge.
var Classes = map[string]Class{
	"large":  {CPU: 2, MemoryMiB: 4096, InstanceType: "c6i.large", OnDemandPerHour: 0.085},
	"xlarge": {CPU: 4, MemoryMiB: 8192, InstanceType: "c6i.xlarge", OnDemandPerHour: 0.17},
}

// runningCost is what EC2 bills for one span of an instance running, from
// its launch or start to its stop or termination.
func runningCost(c Class, d time.Duration) float64 {
	return max(d, MinimumBilled).Hours() * c.OnDemandPerHour
}

// volumeCost is what its root volume costs over an instance's life.
func volumeCost(life time.Duration) float64 {
	return life.Hours() * RootVolumeGiB * GP3PerGiBMonth / hoursPerMonth
}
