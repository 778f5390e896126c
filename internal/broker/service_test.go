package broker

import (
	"context"
	"encoding/json"
	"testing"
)

// The broker's one function serves the agents' requests (by their
// operation) with the Registrar, the pool's maintenance (without a token)
// with the Maintenance, and everything else with the claims' Handler,
// which asks for the job's OIDC token; a payload that is not an object
// with an operation is refused as invalid, never a failed invocation.
func TestServiceServesAgentsClaimsAndMaintenance(t *testing.T) {
	w := newRegistrarWorld(t)
	b := newBroker(t)
	s := &Service{Claims: b.Handler, Agents: w.r, Maintenance: newMaintenanceWorld(t).m}
	serve := func(v any) any {
		payload, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return s.Serve(context.Background(), payload)
	}

	answer, ok := serve(w.ask(OpRegister, instance)).(AgentResponse)
	if !ok || answer.Error != nil || answer.Runner == nil || answer.Runner.EncodedJITConfig == "" {
		t.Errorf("an agent's register: %#v, want the registrar's runner", answer)
	}
	claimed, ok := serve(Request{Operation: OpRead, IDToken: b.token("octo/app"), Pool: "builds", RunID: "run-none"}).(Response)
	if !ok || claimed.Error != nil || claimed.Record != nil {
		t.Errorf("a claim's read: %#v, want the handler's answer: not found", claimed)
	}
	maintained, ok := serve(map[string]string{"operation": OpMaintain}).(MaintainResponse)
	if !ok || !maintained.Ran || maintained.Launched != 1 {
		t.Errorf("the schedule's maintain: %#v, want the maintenance's answer: it ran", maintained)
	}
	unsigned, ok := serve(Request{Operation: OpRead, Pool: "builds", RunID: "run-none"}).(Response)
	if !ok || unsigned.Error == nil || unsigned.Error.Kind != ErrorDenied {
		t.Errorf("a read without a token: %#v, want the handler's refusal", unsigned)
	}
	for _, payload := range []string{`[]`, `"claim"`, `{"operation": 3}`} {
		if got, ok := s.Serve(context.Background(), []byte(payload)).(Response); !ok || got.Error == nil || got.Error.Kind != ErrorInvalid {
			t.Errorf("payload %s: %#v, want an invalid request", payload, got)
		}
	}
}
