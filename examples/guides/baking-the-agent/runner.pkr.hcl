# A runner image with the ec2runners agent baked in, from Amazon Linux 2023,
# for x86_64 (amd64) and arm64 instances:
#
#   packer init .
#   packer build -var region=eu-west-1 -var agent_version=0.1.0 .
#
# agent_version must be the provider's version, as the agent_version
# attribute of ec2runners_runner_script says: the user data runs the image's
# agent only when it is that version, and downloads the release's otherwise.

packer {
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = "~> 1.3"
    }
  }
}

variable "region" {
  type = string
}

variable "agent_version" {
  type        = string
  description = "The ec2runners provider's version, without a leading v."
}

variable "signing_key_file" {
  type        = string
  default     = ""
  description = "The provider's public GPG key (ASCII armor), to check the signature of the agent's SHA256SUMS. Empty: the signature is not checked."
}

locals {
  stamp       = formatdate("YYYYMMDDhhmmss", timestamp())
  signing_key = var.signing_key_file == "" ? "" : file(var.signing_key_file)
}

# The newest Amazon Linux 2023 of each architecture.
data "amazon-parameterstore" "al2023_amd64" {
  region = var.region
  name   = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
}

data "amazon-parameterstore" "al2023_arm64" {
  region = var.region
  name   = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64"
}

source "amazon-ebs" "runner" {
  region       = var.region
  ssh_username = "ec2-user"

  # A configuration can find the image of its provider's version by this tag.
  tags = {
    "ec2runners:agent-version" = var.agent_version
  }
}

build {
  source "amazon-ebs.runner" {
    name          = "amd64"
    source_ami    = data.amazon-parameterstore.al2023_amd64.value
    instance_type = "t3.small"
    ami_name      = "ec2runners-runner-${var.agent_version}-amd64-${local.stamp}"
  }

  source "amazon-ebs.runner" {
    name          = "arm64"
    source_ami    = data.amazon-parameterstore.al2023_arm64.value
    instance_type = "t4g.small"
    ami_name      = "ec2runners-runner-${var.agent_version}-arm64-${local.stamp}"
  }

  # As root: the agent, then what the runner and your jobs need.
  provisioner "shell" {
    script = "${path.root}/install-agent.sh"
    environment_vars = [
      "AGENT_VERSION=${var.agent_version}",
      "ARCH=${source.name}",
      "SIGNING_KEY=${base64encode(local.signing_key)}",
    ]
    execute_command = "sudo env {{ .Vars }} bash '{{ .Path }}'"
  }
}
