package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/maintenance"
)

// OpMaintain is the pool's scheduled maintenance, which the pool stack's
// schedule asks of the broker with the payload {"operation": "maintain"}:
// what the ec2runners_reap and ec2runners_warm actions run
// (maintenance.Maintain), for the broker's own pool. It carries no
// OIDC token and needs none: it does only what the pool's config and
// records already say is due (runners past their deadline, the claims of
// ended runs, the warm targets in force), and none of it again while
// another runs or within a minute of the last, so whoever may invoke the
// function (the schedule's role, a workflow of the access list, an
// operator) may ask for it, as often as they like.
const OpMaintain = "maintain"

// MaintainResponse is the broker's answer to OpMaintain. It counts what
// the maintenance did and names no claim, run or instance: whoever may
// invoke the function reads it, the CI role of every repository of the
// access list too, and the claims and runners it touched are any
// repository's. The function's log names them.
type MaintainResponse struct {
	// Ran is false when another maintenance of the pool runs, or ended
	// less than a minute ago: this one did nothing.
	Ran    bool        `json:"ran"`
	Reaped *ReapCounts `json:"reaped,omitempty"`
	// Warm is each class with warm targets as the fill left it.
	Warm     map[string]WarmCounts `json:"warm,omitempty"`
	Launched int                   `json:"launched"` // runners the fill launched
	Retired  int                   `json:"retired"`  // warm runners it terminated: outdated, or too old
	// Errors say what went wrong in part; the function's log says how.
	Errors []string `json:"errors,omitempty"`
	// Error is why it could not run: the pool does not exist, or its
	// table cannot be read.
	Error *Error `json:"error,omitempty"`
}

// ReapCounts count what the reap did, by kind, as the reap action
// reports it.
type ReapCounts struct {
	Expired      int `json:"expired"`      // runners past their deadline, terminated
	Orphans      int `json:"orphans"`      // instances without a live record, terminated
	Vanished     int `json:"vanished"`     // records of instances gone from EC2, closed
	StaleClaims  int `json:"staleClaims"`  // claim records of crashed attempts, deleted
	EndedRuns    int `json:"endedRuns"`    // claims of ended workflow runs, released
	HeldRuns     int `json:"heldRuns"`     // claims whose jobs still run on their runners, held longer
	RevivedRuns  int `json:"revivedRuns"`  // released claims a re-run's job waits for, claimed again
	CorruptItems int `json:"corruptItems"` // records that could not be read, skipped
}

// WarmCounts are a class's warm runners and targets.
type WarmCounts struct {
	Hot           int `json:"hot"`
	HotTarget     int `json:"hotTarget"`
	Stopped       int `json:"stopped"`
	StoppedTarget int `json:"stoppedTarget"`
}

// Maintenance serves OpMaintain for the broker's pool.
type Maintenance struct {
	Pool string
	// Claimer makes the pool logic of one invocation, which reports its
	// warnings to warn.
	Claimer func(warn func(summary, detail string)) *claim.Claimer
	Timings claim.Timings // the hot runners' a fill launches
	Log     claim.Logger  // nil: no logging
}

// Alongside starts the maintenance that runs alongside a claim or a
// release (maintenance.Alongside), reporting its warnings to warn, and
// returns the func that waits for it. A nil Maintenance runs none.
func (m *Maintenance) Alongside(ctx context.Context, warn func(summary, detail string)) (wait func()) {
	if m == nil {
		return func() {}
	}
	return maintenance.Alongside(ctx, m.Claimer(warn), m.Pool)
}

// Serve runs the pool's maintenance. Whatever went wrong is in the
// answer, never a failed invocation.
func (m *Maintenance) Serve(ctx context.Context) MaintainResponse {
	w := &claim.Warnings{}
	res, ran, err := maintenance.Maintain(ctx, m.Claimer(w.Add), m.Pool, m.Timings)
	m.log(res, ran, err, w.List())
	switch {
	case !ran && err != nil:
		return MaintainResponse{Error: &Error{Kind: ErrorFailed, Message: err.Error()}}
	case !ran:
		return MaintainResponse{}
	}
	r := res.Reap
	resp := MaintainResponse{Ran: true, Launched: len(res.Warm.Launched), Retired: len(res.Warm.Retired),
		Reaped: &ReapCounts{Expired: len(r.Expired), Orphans: len(r.Orphans), Vanished: len(r.Vanished), StaleClaims: len(r.StaleClaims),
			EndedRuns: len(r.EndedRuns), HeldRuns: len(r.HeldRuns), RevivedRuns: len(r.RevivedRuns), CorruptItems: len(r.CorruptItems)}}
	for class, a := range res.Warm.After {
		if resp.Warm == nil {
			resp.Warm = map[string]WarmCounts{}
		}
		resp.Warm[class] = WarmCounts{Hot: a.Hot, HotTarget: a.HotTarget, Stopped: a.Stopped, StoppedTarget: a.StoppedTarget}
	}
	if res.ReapErr != nil {
		resp.Errors = append(resp.Errors, "the reap failed in part")
	}
	if r.TerminateFail != nil {
		resp.Errors = append(resp.Errors, "some instances could not be terminated: the next reap terminates them")
	}
	if res.WarmErr != nil {
		resp.Errors = append(resp.Errors, "the fill failed in part")
	}
	for _, class := range slices.Sorted(maps.Keys(res.Warm.Short)) {
		resp.Errors = append(resp.Errors, fmt.Sprintf("class %s was left below its warm targets", class))
	}
	return resp
}

// log writes what the maintenance did, every id and error included.
func (m *Maintenance) log(res maintenance.MaintainResult, ran bool, err error, warnings [][2]string) {
	if m.Log == nil {
		return
	}
	kv := []any{"operation", OpMaintain, "pool", m.Pool}
	switch {
	case !ran && err == nil:
		m.Log("broker: maintenance skipped: another runs, or ran less than a minute ago", kv...)
		return
	case !ran:
		m.Log("broker: maintenance failed: "+err.Error(), kv...)
		return
	}
	for _, e := range []struct {
		key string
		err error
	}{{"reap_error", res.ReapErr}, {"fill_error", res.WarmErr}, {"terminate_failed", res.Reap.TerminateFail}} {
		if e.err != nil {
			kv = append(kv, e.key, e.err.Error())
		}
	}
	r, f := res.Reap, res.Warm
	kv = append(kv, "expired", r.Expired, "orphans", r.Orphans, "vanished", r.Vanished, "stale_claims", r.StaleClaims,
		"ended_runs", r.EndedRuns, "held_runs", r.HeldRuns, "revived_runs", r.RevivedRuns, "corrupt_items", r.CorruptItems,
		"launched", f.Launched, "retired", f.Retired, "short", f.Short, "notes", f.Notes, "warnings", warnings)
	m.Log("broker: maintained", kv...)
}
