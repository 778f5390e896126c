# Fills the pool's warm targets on demand (Terraform >= 1.14, which has
# actions): ../warm-workflow.yml runs, on weekdays as the pool's
# office-hours window opens (a quarter of an hour before the first runs),
# with the maintenance role,
#   terraform apply -invoke=action.ec2runners_warm.pool -auto-approve
# The pool's own apply fills the targets too, and claims top the stopped
# tier up; this brings the window's hot runners up before the first run of
# the day. An action changes no state: no backend is needed.
terraform {
  required_version = ">= 1.14"

  required_providers {
    ec2runners = {
      source = "ec2runners/ec2runners"
    }
  }
}

# AWS region and credentials come from the environment, e.g. the maintenance
# role (iam.tf).
provider "ec2runners" {}

variable "pool" {
  description = "Name of the pool to warm (the pool stack's pool_name output)."
  type        = string
}

action "ec2runners_warm" "pool" {
  config {
    pool = var.pool
  }
}
