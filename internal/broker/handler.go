package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
)

// Claimer is the pool logic the broker runs for its callers:
// *claim.Claimer.
type Claimer interface {
	Create(ctx context.Context, req claim.Request) (*claim.Result, error)
	Read(ctx context.Context, poolName, runID string) (rec claim.Record, live []claim.Instance, ok bool, err error)
	Release(ctx context.Context, poolName, runID string) ([]string, error)
	List(ctx context.Context, poolName string, f claim.ListFilter) ([]claim.Listed, []string, error)
}

// TokenVerifier verifies an invocation's ID token: *Verifier.
type TokenVerifier interface {
	Verify(ctx context.Context, rawToken string) (Identity, error)
}

// ConfigReader reads the pool config item: a DynamoDB client.
type ConfigReader interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Handler serves the invocations of one pool's broker. Each acts for the
// repository and workflow run its ID token names, within the pool's
// access policy; nothing in the request overrides them.
type Handler struct {
	Pool     string
	Verifier TokenVerifier
	DynamoDB ConfigReader
	// Claimer makes the pool logic of one invocation, which reports its
	// warnings to warn (it may call it concurrently).
	Claimer func(warn func(summary, detail string)) Claimer
	// Maintenance runs alongside each claim and release (nil: none).
	Maintenance *Maintenance
	Log         claim.Logger // nil: no logging
}

// Handle serves one invocation. Whatever went wrong is in the response's
// Error, never a failed invocation.
func (h *Handler) Handle(ctx context.Context, req Request) Response {
	w := &claim.Warnings{}
	id, resp := h.handle(ctx, req, w)
	resp.Warnings = w.List()
	if h.Log != nil {
		outcome := "done"
		if resp.Error != nil {
			outcome = resp.Error.Kind + ": " + resp.Error.Message
		}
		h.Log("broker: "+outcome, "operation", req.Operation, "pool", h.Pool, "run", cmp.Or(req.RunID, claimRunID(req)),
			"repository", id.Repository, "workflow_run", id.RunID, "attempt", id.RunAttempt, "workflow", id.WorkflowRef, "event", id.Event, "ref", id.Ref)
	}
	return resp
}

func (h *Handler) handle(ctx context.Context, req Request, w *claim.Warnings) (Identity, Response) {
	id, err := h.Verifier.Verify(ctx, req.IDToken)
	if err != nil {
		return id, failure(err)
	}
	if req.Pool != h.Pool {
		return id, invalid("this broker serves pool %s, not %q", h.Pool, req.Pool)
	}
	cfg, err := pool.ReadConfig(ctx, h.DynamoDB, h.Pool)
	if err != nil {
		return id, failure(err)
	}
	g, err := admit(cfg, id)
	if err != nil {
		return id, failure(err)
	}
	c := h.Claimer(w.Add)
	switch req.Operation {
	case OpClaim:
		return id, h.claim(ctx, c, g, id, req, w)
	case OpRead, OpRelease:
		if req.RunID == "" {
			return id, invalid("operation %s needs the claim's run id", req.Operation)
		}
		rec, live, own, err := h.ownClaim(ctx, c, id, req.RunID)
		switch {
		case err != nil:
			return id, failure(err)
		case !own:
			// Not found, and nothing to release: what a missing claim answers.
			return id, Response{}
		case req.Operation == OpRead:
			return id, Response{Record: &rec, Live: live}
		}
		maintained := h.Maintenance.Alongside(ctx, w.Add)
		outcomes, err := c.Release(ctx, h.Pool, req.RunID)
		maintained()
		if err != nil {
			resp := failure(err)
			resp.Outcomes = outcomes
			return id, resp
		}
		return id, Response{Outcomes: outcomes}
	}
	return id, invalid("operation %q: want %s, %s or %s", req.Operation, OpClaim, OpRead, OpRelease)
}

// claim makes req's claim for id's repository and workflow run, its
// runners registered with that repository, within the repository's caps.
//
// max_runners holds under concurrent claims: a pre-check counts the
// runners of every claim the repository has recorded; after Create, a
// post-check counts those of its claims under way (pending: they may yet
// get their runners) and of its complete claims that got them first (by
// their record's time, ties by run id), and a claim over the cap releases
// its runners. Of two claims that overlap, the later one in that order
// finds the earlier one recorded (pending or complete) at its post-check,
// or else the earlier one's pre-check found the later one: two claims
// never both keep runners over the cap, unless the clocks of two broker
// instances differ by more than a claim takes. Both may fail, when each
// finds the other under way.
func (h *Handler) claim(ctx context.Context, c Claimer, g grant, id Identity, r Request, w *claim.Warnings) Response {
	if r.Claim == nil {
		return invalid("operation %s needs its claim", OpClaim)
	}
	req := *r.Claim
	switch {
	case r.RunID != "" && req.RunID != "" && r.RunID != req.RunID:
		return invalid("the request's run id %q and its claim's %q differ", r.RunID, req.RunID)
	case req.Pool != "" && req.Pool != h.Pool:
		return invalid("this broker serves pool %s, not %q", h.Pool, req.Pool)
	}
	req.RunID, req.Pool = cmp.Or(req.RunID, r.RunID), h.Pool
	req.Repository, req.WorkflowRun, req.RegisterWithRepository = id.Repository, id.WorkflowRun(), true
	if err := g.checkClaim(req); err != nil {
		return failure(err)
	}
	capped := g.entry.MaxRunners > 0
	if capped {
		claims, err := h.repositoryClaims(ctx, c, id, w)
		if err != nil {
			return failure(err)
		}
		held := 0
		for _, l := range claims {
			if l.Request.RunID != req.RunID {
				held += l.Request.InstanceCount
			}
		}
		if err := g.checkRunners(held, req.InstanceCount); err != nil {
			return failure(err)
		}
	}
	defer h.Maintenance.Alongside(ctx, w.Add)()
	res, err := c.Create(ctx, req)
	if err != nil {
		return failure(err)
	}
	if capped {
		if resp, over := h.recheck(ctx, c, g, id, req, w); over {
			return resp
		}
	}
	return Response{Result: res}
}

// recheck is claim's post-check of the cap, once Create got req's runners;
// a claim over it releases them and fails over_cap. One whose claims
// cannot be listed releases them too: its cap could not be checked.
func (h *Handler) recheck(ctx context.Context, c Claimer, g grant, id Identity, req claim.Request, w *claim.Warnings) (Response, bool) {
	claims, err := h.repositoryClaims(ctx, c, id, w)
	var over error
	if err == nil {
		over = g.checkRunners(heldBefore(claims, req.RunID), req.InstanceCount)
	}
	if err == nil && over == nil {
		return Response{}, false
	}
	outcomes, relErr := c.Release(ctx, h.Pool, req.RunID)
	resp := failure(cmp.Or(over, err))
	if over != nil {
		resp.Error.Message += "; claims the repository made at the same time hold the rest, so this claim's runners were released"
	}
	if relErr != nil {
		resp.Error.Message += fmt.Sprintf("; releasing this claim's runners failed (the pool's maintenance releases them once the workflow run ends): %v", relErr)
	}
	resp.Outcomes = outcomes
	return resp, true
}

// heldBefore counts the runners of the claims that come before the
// complete claim of runID: those under way, and the complete ones that got
// their runners earlier (ties by run id). All others, when runID's is not
// among them.
func heldBefore(claims []claim.Listed, runID string) int {
	i := slices.IndexFunc(claims, func(l claim.Listed) bool { return l.Request.RunID == runID })
	held := 0
	for k, l := range claims {
		switch {
		case k == i:
		case i < 0, l.State != claim.StateComplete, completedBefore(l.Record, claims[i].Record):
			held += l.Request.InstanceCount
		}
	}
	return held
}

// completedBefore orders complete claims by the time their record was
// last written, when they got their runners (whole seconds, which sort as
// text), then by run id.
func completedBefore(a, b claim.Record) bool {
	return cmp.Or(strings.Compare(a.UpdatedAt, b.UpdatedAt), strings.Compare(a.Request.RunID, b.Request.RunID)) < 0
}

// repositoryClaims are the claims id's repository has recorded in the
// pool. Records that cannot be read are skipped, with a warning.
func (h *Handler) repositoryClaims(ctx context.Context, c Claimer, id Identity, w *claim.Warnings) ([]claim.Listed, error) {
	all, corrupt, err := c.List(ctx, h.Pool, claim.ListFilter{})
	if err != nil {
		return nil, fmt.Errorf("listing the claims of repository %s, to count its runners: %w", id.Repository, err)
	}
	if len(corrupt) > 0 {
		w.Add(fmt.Sprintf("Claim records of pool %s skipped", h.Pool), "Not counted against the repositories' max_runners: "+strings.Join(corrupt, "; "))
	}
	return slices.DeleteFunc(all, func(l claim.Listed) bool { return !ownedBy(l.Record, id) }), nil
}

// ownClaim reads the claim of runID, own when id's repository made it
// through the broker. Another repository's claim, a claim made directly,
// and none all read as none: a claim's existence is not told to other
// repositories, and a release of one releases nothing.
func (h *Handler) ownClaim(ctx context.Context, c Claimer, id Identity, runID string) (rec claim.Record, live []claim.Instance, own bool, err error) {
	rec, live, ok, err := c.Read(ctx, h.Pool, runID)
	if err != nil || !ok || !ownedBy(rec, id) {
		return claim.Record{}, nil, false, err
	}
	return rec, live, true, nil
}

// ownedBy tells whether the broker made rec for id's repository.
func ownedBy(rec claim.Record, id Identity) bool {
	return rec.Request.RegisterWithRepository && strings.EqualFold(rec.Request.Repository, id.Repository)
}

// failure is the response to err: its kind when it is an *Error.
func failure(err error) Response {
	var e *Error
	switch {
	case errors.As(err, &e):
		return Response{Error: e}
	case errors.Is(err, claim.ErrOtherClaimant):
		return Response{Error: &Error{Kind: ErrorOtherClaimant, Message: err.Error()}}
	case errors.Is(err, claim.ErrOtherRepository):
		return Response{Error: &Error{Kind: ErrorDenied, Message: err.Error() + ": give the claim a run id of its own"}}
	}
	return Response{Error: &Error{Kind: ErrorFailed, Message: err.Error()}}
}

func invalid(format string, args ...any) Response {
	return Response{Error: &Error{Kind: ErrorInvalid, Message: fmt.Sprintf(format, args...)}}
}

func claimRunID(r Request) string {
	if r.Claim == nil {
		return ""
	}
	return r.Claim.RunID
}
