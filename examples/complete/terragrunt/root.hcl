# Settings every unit includes: the state backend and the ec2runners
# provider's shared settings. Units: pool/ (the pool, its launch template and
# IAM: the module in examples/complete) and claims/ (one workflow run's claim:
# examples/complete/claim).

locals {
  region       = "eu-west-1"
  state_bucket = "acme-terraform-state" # created by Terragrunt with --backend-bootstrap

  state_config = {
    bucket       = local.state_bucket
    region       = local.region
    encrypt      = true
    use_lockfile = true # S3 native locking, Terraform >= 1.10
  }

  default_tags = {
    ManagedBy = "terragrunt"
    Project   = "ec2runners"
  }
}

# State of each unit under ec2runners/<unit path>/ (the claims unit keys its
# own per workflow run, see claims/terragrunt.hcl).
remote_state {
  backend = "s3"

  generate = {
    path      = "backend.tf"
    if_exists = "overwrite_terragrunt"
  }

  config = merge(local.state_config, {
    key = "ec2runners/${path_relative_to_include()}/terraform.tfstate"
  })
}

# Both modules declare their own provider "ec2runners" block (they are also
# applied with plain Terraform); this override file is merged into it, so
# every unit gets the same region and default tags. The pool module's github
# block and its aws provider stay as they are.
generate "provider" {
  path      = "provider_override.tf"
  if_exists = "overwrite_terragrunt"
  contents  = <<-EOF
    provider "ec2runners" {
      region = "${local.region}"

      default_tags {
        tags = ${jsonencode(local.default_tags)}
      }
    }
  EOF
}
