package broker

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
)

// Every field of a request and a response, the claim's types' included,
// survives the trip through JSON that an invocation makes: durations,
// timestamps, nested structs, lists.
func TestWireRoundTrip(t *testing.T) {
	t.Parallel()
	req := claim.Request{
		Pool: "builds", RunID: "run-1", Label: "run-1-abcdefgh23456", RunnerGroup: "Trusted", Claimant: "job-a",
		InstanceCount: 3, ResourceClass: "large", UsageClass: "spot", AllowedTypes: []string{"c*", "m6i.large"},
		MaxRuntime: 90 * time.Minute, FleetFallback: true, SpotFallback: claim.SpotFallbackOnDemand,
		Timings: claim.Timings{HeartbeatMaxAge: 15 * time.Second, RegistrationWait: 20 * time.Second, FleetValidationWait: 3 * time.Minute,
			ReleaseWait: 2 * time.Minute, PollInterval: 250 * time.Millisecond},
		Repository: "octo/app", WorkflowRun: claim.WorkflowRun{ID: 4242, Attempt: 2}, RegisterWithRepository: true,
	}
	inst := claim.Instance{ID: "i-0123", InstanceType: "c6i.large", UsageClass: "spot", Source: claim.SourceFleet,
		LaunchedAt: "2026-01-01T00:00:00Z", TemplateID: "lt-0123", TemplateVersion: "7"}
	for name, v := range map[string]any{
		"request": &Request{Operation: OpClaim, IDToken: "a.b.c", Pool: "builds", RunID: "run-1", Claim: &req},
		"response": &Response{
			Result: &claim.Result{Instances: []claim.Instance{inst}, Label: "run-1-abcdefgh23456", Repository: "octo/app", Reused: 1, Started: 2, Created: 3,
				Pickup:   claim.PickupStats{Received: 1, Discarded: 2, Requeued: 3, Accepted: 4, Returned: 5, Retired: 6, InFlightWaits: 7},
				Warnings: []string{"launched on-demand"}},
			Record: &claim.Record{Request: req, State: claim.StateComplete, Nonce: "n-1", Instances: []claim.Instance{inst},
				OwnedIDs: []string{"i-0123"}, UpdatedAt: "2026-01-01T00:01:00Z"},
			Live:     []claim.Instance{inst},
			Outcomes: []string{"i-0123: released to the pool"},
			Warnings: [][2]string{{"summary", "detail"}},
			Error:    &Error{Kind: ErrorOverCap, Message: "over"},
		},
	} {
		assertAllSet(t, name, reflect.ValueOf(v).Elem())
		doc, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(v).Elem())
		if err := json.Unmarshal(doc, back.Interface()); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back.Interface(), v) {
			t.Errorf("%s changed in JSON:\n%s\ngot  %+v\nwant %+v", name, doc, back.Elem().Interface(), reflect.ValueOf(v).Elem().Interface())
		}
	}
}

// assertAllSet fails for every field of v (recursively) left at its zero
// value: a field added later must be set above to be checked.
func assertAllSet(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	if v.IsZero() {
		t.Errorf("%s is not set: set it, so that the round trip checks it", path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		assertAllSet(t, path, v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				assertAllSet(t, path+"."+f.Name, v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			assertAllSet(t, path+"[]", v.Index(i))
		}
	}
}
