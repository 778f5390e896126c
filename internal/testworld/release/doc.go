// Package release checks a release build the way the Terraform Registry and
// users see it: the archives, SHA256SUMS, its detached signature and the
// renamed manifest that goreleaser writes to dist/ (make release-snapshot),
// and the agent released with the provider: its binaries, their signed
// SHA256SUMS, and the digests every provider binary embeds; and the
// broker: its Lambda zips and their signed SHA256SUMS. Then
// `terraform init` with no dev_overrides, from a stand-in registry
// (terraform verifies the signature and writes the lock file a user
// commits) and from a filesystem mirror, followed by a plan and apply
// against the AWS emulator, where the runner script the installed provider
// renders must pin the shipped agent. The package has only tests.
package release
