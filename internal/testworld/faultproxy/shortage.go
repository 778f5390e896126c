package faultproxy

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Shortage is EC2 without the capacity a CreateFleet asks for, which the
// emulator never is (moto fills every fleet and never answers Errors[]).
// An instant fleet whose default capacity type is Lifecycle launches at
// most Available instances, and EC2 answers for the rest as AWS answers an
// instant fleet it cannot fill: HTTP 200 with the instances it launched and
// an Errors[] entry for each launch template override it could not fill
// (the override, the lifecycle, Code and Message; "{instanceType}" in
// Message is the override's instance type). The emulator gets the request
// for Available instances only, so it launches nothing the answer leaves
// out; with Available 0 it gets nothing, and the proxy answers itself (a
// fleet id, no instances, the errors).
type Shortage struct {
	Lifecycle     string // "spot" or "on-demand"
	Available     int    // instances one CreateFleet can launch
	Code, Message string
}

// EC2's capacity errors, as a CreateFleet's Errors[] carry them (the codes
// of https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html;
// the messages as EC2 words them in answers seen from AWS).
const (
	// InsufficientInstanceCapacity: no capacity in the pools asked for;
	// for Spot, EC2's message is SpotCapacityMessage, for On-Demand
	// OnDemandCapacityMessage.
	InsufficientInstanceCapacity = "InsufficientInstanceCapacity"
	// UnfulfillableCapacity: "At this time there isn't enough spare
	// capacity to fulfill your request for Spot Instances" (the errors
	// overview).
	UnfulfillableCapacity = "UnfulfillableCapacity"
	// MaxSpotInstanceCountExceeded: the account's Spot quota is used up.
	MaxSpotInstanceCountExceeded = "MaxSpotInstanceCountExceeded"
	// SpotMaxPriceTooLow: the maximum Spot price asked (the launch
	// template's) is below the Spot price.
	SpotMaxPriceTooLow = "SpotMaxPriceTooLow"

	SpotCapacityMessage     = "There is no Spot capacity available that matches your request."
	OnDemandCapacityMessage = "We currently do not have sufficient {instanceType} capacity in the Availability Zone you requested. Our system will be working on provisioning additional capacity. You can currently get {instanceType} capacity by not specifying an Availability Zone in your request or choosing another Availability Zone."
)

// spotMessages are EC2's messages for the Spot capacity errors.
var spotMessages = map[string]string{
	InsufficientInstanceCapacity: SpotCapacityMessage,
	UnfulfillableCapacity:        "Unable to fulfill capacity due to your request configuration. Please adjust your request and try again.",
	MaxSpotInstanceCountExceeded: "Max spot instance count exceeded",
	SpotMaxPriceTooLow:           "Your Spot request price of 0.015 is lower than the minimum required Spot request fulfillment price of 0.0735.",
}

// SpotShortage is EC2 with available Spot instances per fleet, answering
// the rest with code (one of the Spot capacity errors above) and EC2's
// message for it.
func SpotShortage(available int, code string) Shortage {
	msg, ok := spotMessages[code]
	if !ok {
		panic("faultproxy: no Spot capacity error " + code)
	}
	return Shortage{Lifecycle: "spot", Available: available, Code: code, Message: msg}
}

// OnDemandShortage is EC2 with available On-Demand instances per fleet,
// answering the rest InsufficientInstanceCapacity.
func OnDemandShortage(available int) Shortage {
	return Shortage{Lifecycle: "on-demand", Available: available, Code: InsufficientInstanceCapacity, Message: OnDemandCapacityMessage}
}

// SetShortages replaces the shortages in force (none: EC2 fills every
// fleet, as the emulator does); the first of a fleet's lifecycle applies.
// They apply to requests forwarded or answered from the target, whatever
// the rules: a request the rules fail (Throttle, ServerError, DropBefore)
// never reaches EC2.
func (p *Proxy) SetShortages(s ...Shortage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shortages = slices.Clone(s)
}

// shortFleet is a CreateFleet under a shortage: the request to forward
// (nil: EC2 launches nothing, the proxy answers), and the errorSet items
// its answer gets.
type shortFleet struct {
	forward []byte
	errors  []byte
}

// capTarget is the capacity a fleet asks for of each of its lifecycles, by
// form key.
var capTarget = map[string]string{"spot": "TargetCapacitySpecification.SpotTargetCapacity", "on-demand": "TargetCapacitySpecification.OnDemandTargetCapacity"}

// shortFleet applies the shortage in force to a request; ok is false when
// none does (not a CreateFleet, another lifecycle, or no more than EC2
// has asked for).
func (p *Proxy) shortFleet(service, action string, body []byte) (short shortFleet, ok bool) {
	if service != "ec2" || action != "CreateFleet" {
		return short, false
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return short, false
	}
	lifecycle := form.Get("TargetCapacitySpecification.DefaultTargetCapacityType")
	p.mu.Lock()
	i := slices.IndexFunc(p.shortages, func(s Shortage) bool { return s.Lifecycle == lifecycle })
	var s Shortage
	if i >= 0 {
		s = p.shortages[i]
	}
	p.mu.Unlock()
	total, err := strconv.Atoi(form.Get("TargetCapacitySpecification.TotalTargetCapacity"))
	if i < 0 || err != nil || total <= s.Available {
		return short, false
	}
	short.errors = fleetErrorItems(form, s)
	if s.Available > 0 {
		form.Set("TargetCapacitySpecification.TotalTargetCapacity", strconv.Itoa(s.Available))
		if form.Has(capTarget[lifecycle]) {
			form.Set(capTarget[lifecycle], strconv.Itoa(s.Available))
		}
		short.forward = []byte(form.Encode())
	}
	p.mu.Lock()
	p.stats.FleetsShort++
	p.mu.Unlock()
	return short, true
}

// fleetErrorItems are the errorSet items of a fleet short of s: one per
// launch template override, in order, naming the override as EC2 does.
func fleetErrorItems(form url.Values, s Shortage) []byte {
	type override struct{ config, override int }
	seen := map[override]bool{}
	for key := range form {
		var o override
		var field string
		if n, _ := fmt.Sscanf(key, "LaunchTemplateConfigs.%d.Overrides.%d.%s", &o.config, &o.override, &field); n == 3 {
			seen[o] = true
		}
	}
	overrides := make([]override, 0, len(seen))
	for o := range seen {
		overrides = append(overrides, o)
	}
	slices.SortFunc(overrides, func(a, b override) int {
		if a.config != b.config {
			return a.config - b.config
		}
		return a.override - b.override
	})
	if len(overrides) == 0 {
		overrides = []override{{1, 0}} // none: one error for the fleet
	}
	var b bytes.Buffer
	for _, o := range overrides {
		spec := fmt.Sprintf("LaunchTemplateConfigs.%d.LaunchTemplateSpecification.", o.config)
		ov := fmt.Sprintf("LaunchTemplateConfigs.%d.Overrides.%d.", o.config, o.override)
		b.WriteString("<item><launchTemplateAndOverrides><launchTemplateSpecification>")
		element(&b, "launchTemplateId", form.Get(spec+"LaunchTemplateId"))
		element(&b, "launchTemplateName", form.Get(spec+"LaunchTemplateName"))
		element(&b, "version", form.Get(spec+"Version"))
		b.WriteString("</launchTemplateSpecification><overrides>")
		element(&b, "instanceType", form.Get(ov+"InstanceType"))
		element(&b, "subnetId", form.Get(ov+"SubnetId"))
		b.WriteString("</overrides></launchTemplateAndOverrides>")
		element(&b, "lifecycle", s.Lifecycle)
		element(&b, "errorCode", s.Code)
		element(&b, "errorMessage", strings.ReplaceAll(s.Message, "{instanceType}", form.Get(ov+"InstanceType")))
		b.WriteString("</item>")
	}
	return b.Bytes()
}

// element writes <name>value</name>, escaped; nothing for an empty value.
func element(b *bytes.Buffer, name, value string) {
	if value == "" {
		return
	}
	fmt.Fprintf(b, "<%s>", name)
	_ = xml.EscapeText(b, []byte(value)) // a Buffer does not fail
	fmt.Fprintf(b, "</%s>", name)
}

// withErrors adds a short fleet's errors to the emulator's answer to the
// request for what EC2 had (the emulator answers no errorSet).
func (s shortFleet) withErrors(answer []byte) []byte {
	const end = "</CreateFleetResponse>"
	i := bytes.LastIndex(answer, []byte(end))
	if i < 0 {
		return answer
	}
	return slices.Concat(answer[:i], []byte("<errorSet>"), s.errors, []byte("</errorSet>"), answer[i:])
}

// none is the answer to a fleet EC2 launched nothing for: a fleet id, no
// instances, the errors.
func (s shortFleet) none() []byte {
	return fmt.Appendf(nil, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>%s</requestId><fleetId>fleet-%08x-%04x-%04x-%04x-%012x</fleetId><errorSet>%s</errorSet><fleetInstanceSet/></CreateFleetResponse>`,
		requestID(), rand.Uint32(), rand.Uint32()&0xffff, rand.Uint32()&0xffff, rand.Uint32()&0xffff, rand.Uint64()&0xffffffffffff, s.errors)
}
