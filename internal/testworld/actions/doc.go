// Package actions tests the GitHub Actions this repository ships
// (.github/actions/claim and .github/actions/release, and the reusable
// workflow .github/workflows/ec2runners.yml) without GitHub: actionlint
// over every shipped workflow and action, the permissions each job of
// them is granted, a model of GitHub's re-run, needs and if: always()
// rules over the example workflows' job graphs (the reusable workflow's
// as its example caller's run shows it), the reusable workflow's check of
// its jobs input and the inputs it passes on, and the actions' script run
// with the real Terraform CLI and the provider built from this checkout:
// against the emulator, with simulated agents for runners, and through a
// stub of the pool's broker; and the actions' install of the CLI, cached
// and checked, from a local server that stands in for its releases.
package actions
