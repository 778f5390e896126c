// Package chaos holds the fault-injection tests: claims and releases
// through internal/faultproxy (throttling, 5xx, dropped requests and lost
// responses), and Terraform killed mid-apply, each followed by an audit of
// the pool's invariants (internal/audit).
package chaos
