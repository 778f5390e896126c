# The demo stack: a pool on the local emulator. `make demo` applies it,
# prints its outputs and destroys it.
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

provider "ec2runners" {
  region     = "us-east-1"
  access_key = "test"
  secret_key = "test"

  endpoints {
    sqs      = var.endpoint
    dynamodb = var.endpoint
    ec2      = var.endpoint
  }
}

resource "ec2runners_pool" "demo" {
  name = "demo-pool"

  resource_classes = {
    large  = { cpu = 2, memory_mib = 4096 }
    xlarge = { cpu = 4, memory_mib = 8192 }
  }
}

data "ec2runners_pool" "demo" {
  name       = ec2runners_pool.demo.name
  depends_on = [ec2runners_pool.demo]
}

output "table" {
  value = ec2runners_pool.demo.table_name
}

output "queues" {
  value = ec2runners_pool.demo.queue_urls
}

output "idle_runners" {
  value = data.ec2runners_pool.demo.idle_messages
}
