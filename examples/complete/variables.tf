variable "region" {
  description = "AWS region of the pool, its runners and its broker."
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
    condition     = can(regex("^[A-Za-z0-9_-]{3,40}$", var.pool_name))
    error_message = "The pool name must be 3-40 characters of A-Z, a-z, 0-9, '_' and '-'."
  }
}

variable "subnet_ids" {
  description = "Subnets the runners launch in, ideally one per availability zone. They need outbound HTTPS (a NAT gateway or public IPs) to reach GitHub, DynamoDB, EC2, Lambda (the broker) and Amazon Linux's package repositories."
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
  description = "Leave it null: through the broker, each claim's runners register with the claim's repository (of claim_repositories) and serve its jobs alone. A repository name (without the owner) is for a pool of that one repository."
  type        = string
  default     = null

  validation {
    condition     = var.github_repository == null || can(regex("^[A-Za-z0-9._-]{1,100}$", var.github_repository))
    error_message = "The repository must be a bare repository name such as \"app\", without the owner."
  }
}

variable "github_token" {
  description = "GitHub token that may create runner registration tokens for every repository of claim_repositories (fine-grained: \"Administration: read and write\" and \"Actions: read\" on each of them; a GitHub App installed on them with the same permissions is better, see github.tf). The stack keeps it in an SSM parameter under a key of its own, which of the stack's roles only the broker may read (github.tf). Null: no parameter; name a credential you keep yourself in the pool's github_credential."
  type        = string
  default     = null
  sensitive   = true
}

variable "github_oidc_provider_arn" {
  description = "ARN of the account's existing IAM OIDC provider for token.actions.githubusercontent.com, trusted by the roles workflows assume (CI, plan)."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:oidc-provider/token\\.actions\\.githubusercontent\\.com$", var.github_oidc_provider_arn))
    error_message = "The ARN must be arn:aws:iam::<account>:oidc-provider/token.actions.githubusercontent.com."
  }
}

variable "claim_repositories" {
  description = "The pool's access list: the repositories (\"owner/name\", of github_owner) whose workflows may claim runners through the broker, each with optional workflows (globs on the OIDC token's workflow_ref, e.g. \"acme/app/.github/workflows/ci.yml@refs/heads/main\"), max_runners (runners its claims hold at once), max_runtime (\"2h\") and resource_classes. The broker refuses every other repository, and a repository over a cap."
  type = list(object({
    repository       = string
    workflows        = optional(list(string))
    max_runners      = optional(number)
    max_runtime      = optional(string)
    resource_classes = optional(list(string))
  }))

  validation {
    condition     = length(var.claim_repositories) > 0
    error_message = "Name at least one repository that may claim."
  }

  validation {
    condition     = alltrue([for r in var.claim_repositories : can(regex("^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$", r.repository)) && lower(split("/", r.repository)[0]) == lower(var.github_owner)])
    error_message = "Each repository must be \"owner/name\", with github_owner as the owner: the runners register with it."
  }

  validation {
    condition     = length(distinct([for r in var.claim_repositories : lower(r.repository)])) == length(var.claim_repositories)
    error_message = "Each repository may appear only once."
  }
}

variable "broker_zip" {
  description = "Local path of the broker's Lambda package, ec2runners-broker_<version>_linux_arm64.zip: published with each release of the provider, beside the agent, at https://github.com/ec2runners/terraform-provider-ec2runners/releases/download/v<version>/ (listed with its SHA-256 in ec2runners-broker_<version>_SHA256SUMS, signed as the provider's). Use the provider's version."
  type        = string
}

variable "broker_reserved_concurrency" {
  description = "Claims, reads and releases the broker runs at once, reserved from the account's Lambda concurrency; more are throttled. Null: no reservation (the account's shared concurrency; new accounts, whose quota is too small to reserve from, need this)."
  type        = number
  default     = 50

  validation {
    condition     = var.broker_reserved_concurrency == null || try(var.broker_reserved_concurrency >= 1 && floor(var.broker_reserved_concurrency) == var.broker_reserved_concurrency, false)
    error_message = "The reserved concurrency must be a whole number of at least 1 (0 would refuse every claim), or null."
  }
}

variable "ci_oidc_subjects" {
  description = "GitHub OIDC subjects (sub claims, wildcards allowed) that may assume the CI role, which may only invoke the broker. Null: \"repo:<repository>:*\" for each repository of claim_repositories. Narrow it to branches or environments; or, past IAM's size limit of a trust policy (2,048 characters, 4,096 on request: some 50 repositories), widen it to [\"repo:<owner>/*\"]: the broker still refuses every repository not in claim_repositories."
  type        = list(string)
  default     = null

  validation {
    condition     = var.ci_oidc_subjects == null || length(coalesce(var.ci_oidc_subjects, [])) > 0
    error_message = "Give at least one subject, or null for the default."
  }
}

variable "plan_oidc_subjects" {
  description = "GitHub OIDC subjects (sub claims, wildcards allowed) that may assume the plan role, which only reads, for this stack's pull requests: e.g. [\"repo:acme/platform:pull_request\"]. Never the claim repositories: it reads every claim's record and this stack's state, which holds the GitHub credential. Null: no plan role. Claims need none: their plans read through the broker with the CI role."
  type        = list(string)
  default     = null

  validation {
    condition     = var.plan_oidc_subjects == null || length(coalesce(var.plan_oidc_subjects, [])) > 0
    error_message = "Give at least one subject, or null for no plan role."
  }
}

variable "architecture" {
  description = "Architecture of the runners: \"x86_64\", or \"arm64\" for Graviton instances. With ami_id null it picks the Amazon Linux 2023 image of that architecture; the image decides the architecture of every runner of the pool."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "The architecture must be \"x86_64\" or \"arm64\": the agent is released for those two."
  }
}

variable "ami_id" {
  description = "AMI of the runners. Null: the latest Amazon Linux 2023 of var.architecture, looked up on every plan; set it to pin an image (of var.architecture)."
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
  description = "S3 bucket holding this stack's Terraform state, at ec2runners/pool/terraform.tfstate (as terragrunt/ keeps it): the plan role may read it. Null: no state permissions. The CI role reads no state: this stack's state holds the GitHub credential."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags of everything this configuration creates."
  type        = map(string)
  default     = {}
}
