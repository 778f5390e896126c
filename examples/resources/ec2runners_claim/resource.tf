# Two runners for one workflow run: warm ones from the pool first, the rest
# launched with EC2 CreateFleet. Destroying the claim releases them back to
# the pool for the next run.
resource "ec2runners_claim" "build" {
  pool           = "ci-runners"
  run_id         = "run-${var.github_run_id}-${var.github_run_attempt}"
  instance_count = 2
  resource_class = "xlarge"

  allowed_instance_types = ["c6*", "m6*"]
  usage_class            = "spot"
  max_runtime            = "45m"
  # runner_group         = "Trusted builds" # organization runners only

  timeouts {
    create = "10m"
  }
}

variable "github_run_id" {
  type = string
}

variable "github_run_attempt" {
  type = string
}

output "runs_on" {
  value = ec2runners_claim.build.label
}
