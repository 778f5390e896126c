package protocol

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Access is who may claim runners from a pool through its broker, and how
// many: the pool resource writes it into the pool config item, where no
// workflow can change it, and the broker reads it before every claim.
// Nil: the pool has no broker policy (claims are made with AWS
// credentials directly, and every claimant is trusted alike).
type Access struct {
	Repositories []RepositoryAccess `json:"repositories"`
}

// RepositoryAccess is one repository's right to claim.
type RepositoryAccess struct {
	// Repository is "owner/name", compared as GitHub compares names
	// (ignoring case).
	Repository string `json:"repository"`
	// Workflows are globs ('*' matches any run of characters) that the
	// token's workflow_ref ("owner/name/.github/workflows/ci.yml@refs/heads/main")
	// must match, one of them; empty: any workflow of the repository.
	Workflows []string `json:"workflows,omitempty"`
	// MaxRunners caps the runners the repository's claims hold at once
	// (0: only the pool's limits).
	MaxRunners int `json:"maxRunners,omitempty"`
	// MaxRuntime caps a claim's max runtime (0: the pool's max runtime).
	MaxRuntime Duration `json:"maxRuntime,omitempty"`
	// ResourceClasses are the classes its claims may ask for (empty: all).
	ResourceClasses []string `json:"resourceClasses,omitempty"`
}

// MaxAccessRunners bounds an entry's MaxRunners: the runners of all the
// repository's claims together (one claim takes at most 100), so a higher
// cap is more likely a typo than a plan.
const MaxAccessRunners = 1000

// SameRepository tells whether two full names, "owner/name", name one
// repository: GitHub compares them ignoring case.
func SameRepository(a, b string) bool { return strings.EqualFold(a, b) }

// CheckAccessWorkflow reports why glob cannot be a workflow glob of the
// entry for repository, or nil. A workflow_ref starts with its own
// repository and '/', and a repository name holds no '/' nor '*', so a
// glob starting so matches that repository's workflows alone.
func CheckAccessWorkflow(repository, glob string) error {
	prefix := repository + "/"
	if len(glob) <= len(prefix) || !SameRepository(glob[:len(prefix)], prefix) {
		return fmt.Errorf("workflow %q must start with %q, its entry's repository and '/', followed by the workflow's path and ref "+
			"(such as %q or %q): a workflow_ref starts with its own repository, so an entry admits no other repository's workflows",
			glob, prefix, prefix+".github/workflows/ci.yml@refs/heads/main", prefix+".github/workflows/*")
	}
	return nil
}

// CheckAccessMaxRuntime reports why d cannot cap the max runtime of a
// repository's claims in a pool whose max runtime is poolMaxRuntime, or
// nil: an entry narrows the pool's max runtime, never widens it.
func CheckAccessMaxRuntime(d, poolMaxRuntime time.Duration) error {
	if d < ShortestMaxRuntime || d > min(poolMaxRuntime, LongestMaxRuntime) {
		return fmt.Errorf("max runtime %s must be from %s up to the pool's max runtime, %s",
			FormatDuration(d), FormatDuration(ShortestMaxRuntime), FormatDuration(min(poolMaxRuntime, LongestMaxRuntime)))
	}
	return nil
}

// CheckAccessClass reports why class is not one of classes, the pool's
// resource classes, or nil.
func CheckAccessClass(class string, classes map[string]ResourceClass) error {
	if _, ok := classes[class]; !ok {
		return fmt.Errorf("resource class %q is not one of the pool's: %s", class, strings.Join(SortedClassNames(classes), ", "))
	}
	return nil
}

// Validate reports why a is not an access policy of a pool with the given
// resource classes and max runtime, or nil. The provider refuses such a
// policy before it writes one, and a config item that holds one is not
// read (PoolConfigFromItem): the broker never acts on a policy that could
// admit more than it says.
func (a Access) Validate(classes map[string]ResourceClass, poolMaxRuntime time.Duration) error {
	if len(a.Repositories) == 0 {
		return errors.New("lists no repository (a pool without a policy has no access at all)")
	}
	for i, r := range a.Repositories {
		if err := r.validate(classes, poolMaxRuntime); err != nil {
			return fmt.Errorf("repositories[%d]: %w", i, err)
		}
		if j := slices.IndexFunc(a.Repositories[:i], func(e RepositoryAccess) bool { return SameRepository(e.Repository, r.Repository) }); j >= 0 {
			return fmt.Errorf("repositories[%d]: repository %q is also repositories[%d] (%q): GitHub compares names ignoring case, and a repository has one entry", i, r.Repository, j, a.Repositories[j].Repository)
		}
	}
	return nil
}

func (r RepositoryAccess) validate(classes map[string]ResourceClass, poolMaxRuntime time.Duration) error {
	if _, _, err := ParseRepository(r.Repository); err != nil {
		return err
	}
	// Lists are left out when empty: an empty one would read as "none",
	// yet mean "any".
	if r.Workflows != nil && len(r.Workflows) == 0 || r.ResourceClasses != nil && len(r.ResourceClasses) == 0 {
		return errors.New("workflows and resourceClasses must be left out rather than empty")
	}
	for _, w := range r.Workflows {
		if err := CheckAccessWorkflow(r.Repository, w); err != nil {
			return err
		}
	}
	if r.MaxRunners < 0 || r.MaxRunners > MaxAccessRunners {
		return fmt.Errorf("max runners %d must be from 1 to %d (0: no cap of its own)", r.MaxRunners, MaxAccessRunners)
	}
	if r.MaxRuntime != 0 {
		if err := CheckAccessMaxRuntime(time.Duration(r.MaxRuntime), poolMaxRuntime); err != nil {
			return err
		}
	}
	for _, class := range r.ResourceClasses {
		if err := CheckAccessClass(class, classes); err != nil {
			return err
		}
	}
	return nil
}
