# Reaps the pool on demand (Terraform >= 1.14, which has actions):
# ../reap-workflow.yml runs, on a schedule, with the maintenance role,
#   terraform apply -invoke=action.ec2runners_reap.pool -auto-approve
# Claims, releases and pool applies reap too, at most once a minute; this
# cleans up after cancelled runs and lost claims while no one claims. An
# action changes no state: no backend is needed.
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
  description = "Name of the pool to reap (the pool stack's pool_name output)."
  type        = string
}

action "ec2runners_reap" "pool" {
  config {
    pool = var.pool
  }
}
