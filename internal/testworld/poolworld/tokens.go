package poolworld

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
)

// Tokens is GitHub's token endpoints, as a claim's TokenSource asks them:
// it issues a fresh token per call, or fails with Err.
type Tokens struct {
	mu    sync.Mutex
	calls []string // "registration octo/app", "remove octo/app"
	Err   error
}

func (f *Tokens) issue(kind string, t github.Target) (github.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, kind+" "+t.String())
	if f.Err != nil {
		return github.Token{}, f.Err
	}
	return github.Token{Value: kind + "-" + string(rune('0'+len(f.calls))), ExpiresAt: time.Now().Add(time.Hour).Truncate(time.Second)}, nil
}

// RegistrationToken issues a registration token for t.
func (f *Tokens) RegistrationToken(_ context.Context, t github.Target) (github.Token, error) {
	return f.issue("registration", t)
}

// RemoveToken issues a remove token for t.
func (f *Tokens) RemoveToken(_ context.Context, t github.Target) (github.Token, error) {
	return f.issue("remove", t)
}

// Issued lists the tokens asked for, in order: "registration octo/app",
// "remove octo/app".
func (f *Tokens) Issued() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}
