// Package broker is the pool's broker: the one place that holds the
// pool's GitHub credential and the AWS rights claims need, reached by
// workflows only through a Lambda invocation that carries the job's GitHub
// Actions OIDC token. It verifies the token, checks the pool's access
// policy (protocol.Access) and runs the claim for the token's repository
// alone. The provider's claim resource talks to it with Client. The same
// function serves the agents of the runners it claimed (Registrar) and
// runs the pool's scheduled maintenance (OpMaintain).
package broker

import (
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
)

// Operations a claim asks of the broker.
const (
	OpClaim   = "claim"
	OpRead    = "read"
	OpRelease = "release"
)

// Request is one invocation's payload.
type Request struct {
	Operation string `json:"operation"`
	// IDToken is the calling job's GitHub Actions OIDC token, issued for
	// the broker's audience. It alone says which repository, workflow and
	// run the call acts for.
	IDToken string `json:"idToken"`
	Pool    string `json:"pool"`
	RunID   string `json:"runId"`
	// Claim is OpClaim's request. Its Repository and WorkflowRun are
	// ignored: the broker takes them from the token.
	Claim *claim.Request `json:"claim,omitempty"`
}

// Error kinds of a refused or failed invocation.
const (
	ErrorDenied        = "denied"         // the token, or the pool's access policy, does not allow the call
	ErrorOverCap       = "over_cap"       // the repository's cap would be exceeded
	ErrorOtherClaimant = "other_claimant" // claim.ErrOtherClaimant
	ErrorInvalid       = "invalid"        // the request is malformed
	ErrorFailed        = "failed"         // the operation ran and failed
)

// Error is why an invocation did not do what it was asked.
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Response is one invocation's answer.
type Response struct {
	Result   *claim.Result    `json:"result,omitempty"`   // OpClaim
	Record   *claim.Record    `json:"record,omitempty"`   // OpRead, when found
	Live     []claim.Instance `json:"live,omitempty"`     // OpRead
	Outcomes []string         `json:"outcomes,omitempty"` // OpRelease
	// Warnings are the operation's warnings, as the pool logic gives
	// them (summary, detail).
	Warnings [][2]string `json:"warnings,omitempty"`
	Error    *Error      `json:"error,omitempty"`
}
