terraform {
  # S3 native state locking (use_lockfile) needs Terraform >= 1.10.
  required_version = ">= 1.11"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
    ec2runners = {
      source = "ec2runners/ec2runners"
      # The release line this configuration was written for: patch releases
      # only. Move it on purpose, with the broker's zip of the same release
      # (guide "Upgrading").
      version = "~> 0.1.0"
    }
  }

  # Keep the pool's state remote in real use, e.g.:
  # backend "s3" {
  #   bucket       = "acme-terraform-state"
  #   key          = "ec2runners/pool/terraform.tfstate"
  #   region       = "eu-west-1"
  #   use_lockfile = true
  # }
}
