# The demo stack, applied by `make demo` against the local AWS emulator: a
# pool, and a claim of two runners that the demo switches on and off.
terraform {
  required_providers {
    ec2runners = {
      source = "ec2runners/ec2runners"
    }
  }
}

variable "endpoint" {
  type    = string
  default = "http://127.0.0.1:4566"
}

variable "launch_template_id" {
  type = string
}

variable "subnet_ids" {
  type = list(string)
}

variable "claim" {
  description = "Whether the claim exists: a workflow run holding two runners."
  type        = bool
  default     = false
}

provider "ec2runners" {
  region     = "us-east-1"
  access_key = "test"
  secret_key = "test"

  endpoints {
    sqs      = var.endpoint
    dynamodb = var.endpoint
    ec2      = var.endpoint
    sts      = var.endpoint
  }
}

resource "ec2runners_pool" "demo" {
  name = "demo-pool"
  # Destroying the demo terminates the warm runners still in the pool.
  force_destroy = true

  resource_classes = {
    large  = { cpu = 2, memory_mib = 4096 }
    xlarge = { cpu = 4, memory_mib = 8192 }
  }

  fleet = {
    launch_template_id = var.launch_template_id
    subnet_ids         = var.subnet_ids
    # The emulator cannot do attribute-based selection.
    instance_selection = "explicit"
  }
}

resource "ec2runners_claim" "build" {
  count = var.claim ? 1 : 0

  pool           = ec2runners_pool.demo.name
  instance_count = 2
}

data "ec2runners_pool" "demo" {
  name       = ec2runners_pool.demo.name
  depends_on = [ec2runners_pool.demo, ec2runners_claim.build]
}

output "runs_on" {
  value = one(ec2runners_claim.build[*].label)
}

output "instances" {
  value = one(ec2runners_claim.build[*].instances)
}

output "idle_runners" {
  value = data.ec2runners_pool.demo.idle_messages["large"]
}
