package simulate

import (
	"time"

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
	// HotClaim is a pool runner's time to runner: a whole `terraform
	// apply` of a one-runner claim from a warm pool with agents polling
	// every 250 ms, 480 ms (docs/guides/performance.md, "End to end").
	// It leaves out the GitHub registration a warm runner makes for its
	// new run (not measured here; a few seconds, which a cold runner pays
	// inside ColdBoot too).
	HotClaim = 480 * time.Millisecond
	// SelfTerminationGrace: an idle agent terminates itself once its idle
	// deadline is this far past, at its first check after (it checks
	// every SelfCheckInterval): PROTOCOL.md, "The agent's loop", step 2.
	SelfTerminationGrace = time.Minute
	SelfCheckInterval    = 15 * time.Second
	// MinimumBilled: EC2 bills Linux on-demand instances per second with
	// a 60 s minimum (https://aws.amazon.com/ec2/pricing/on-demand/).
	MinimumBilled = time.Minute
	// RootVolumeGiB is each runner's gp3 root volume, examples/complete's
	// default (root_volume_size = 40); it lives as long as its instance.
	RootVolumeGiB = 40
	// GP3PerGiBMonth is the EBS gp3 list price in us-east-1, USD per
	// GiB-month (https://aws.amazon.com/ebs/pricing/, $0.08; the 3,000
	// IOPS and 125 MB/s included cost nothing more).
	GP3PerGiBMonth = 0.08
	// hoursPerMonth is the month AWS prorates EBS over (730 hours).
	hoursPerMonth = 730
)

// Sources of a runner, as claim.Instance.Source says. Warm tiers add
// theirs (a stopped runner's start) to LatencyBySource.
const (
	SourcePool  = claim.SourcePool
	SourceFleet = claim.SourceFleet
)

// LatencyBySource is a job's time to runner by where its runner came from.
func LatencyBySource(coldBoot time.Duration) map[string]time.Duration {
	return map[string]time.Duration{SourcePool: HotClaim, SourceFleet: coldBoot}
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

// instanceCost is what an instance running for d costs, EC2 and EBS.
func instanceCost(c Class, d time.Duration) float64 {
	billed := max(d, MinimumBilled).Hours()
	return billed*c.OnDemandPerHour + d.Hours()*RootVolumeGiB*GP3PerGiBMonth/hoursPerMonth
}
