# The runners of ONE workflow run, for workflows that apply claims with plain
# Terraform or Terragrunt: the claim job applies this root module, the build
# jobs run on the label it outputs, and the release job destroys it.
# (../workflow.yml uses the claim and release actions instead, which need
# none of this.) Only the ec2runners provider is needed: it reaches the
# pool by its name, through the pool's broker.
terraform {
  required_version = ">= 1.11"

  required_providers {
    ec2runners = {
      source = "ec2runners/ec2runners"
      # The pool stack's release line (../versions.tf): patch releases
      # only. Commit .terraform.lock.hcl.
      version = "~> 0.1.0"
    }
  }

  # The claim job creates the claim and the release job, on another machine,
  # destroys it. Either the release job adopts it first from the pool's
  # table, by its identity:
  #   terraform import ec2runners_claim.this <pool>/<run id>
  # or the state survives in between, in a backend both jobs reach, one
  # state per run and attempt:
  #   terraform init -backend-config="key=ec2runners/claims/<run id>/terraform.tfstate"
  # backend "s3" {
  #   bucket       = "acme-terraform-state"
  #   region       = "eu-west-1"
  #   use_lockfile = true
  # }
}

# AWS region and credentials come from the environment, e.g. the CI role
# assumed by aws-actions/configure-aws-credentials (AWS_REGION and the role's
# keys).
provider "ec2runners" {
  # The claim, its reads and its release go through the pool's broker
  # (EC2RUNNERS_BROKER_FUNCTION in the environment: the pool stack's
  # broker_function_name output), with the job's GitHub OIDC token (the job
  # needs permissions id-token: write). The CI role may only invoke the
  # broker; the broker mints the runners' tokens with the credential the
  # pool keeps, for this repository alone.
  #
  # A pool without a broker, whose claimants all trust each other: the
  # claim reads the pool's table and credential itself, with a role that
  # holds the broker's rights, or with a github block of its own.
}

variable "pool" {
  description = "Name of the pool to claim from (the pool stack's pool_name output)."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{3,40}$", var.pool))
    error_message = "The pool name must be 3-40 characters of A-Z, a-z, 0-9, '_' and '-'."
  }
}

variable "run_id" {
  description = "The claim's run id, unique per workflow run and attempt, e.g. \"<github.run_id>-<github.run_attempt>\"; it begins the runners' label."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_.-]{0,85}$", var.run_id))
    error_message = "The run ID must be 1-86 characters of lower-case letters, digits, '_', '.' and '-', starting with a letter or digit (lower case: GitHub matches labels case-insensitively)."
  }
}

variable "instance_count" {
  description = "How many runners the run's jobs need at once."
  type        = number
  default     = 1

  validation {
    condition     = var.instance_count >= 1 && var.instance_count <= 100 && floor(var.instance_count) == var.instance_count
    error_message = "The instance count must be a whole number from 1 to 100."
  }
}

variable "resource_class" {
  description = "Size of the runners: a resource class of the pool (by default large, xlarge, 2xlarge, ... 16xlarge)."
  type        = string
  default     = "large"
}

resource "ec2runners_claim" "this" {
  pool           = var.pool
  run_id         = var.run_id
  instance_count = var.instance_count
  resource_class = var.resource_class

  # Instance type patterns (* is the only wildcard); these are the defaults.
  allowed_instance_types = ["c*", "m*", "r*"]
  usage_class            = "on-demand" # or "spot": cheaper, may be reclaimed
  # max_runtime          = "1h"        # default: the pool's max_runtime

  timeouts {
    create = "10m" # fresh instances must boot, register and heartbeat
    delete = "5m"  # each runner confirms its release within release_wait (2m)
  }
}

output "runs_on" {
  description = "The label the run's jobs use: runs-on: <runs_on>."
  value       = ec2runners_claim.this.label
}
