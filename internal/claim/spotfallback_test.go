package claim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
)

// spot makes a request a spot claim with the fallback given.
func spot(fallback string) func(*Request) {
	return func(r *Request) { r.UsageClass, r.SpotFallback = protocol.UsageSpot, fallback }
}

// shortOf makes the fake EC2 launch at most n instances of a usage class
// per fleet and answer the rest as s says (its code and message).
func (e *env) shortOf(s faultproxy.Shortage) {
	e.ec2.Mu.Lock()
	defer e.ec2.Mu.Unlock()
	if e.ec2.Capacity == nil {
		e.ec2.Capacity, e.ec2.ShortError = map[string]int{}, map[string]ec2types.CreateFleetError{}
	}
	e.ec2.Capacity[s.Lifecycle] = s.Available
	msg := strings.ReplaceAll(s.Message, "{instanceType}", "c6i.large") // the fake's one type
	e.ec2.ShortError[s.Lifecycle] = ec2types.CreateFleetError{ErrorCode: aws.String(s.Code), ErrorMessage: aws.String(msg)}
}

func usageClasses(insts []Instance) []string {
	out := make([]string, len(insts))
	for i, inst := range insts {
		out[i] = inst.UsageClass
	}
	return out
}

// A spot claim that EC2 has too little spot capacity for takes on-demand
// instances for the rest, with a second fleet of its own ClientToken: for
// each of EC2's spot capacity errors, none or some of the spot instances.
// The claim's instances, its record and the instance records say which
// runners are which; its warnings say why.
func TestSpotClaimFallsBackToOnDemand(t *testing.T) {
	for _, tc := range []struct {
		name  string
		short faultproxy.Shortage
	}{
		{"no spot capacity", faultproxy.SpotShortage(0, faultproxy.InsufficientInstanceCapacity)},
		{"partial fill", faultproxy.SpotShortage(1, faultproxy.InsufficientInstanceCapacity)},
		{"unfulfillable", faultproxy.SpotShortage(2, faultproxy.UnfulfillableCapacity)},
		{"spot quota", faultproxy.SpotShortage(1, faultproxy.MaxSpotInstanceCountExceeded)},
		{"max price", faultproxy.SpotShortage(0, faultproxy.SpotMaxPriceTooLow)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.shortOf(tc.short)
			res, err := e.create(3, spot(SpotFallbackOnDemand))
			if err != nil {
				t.Fatal(err)
			}
			spots := tc.short.Available
			want := slices.Concat(slices.Repeat([]string{protocol.UsageSpot}, spots), slices.Repeat([]string{protocol.UsageOnDemand}, 3-spots))
			if got := usageClasses(res.Instances); !slices.Equal(got, want) || res.Created != 3 {
				t.Errorf("created %d with usage classes %v, want 3: %v", res.Created, got, want)
			}
			for _, inst := range res.Instances {
				if r := e.db.instance(t, inst.ID); r.UsageClass != inst.UsageClass || r.State != protocol.StateRunning {
					t.Errorf("%s: record %s of usage class %s, want running %s", inst.ID, r.State, r.UsageClass, inst.UsageClass)
				}
			}
			if rec, _ := e.claimRecord(); !slices.Equal(usageClasses(rec.Instances), want) || rec.Request.SpotFallback != SpotFallbackOnDemand {
				t.Errorf("claim record: instances %v, spot fallback %q; want %v, on-demand", usageClasses(rec.Instances), rec.Request.SpotFallback, want)
			}
			fleets := e.ec2.FleetInputs()
			if len(fleets) != 2 {
				t.Fatalf("%d CreateFleet calls, want the spot fleet and the on-demand one", len(fleets))
			}
			spotFleet, odFleet := fleets[0].TargetCapacitySpecification, fleets[1].TargetCapacitySpecification
			if spotFleet.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeSpot || aws.ToInt32(spotFleet.TotalTargetCapacity) != 3 ||
				odFleet.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeOnDemand || aws.ToInt32(odFleet.TotalTargetCapacity) != int32(3-spots) ||
				aws.ToInt32(odFleet.OnDemandTargetCapacity) != int32(3-spots) || fleets[1].SpotOptions != nil {
				t.Errorf("fleets asked %+v then %+v; want 3 spot, then %d on-demand", spotFleet, odFleet, 3-spots)
			}
			if aws.ToString(fleets[0].ClientToken) == aws.ToString(fleets[1].ClientToken) {
				t.Error("the on-demand fleet reused the spot fleet's ClientToken: EC2 answers IdempotentParameterMismatch")
			}
			warning := strings.Join(res.Warnings, "\n")
			for _, part := range []string{tc.short.Code + ": " + tc.short.Message, fmt.Sprintf("launched %d on-demand instance(s) instead", 3-spots)} {
				if !strings.Contains(warning, part) {
					t.Errorf("warnings %q do not say %q", res.Warnings, part)
				}
			}
		})
	}
}

// A spot claim that does not fall back fails when EC2 has too little spot
// capacity, as before: what the spot fleet launched is terminated and the
// error gives EC2's reason. An on-demand claim short of capacity fails
// whatever its spot fallback says: there is nothing to fall back to.
func TestShortClaimWithoutFallbackFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Request)
		short  faultproxy.Shortage
		want   string
	}{
		{"spot, fallback none", spot(SpotFallbackNone), faultproxy.SpotShortage(1, faultproxy.MaxSpotInstanceCountExceeded),
			"CreateFleet launched 1 of 2 spot instance(s) (MaxSpotInstanceCountExceeded: Max spot instance count exceeded)"},
		{"spot, recorded before fallbacks", spot(""), faultproxy.SpotShortage(1, faultproxy.InsufficientInstanceCapacity),
			"CreateFleet launched 1 of 2 spot instance(s) (InsufficientInstanceCapacity: There is no Spot capacity available that matches your request.)"},
		{"on-demand", func(r *Request) { r.SpotFallback = SpotFallbackOnDemand }, faultproxy.OnDemandShortage(1),
			"CreateFleet launched 1 of 2 on-demand instance(s) (InsufficientInstanceCapacity: We currently do not have sufficient c6i.large capacity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.shortOf(tc.short)
			_, err := e.create(2, tc.change)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "i-f1: launched; terminated") {
				t.Fatalf("error %v, want it to say %q and that i-f1 was terminated", err, tc.want)
			}
			if n := len(e.ec2.FleetInputs()); n != 1 {
				t.Errorf("%d CreateFleet calls, want 1: no fallback", n)
			}
			if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-f1"}) {
				t.Errorf("terminated %v, want i-f1", got)
			}
			e.assertNothingHeld(t)
		})
	}
}

// A spot claim short of spot capacity, whose on-demand fallback is short
// too, fails: the spot instances (recorded before the fallback) and the
// on-demand ones are all terminated, and the error gives both reasons.
func TestSpotFallbackShortOfOnDemandFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.shortOf(faultproxy.SpotShortage(1, faultproxy.InsufficientInstanceCapacity))
	e.shortOf(faultproxy.OnDemandShortage(1))
	_, err := e.create(3, spot(SpotFallbackOnDemand))
	if err == nil {
		t.Fatal("the claim succeeded")
	}
	for _, want := range []string{
		"EC2 launched 1 of 3 spot instance(s) (InsufficientInstanceCapacity: There is no Spot capacity available that matches your request.)",
		"launching 2 on-demand instance(s) instead: CreateFleet launched 1 of 2 on-demand instance(s) (InsufficientInstanceCapacity",
		"reused 0, created 2",
		"i-f1: launched for the run; terminated", "i-f2: launched; terminated",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if got := e.ec2.TerminatedIDs(); !slices.Equal(got, []string{"i-f1", "i-f2"}) {
		t.Errorf("terminated %v, want i-f1 (spot) and i-f2 (on-demand)", got)
	}
	e.assertNothingHeld(t)
}

// The on-demand runners of a fallback go back to the pool as on-demand
// runners, the spot ones as spot: a later spot claim takes only the spot
// ones (a claim's matching asks for its own usage class, fallback or not)
// and launches for the rest, an on-demand claim takes the on-demand one.
func TestFallbackRunnersReturnByUsageClass(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.shortOf(faultproxy.SpotShortage(1, faultproxy.InsufficientInstanceCapacity))
	res, err := e.create(2, spot(SpotFallbackOnDemand))
	if err != nil {
		t.Fatal(err)
	}
	spotID, odID := res.Instances[0].ID, res.Instances[1].ID
	if _, err := e.release(); err != nil {
		t.Fatal(err)
	}
	queued := map[string]string{}
	for _, m := range e.sqs.queued(t, largeURL) {
		queued[m.ID] = m.UsageClass
	}
	if queued[spotID] != protocol.UsageSpot || queued[odID] != protocol.UsageOnDemand || len(queued) != 2 {
		t.Fatalf("queue %v, want %s as spot and %s as on-demand", queued, spotID, odID)
	}
	for id, usage := range queued {
		if r := e.db.instance(t, id); r.State != protocol.StateIdle || r.UsageClass != usage {
			t.Errorf("%s: record %s of usage class %s, want idle %s", id, r.State, r.UsageClass, usage)
		}
	}

	// Spot, 2, still short of spot capacity: the spot runner from the pool,
	// and a launch (on-demand, by fallback) rather than the on-demand runner.
	res, err = e.create(2, spot(SpotFallbackOnDemand), func(r *Request) { r.RunID = "run-2" })
	if err != nil {
		t.Fatal(err)
	}
	if got := sources(res); !slices.Equal(got[SourcePool], []string{spotID}) || len(got[SourceFleet]) != 1 || slices.Contains(got[SourceFleet], odID) {
		t.Errorf("spot claim: sources %v, want %s from the pool and one launched", got, spotID)
	}
	if r := e.db.instance(t, odID); r.State != protocol.StateIdle || !slices.Contains(e.sqs.queuedIDs(t, largeURL), odID) {
		t.Errorf("the on-demand runner %s is %s, queue %v; want it left idle in the pool", odID, r.State, e.sqs.queuedIDs(t, largeURL))
	}

	// On-demand, 1: the fallback's on-demand runner.
	res, err = e.create(1, func(r *Request) { r.RunID = "run-3" })
	if err != nil {
		t.Fatal(err)
	}
	if got := sources(res); !slices.Equal(got[SourcePool], []string{odID}) || res.Created != 0 {
		t.Errorf("on-demand claim: sources %v, want %s from the pool", got, odID)
	}
	if _, err := e.c.Release(context.Background(), testPool, "run-2"); err != nil {
		t.Fatal(err)
	}
}

// A fleet's reasons are EC2's distinct errors, in order, at most
// maxFleetReasons of them.
func TestFleetErrors(t *testing.T) {
	fe := func(code, msg string) ec2types.CreateFleetError {
		return ec2types.CreateFleetError{ErrorCode: aws.String(code), ErrorMessage: aws.String(msg)}
	}
	ice := fe("InsufficientInstanceCapacity", "There is no Spot capacity available that matches your request.")
	if got := fleetErrors([]ec2types.CreateFleetError{ice, ice, fe("MaxSpotInstanceCountExceeded", "Max spot instance count exceeded"), ice}); got !=
		"InsufficientInstanceCapacity: There is no Spot capacity available that matches your request.; MaxSpotInstanceCountExceeded: Max spot instance count exceeded" {
		t.Errorf("fleetErrors = %q", got)
	}
	if got := fleetErrors(nil); got != "EC2 gave no reason" {
		t.Errorf("fleetErrors(none) = %q", got)
	}
	var many []ec2types.CreateFleetError
	for i := range 8 {
		many = append(many, fe("InsufficientInstanceCapacity", fmt.Sprintf("We currently do not have sufficient c%d.large capacity", i)))
	}
	if got := fleetErrors(many); strings.Count(got, "InsufficientInstanceCapacity") != maxFleetReasons || !strings.HasSuffix(got, "; and 3 other reason(s)") {
		t.Errorf("fleetErrors(8 distinct) = %q", got)
	}
}
