# What the claim and release actions apply (.github/actions/claim and
# .github/actions/release): the claims of one workflow run, by run id. The
# actions write versions.tf beside this file (the provider's version, and a
# backend when one is given) and pass every value as a TF_VAR_ variable, so
# no input is ever parsed as configuration.

variable "pool" {
  type = string
}

# The claim action applies one run id: its own. The release action adopts
# its claim and the claims earlier attempts of the run may have left, by
# identity, and destroys them all.
variable "run_ids" {
  type = list(string)
}

# The claim job's id: another job of the run that claims under the same run
# id fails instead of sharing this claim.
variable "claimant" {
  type    = string
  default = null
}

variable "instance_count" {
  type    = number
  default = 1
}

variable "resource_class" {
  type    = string
  default = null
}

variable "usage_class" {
  type    = string
  default = null
}

variable "allowed_instance_types" {
  type    = list(string)
  default = null
}

variable "max_runtime" {
  type    = string
  default = null
}

variable "runner_group" {
  type    = string
  default = null
}

variable "create_timeout" {
  type    = string
  default = "10m"
}

# Region and credentials from the environment (the role the action assumed);
# GitHub credentials from GITHUB_TOKEN or GITHUB_APP_*.
provider "ec2runners" {}

resource "ec2runners_claim" "this" {
  for_each = toset(var.run_ids)

  pool                   = var.pool
  run_id                 = each.key
  instance_count         = var.instance_count
  resource_class         = var.resource_class
  usage_class            = var.usage_class
  allowed_instance_types = var.allowed_instance_types
  max_runtime            = var.max_runtime
  runner_group           = var.runner_group
  claimant               = var.claimant

  timeouts {
    create = var.create_timeout
    delete = "4m" # within the 5 minutes GitHub gives a cancelled run's last jobs
  }
}

# Everything the claim step reports, one name=value a line: a single
# `terraform output` call reads it (each call starts the CLI anew).
output "claim" {
  value = try(join("\n", [
    "label=${ec2runners_claim.this[var.run_ids[0]].label}",
    "instance_ids=${jsonencode(ec2runners_claim.this[var.run_ids[0]].instance_ids)}",
    format("summary=%d reused, %d started from stopped, %d launched",
      ec2runners_claim.this[var.run_ids[0]].reused_count,
      ec2runners_claim.this[var.run_ids[0]].started_count,
    ec2runners_claim.this[var.run_ids[0]].created_count),
  ]), "")
}
