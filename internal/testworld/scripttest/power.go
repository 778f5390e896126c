package scripttest

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Stopping and starting an instance stand-in as EC2 does. An agent stops
// its own instance with StopInstances, through the SigV4 proxy, which plays
// the part of EC2 the emulator does not: EC2 refuses to stop a Spot
// instance (the emulator stops it), and powers an instance it stopped off.
// While stopped, the stand-in follows the emulator's state of the instance
// and boots again once it runs, whoever started it (a test, or a claim,
// with StartInstances on the emulator). Stops that do not come from the
// instance's agent are not modelled: in the pool, only agents stop
// instances.

// statePoll is how often a stopped stand-in asks the emulator whether it
// runs again; only stopped ones ask.
const statePoll = 500 * time.Millisecond

// attach lets the proxy power i off when the emulator stops it.
func (p *SigV4Proxy) attach(i *Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.instances[i.ID] = i
}

// stopInstances answers a signed StopInstances (body) as EC2 does: refused
// for Spot instances with EC2's UnsupportedOperation, else stopped by the
// emulator, and then the stand-ins of the instances stopped power off.
func (p *SigV4Proxy) stopInstances(w http.ResponseWriter, r *http.Request, body []byte, forward http.Handler) {
	form, _ := url.ParseQuery(string(body))
	var stopping []*Instance
	p.mu.Lock()
	for k, vs := range form {
		if i, ok := p.instances[vs[0]]; ok && strings.HasPrefix(k, "InstanceId.") {
			stopping = append(stopping, i)
		}
	}
	p.mu.Unlock()
	for _, i := range stopping {
		if spot, err := i.spot(r.Context()); err != nil || spot {
			status, code, msg := http.StatusBadRequest, "UnsupportedOperation",
				fmt.Sprintf("You can't stop the Spot Instance '%s' because it is associated with a one-time Spot Instance request. You can only stop Spot Instances associated with persistent Spot Instance requests.", i.ID)
			if err != nil {
				status, code, msg = http.StatusServiceUnavailable, "Unavailable", err.Error()
			}
			ec2Error(w, status, code, msg)
			return
		}
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	forward.ServeHTTP(sw, r)
	if sw.status/100 == 2 {
		for _, i := range stopping {
			go i.powerOff()
		}
	}
}

// terminateInstances passes a signed TerminateInstances (body) to the
// emulator; the stand-ins of the instances it terminated shut down for
// good, as EC2's do.
func (p *SigV4Proxy) terminateInstances(w http.ResponseWriter, r *http.Request, body []byte, forward http.Handler) {
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	forward.ServeHTTP(sw, r)
	if sw.status/100 != 2 {
		return
	}
	form, _ := url.ParseQuery(string(body))
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, vs := range form {
		if i, ok := p.instances[vs[0]]; ok && strings.HasPrefix(k, "InstanceId.") {
			go func() {
				fmt.Fprintf(i.bootLog, "instance stand-in: terminated: shutting down\n")
				_ = i.end()
			}()
		}
	}
}

// ec2Error writes an EC2 Query API error.
func ec2Error(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>`,
		code, html.EscapeString(message), randomHex(16))
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(status int) {
	s.status = status
	s.ResponseWriter.WriteHeader(status)
}

// spot tells whether the emulator launched the instance as Spot.
func (i *Instance) spot(ctx context.Context) (bool, error) {
	inst, err := i.describe(ctx)
	return inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot, err
}

// describe is the emulator's description of the instance.
func (i *Instance) describe(ctx context.Context) (ec2types.Instance, error) {
	out, err := i.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{i.ID}})
	if err != nil {
		return ec2types.Instance{}, err
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			if aws.ToString(inst.InstanceId) == i.ID {
				return inst, nil
			}
		}
	}
	return ec2types.Instance{}, fmt.Errorf("the emulator has no instance %s", i.ID)
}

// powerOff ends the running boot of an instance the emulator stopped (every
// process, the network namespace and the mounts; the disk stays), and then
// waits for the instance to be started again.
func (i *Instance) powerOff() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.up == nil {
		return // stopped already, or ended
	}
	fmt.Fprintf(i.bootLog, "instance stand-in: stopped by the emulator: powering off\n")
	if err := i.up.halt(); err != nil {
		fmt.Fprintf(i.bootLog, "instance stand-in: powering off: %v\n", err)
	}
	i.up = nil
	go i.awaitStart()
}

// awaitStart boots the stopped instance again once the emulator says it
// runs (StartInstances moves it to pending, then running), unless it is
// terminated first or the test ends.
func (i *Instance) awaitStart() {
	tick := time.NewTicker(statePoll)
	defer tick.Stop()
	for {
		select {
		case <-i.ended:
			return
		case <-tick.C:
		}
		inst, err := i.describe(context.Background())
		if err != nil || inst.State == nil {
			continue
		}
		switch inst.State.Name {
		case ec2types.InstanceStateNamePending, ec2types.InstanceStateNameRunning:
			fmt.Fprintf(i.bootLog, "instance stand-in: started by the emulator: booting\n")
			if err := i.powerOn(); err != nil {
				fmt.Fprintf(i.bootLog, "instance stand-in: booting: %v\n", err)
			}
			return
		case ec2types.InstanceStateNameShuttingDown, ec2types.InstanceStateNameTerminated:
			return
		}
	}
}
