package protocol

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
