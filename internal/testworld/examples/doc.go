// Package examples checks the Terraform configurations under examples/: the
// ones that use only this provider are validated with `terraform validate`
// against a freshly built provider binary (dev_overrides, no registry access,
// no `terraform init`), the others are checked with `terraform fmt`; and the
// Terragrunt layout of examples/complete runs with the real terragrunt
// binary against the emulator. The user data each example's
// ec2runners_runner_script renders must fit EC2's 16 KB. examples/complete
// must boot a runner on stock Amazon Linux 2023, x86_64 and arm64: its
// pre-runner script installs what the GitHub runner needs and the image
// lacks (ICU), and its provider is pinned to the release line. It has no
// code of its own, only the tests.
package examples
