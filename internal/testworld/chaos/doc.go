// Package chaos holds the fault-injection tests: claims and releases
// through internal/testworld/faultproxy (throttling, 5xx, dropped requests and lost
// responses), and Terraform killed mid-apply, each followed by an audit of
// the pool's invariants (internal/testworld/audit).
package chaos
