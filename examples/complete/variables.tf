variable "region" {
  description = "AWS region of the pool, its runners and the CI role's permissions."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]+$", var.region))
    error_message = "The region must be an AWS region name such as \"eu-west-1\"."
  }
}

variable "pool_name" {
  description = "Name of the pool: the DynamoDB table's name and the prefix of its SQS queues (<pool>-<class>)."
  type        = string
  default     = "ci-runners"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,40}$", var.pool_name))
    error_message = "The pool name must be 1-40 characters of A-Z, a-z, 0-9, '_' and '-'."
  }
}

variable "subnet_ids" {
  description = "Subnets the runners launch in, ideally one per availability zone. They need outbound HTTPS (a NAT gateway or public IPs) to reach GitHub, DynamoDB and EC2."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) > 0 && alltrue([for s in var.subnet_ids : can(regex("^subnet-[0-9a-f]+$", s))])
    error_message = "Give at least one subnet ID (subnet-...)."
  }

  validation {
    condition     = length(distinct(var.subnet_ids)) == length(var.subnet_ids)
    error_message = "The subnet IDs must be unique."
  }
}

variable "security_group_ids" {
  description = "Security groups of the runners. Runners need no inbound rules; outbound HTTPS must be allowed."
  type        = list(string)

  validation {
    condition     = length(var.security_group_ids) > 0 && alltrue([for s in var.security_group_ids : can(regex("^sg-[0-9a-f]+$", s))])
    error_message = "Give at least one security group ID (sg-...)."
  }
}

variable "github_owner" {
  description = "GitHub organization or user that owns the runners."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9-]{0,38}$", var.github_owner))
    error_message = "The owner must be a GitHub organization or user name."
  }
}

variable "github_repository" {
  description = "Repository (name only, without the owner) the runners register with. Null registers organization-level runners, available to the organization's repositories per its runner group settings."
  type        = string
  default     = null

  validation {
    condition     = var.github_repository == null || can(regex("^[A-Za-z0-9._-]{1,100}$", var.github_repository))
    error_message = "The repository must be a bare repository name such as \"app\", without the owner."
  }
}

variable "github_token" {
  description = "GitHub token that may create runner registration tokens (fine-grained: \"Administration: read and write\" on the repository, or \"Self-hosted runners: read and write\" on the organization). The stack keeps it in an SSM parameter for the workflows' claims (github.tf). Null: no parameter, and the provider reads GITHUB_TOKEN from the environment (then each workflow needs a GitHub credential of its own)."
  type        = string
  default     = null
  sensitive   = true
}

variable "github_oidc_provider_arn" {
  description = "ARN of the account's existing IAM OIDC provider for token.actions.githubusercontent.com, trusted by the CI role."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:oidc-provider/token\\.actions\\.githubusercontent\\.com$", var.github_oidc_provider_arn))
    error_message = "The ARN must be arn:aws:iam::<account>:oidc-provider/token.actions.githubusercontent.com."
  }
}

variable "ci_oidc_subjects" {
  description = "GitHub OIDC subjects (sub claims, wildcards allowed) that may assume the CI role. Null: every workflow of github_repository, or of every repository of github_owner when github_repository is null. Narrow it to a branch or environment, e.g. [\"repo:acme/app:ref:refs/heads/main\"]."
  type        = list(string)
  default     = null

  validation {
    condition     = var.ci_oidc_subjects == null || length(coalesce(var.ci_oidc_subjects, [])) > 0
    error_message = "Give at least one subject, or null for the default."
  }
}

variable "plan_oidc_subjects" {
  description = "GitHub OIDC subjects (sub claims, wildcards allowed) that may assume the plan role, which only reads. Null: the CI role's subjects. For pull requests' plans: [\"repo:acme/app:pull_request\"]."
  type        = list(string)
  default     = null

  validation {
    condition     = var.plan_oidc_subjects == null || length(coalesce(var.plan_oidc_subjects, [])) > 0
    error_message = "Give at least one subject, or null for the default."
  }
}

variable "ami_id" {
  description = "AMI of the runners. Null: the latest Amazon Linux 2023 (x86_64), looked up on every plan; set it to pin an image."
  type        = string
  default     = null

  validation {
    condition     = var.ami_id == null || can(regex("^ami-[0-9a-f]+$", var.ami_id))
    error_message = "The AMI ID must look like ami-0123456789abcdef0."
  }
}

variable "root_volume_size" {
  description = "Size of the runners' encrypted gp3 root volume, in GiB."
  type        = number
  default     = 40

  validation {
    condition     = var.root_volume_size >= 8 && var.root_volume_size <= 16384
    error_message = "The root volume must be 8-16384 GiB."
  }
}

variable "idle_timeout" {
  description = "How long a released runner waits warm in the pool before it terminates itself."
  type        = string
  default     = "10m"
}

variable "max_runtime" {
  description = "How long a claim may hold a runner before the runner terminates itself (a claim may ask for another)."
  type        = string
  default     = "45m"
}

variable "state_bucket" {
  description = "S3 bucket holding the claims' Terraform state (see claim/ and terragrunt/). When set, the CI role may read and write ec2runners/claims/* in it and read the pool's state ec2runners/pool/terraform.tfstate (Terragrunt reads the pool's outputs). Null: no state permissions."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags of everything this configuration creates."
  type        = map(string)
  default     = {}
}
