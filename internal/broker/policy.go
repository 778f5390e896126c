package broker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// grant is what the access policy of a pool (its config) allows one
// repository: its entry.
type grant struct {
	cfg   protocol.PoolConfig
	entry protocol.RepositoryAccess
}

// admit finds the access entry of id's repository in the policy of the
// pool of cfg, and checks id's workflow against it. Refusals are denied.
func admit(cfg protocol.PoolConfig, id Identity) (grant, error) {
	if cfg.Access == nil {
		return grant{}, denied("pool %s has no access policy, so its broker serves no repository (set the access attribute of its ec2runners_pool)", cfg.Name)
	}
	i := slices.IndexFunc(cfg.Access.Repositories, func(r protocol.RepositoryAccess) bool {
		return strings.EqualFold(r.Repository, id.Repository) // as GitHub compares names
	})
	if i < 0 {
		return grant{}, denied("repository %s may not claim runners of pool %s: the pool's access has no entry with repository = %q", id.Repository, cfg.Name, id.Repository)
	}
	g := grant{cfg: cfg, entry: cfg.Access.Repositories[i]}
	if w := g.entry.Workflows; len(w) > 0 && !slices.ContainsFunc(w, func(glob string) bool { return globMatch(glob, id.WorkflowRef) }) {
		return grant{}, denied("workflow %s of repository %s may not claim runners of pool %s: its access entry's workflows = %s match none of it",
			id.WorkflowRef, id.Repository, cfg.Name, quoteList(w))
	}
	return g, nil
}

// checkClaim checks what req asks for against the entry: its resource
// class (denied), its max runtime, the pool's when it asks for none, and
// its runners alone (over_cap).
func (g grant) checkClaim(req claim.Request) error {
	e, pool := g.entry, g.cfg.Name
	if len(e.ResourceClasses) > 0 && !slices.Contains(e.ResourceClasses, req.ResourceClass) {
		return denied("repository %s may not claim resource class %q of pool %s: its access entry's resource_classes = %s",
			e.Repository, req.ResourceClass, pool, quoteList(e.ResourceClasses))
	}
	if limit := time.Duration(e.MaxRuntime); limit > 0 {
		asked, whose := req.MaxRuntime, "this claim asks for"
		if asked == 0 {
			asked, whose = time.Duration(g.cfg.MaxRuntime), "this claim asks for none, so the pool's"
		}
		if asked > limit {
			return overCap("repository %s may claim runners of pool %s for at most %s each (access max_runtime = %q); %s %s",
				e.Repository, pool, protocol.FormatDuration(limit), protocol.FormatDuration(limit), whose, protocol.FormatDuration(asked))
		}
	}
	return g.checkRunners(0, req.InstanceCount)
}

// checkRunners checks that the repository, holding held runners, may
// claim asked more (over_cap).
func (g grant) checkRunners(held, asked int) error {
	limit := g.entry.MaxRunners
	if limit <= 0 || held+asked <= limit {
		return nil
	}
	return overCap("repository %s may hold at most %d runners of pool %s at once (access max_runners = %d); it holds %d and asks for %d",
		g.entry.Repository, limit, g.cfg.Name, limit, held, asked)
}

// globMatch tells whether s matches glob, in which '*' matches any run of
// characters ('/' included) and every other character itself.
func globMatch(glob, s string) bool {
	parts := strings.Split(glob, "*")
	if len(parts) == 1 {
		return glob == s
	}
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(s, first) || !strings.HasSuffix(s[len(first):], last) {
		return false
	}
	// The middle parts in order, each as early as it can come: the
	// earliest match leaves the most room for the rest.
	rest := s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

func denied(format string, args ...any) *Error {
	return &Error{Kind: ErrorDenied, Message: fmt.Sprintf(format, args...)}
}

func overCap(format string, args ...any) *Error {
	return &Error{Kind: ErrorOverCap, Message: fmt.Sprintf(format, args...)}
}

// quoteList is a list as Terraform writes it: ["a", "b"].
func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
