package simulate

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agenttest"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsfake"
)

// instanceLife is what one instance did and cost, and its machine. The
// instance is running (runningSince set), stopped (stoppedSince set) or
// ended.
type instanceLife struct {
	class    string
	launched time.Time
	ended    time.Time // zero: not ended

	runningSince, stoppedSince time.Time
	runs                       []time.Duration // the running spans that ended
	stopped                    time.Duration   // the stopped spans that ended

	busy time.Duration // running jobs
	held time.Duration // claimed by runs (busy, booting, waiting for the run's other jobs)

	terminatedByIdle bool // its agent terminated it at its idle deadline

	machine // its machine and agent (World.mu)
	// steps serializes its agent's steps, which run in the goroutines of
	// the calls that change its record and of the replay's events.
	steps sync.Mutex
}

// newLife is an instance launched now, of class: its machine is new, and
// its agent boots later.
func newLife(class string, now time.Time) *instanceLife {
	return &instanceLife{class: class, launched: now, runningSince: now,
		machine: machine{host: &agenttest.Host{}, runner: &agenttest.Runner{}}}
}

// stop ends its running span at now (when running).
func (l *instanceLife) stop(now time.Time) {
	if !l.runningSince.IsZero() {
		l.runs = append(l.runs, now.Sub(l.runningSince))
		l.runningSince = time.Time{}
		l.stoppedSince = now
	}
	l.down()
}

// start ends its stopped span at now, and tells whether it was stopped.
func (l *instanceLife) start(now time.Time) bool {
	if l.stoppedSince.IsZero() {
		return false
	}
	l.stopped += now.Sub(l.stoppedSince)
	l.stoppedSince = time.Time{}
	l.runningSince = now
	l.boots++
	return true
}

// end ends its life at now (when not ended yet).
func (l *instanceLife) end(now time.Time) {
	if !l.ended.IsZero() {
		return
	}
	if !l.runningSince.IsZero() {
		l.runs = append(l.runs, now.Sub(l.runningSince))
	}
	if !l.stoppedSince.IsZero() {
		l.stopped += now.Sub(l.stoppedSince)
	}
	l.runningSince, l.stoppedSince, l.ended = time.Time{}, time.Time{}, now
	l.down()
}

// running is how long it ran, in all.
func (l *instanceLife) running() (d time.Duration) {
	for _, r := range l.runs {
		d += r
	}
	return d
}

// cost is what EC2 and EBS billed for it.
func (l *instanceLife) cost() float64 {
	c := Classes[l.class]
	total := volumeCost(l.ended.Sub(l.launched))
	for _, r := range l.runs {
		total += runningCost(c, r)
	}
	return total
}

// meteredEC2 records when each instance launches, stops, starts and ends,
// and boots its agent (World.boot) a launch's or a start's latency later.
type meteredEC2 struct {
	*awsfake.EC2
	w *World
}

func (m meteredEC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	out, err := m.EC2.CreateFleet(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	now := m.w.clock.Now()
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	for _, g := range out.Instances {
		for _, id := range g.InstanceIds {
			m.w.instances[id] = newLife(classOf(string(g.InstanceType)), now)
			m.w.bootAfter(id, m.w.latency[SourceFleet])
		}
	}
	return out, nil
}

func (m meteredEC2) StopInstances(ctx context.Context, in *ec2.StopInstancesInput, opts ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error) {
	out, err := m.EC2.StopInstances(ctx, in, opts...)
	if err == nil {
		m.w.eachLife(in.InstanceIds, (*instanceLife).stop)
	}
	return out, err
}

func (m meteredEC2) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	out, err := m.EC2.TerminateInstances(ctx, in, opts...)
	if err == nil {
		m.w.eachLife(in.InstanceIds, (*instanceLife).end)
	}
	return out, err
}

// started is awsfake.EC2.OnStart: StartInstances started id, whose agent
// boots the stopped tier's latency later.
func (w *World) started(id string) {
	w.eachLife([]string{id}, func(l *instanceLife, now time.Time) {
		if l.start(now) {
			w.bootAfter(id, w.latency[SourceStopped])
		}
	})
}

// eachLife does what an EC2 call did to the lives of ids, now, with w.mu
// held.
func (w *World) eachLife(ids []string, do func(l *instanceLife, now time.Time)) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if l := w.instances[id]; l != nil {
			do(l, now)
		}
	}
}

func classOf(instanceType string) string {
	for name, c := range Classes {
		if c.InstanceType == instanceType {
			return name
		}
	}
	return ""
}
