# A warm pool of self-hosted GitHub Actions runners on real AWS: the runners'
# launch template and the agent its user data installs, the pool (DynamoDB table and
# SQS queues) with its access list, the broker that claims for the
# workflows of that list (broker.tf), and the IAM roles (iam.tf). Workflows
# claim runners with the claim and release actions (see workflow.yml).

provider "aws" {
  region = var.region

  default_tags {
    tags = var.tags
  }
}

provider "ec2runners" {
  region = var.region

  default_tags {
    tags = var.tags
  }

  # GitHub credentials for what this stack's applies do themselves (an
  # apply that fills the pool's warm targets, or releases the claims of
  # ended runs); the broker uses the one the pool keeps (github.tf). Only
  # for this owner's pools.
  github {
    # Null falls back to the GITHUB_TOKEN environment variable.
    token      = var.github_token
    base_url   = "https://api.github.com" # GitHub Enterprise Server: https://<host>/api/v3
    owner      = var.github_owner
    repository = var.github_repository

    # Or, instead of a token, a GitHub App installed on the owner with the
    # same permissions (recommended for organizations):
    # app_id          = 123456
    # installation_id = 45678901
    # private_key     = file("${path.root}/github-app.private-key.pem")
  }
}

data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

# The latest Amazon Linux 2023 for the runners' architecture (x86_64, or
# arm64 for Graviton), unless ami_id pins an image. The image decides the
# architecture of every runner of the pool.
data "aws_ssm_parameter" "al2023" {
  count = var.ami_id == null ? 1 : 0

  name = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-${var.architecture}"
}

locals {
  # The pool's name comes from the variable, not from ec2runners_pool: the
  # runner script, the launch template and the IAM policies need it before
  # the pool exists, and the pool depends on the launch template.
  pool = var.pool_name

  runner_user = "runner"

  ami_id = var.ami_id != null ? var.ami_id : one(data.aws_ssm_parameter.al2023[*].insecure_value)

  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
  table_arn  = "arn:${local.partition}:dynamodb:${var.region}:${local.account_id}:table/${local.pool}"
}

# The runners' user data: a short bootstrap that installs the agent
# (ec2runners-agent, released with the provider: the image's when it is the
# provider's version, else downloaded and checked against its SHA-256) and
# starts it as a systemd service. The agent heartbeats, waits until a claim
# gives its instance a run id, registers the GitHub runner with that run id
# as its only label, deregisters it and wipes what the jobs left on release,
# and stops or terminates its instance when its record says so.
data "ec2runners_runner_script" "this" {
  pool              = local.pool
  region            = var.region
  github_url        = "https://github.com"
  github_owner      = var.github_owner
  github_repository = var.github_repository
  runner_user       = local.runner_user
  # Runs claimed through the broker (broker.tf) hand each runner a
  # registration grant, which the agent presents to the broker for each
  # job's just-in-time registration (the runner role's InvokeBroker, iam.tf).
  broker_function = local.broker_function
  # Unset, the agent installs GitHub's newest runner and keeps it up to date
  # while the runner waits in the pool. A pin (2.329.0 or later) is never
  # updated: GitHub stops sending it jobs about 30 days after the next
  # release, and you must move it.
  # runner_version = "2.331.0"

  # Runs once per instance, as root, after the agent has installed the GitHub
  # runner (and created its user), before the runner registers: install what
  # your jobs need. Keep it short, every fresh runner waits for it, and EC2
  # takes at most 16 KB of user data (bake bigger installs into the image:
  # guide "Baking the agent into an image"). It ends up in the launch
  # template's user data: no secrets here.
  #
  # Jobs that build containers: do not add the runner user to the docker
  # group, which makes every job root on a machine the next run reuses. Give
  # the runner user a rootless Docker or Podman instead: its containers and
  # images are its own, wiped with it at release (guide "Runner security").
  #
  # The first line installs what the GitHub runner needs and stock Amazon
  # Linux 2023 (x86_64 and arm64) lacks: ICU (libicu). Without it the runner
  # does not start ("Couldn't find a valid ICU package"). The runner's own
  # bin/installdependencies.sh, which the agent runs, does not recognize
  # Amazon Linux 2023 and installs nothing there. The other packages of its
  # list for Fedora-like systems are in the image already (lttng-ust, for
  # .NET's tracing only, is not needed). With set -e, a failed install fails
  # the instance's preparation (UD_FAILED) instead of a runner later. Bake
  # all of it into the image to boot faster (guide "Baking the agent into an
  # image").
  pre_runner_script = <<-EOT
    set -euo pipefail
    dnf install -y --setopt=install_weak_deps=False libicu krb5-libs openssl-libs zlib
    dnf install -y --setopt=install_weak_deps=False git
  EOT
}

resource "aws_launch_template" "runner" {
  name_prefix = "${local.pool}-runner-"
  description = "GitHub Actions runners of the ec2runners pool ${local.pool}"

  image_id = local.ami_id
  # No instance type: the claims' fleet requests choose it per resource class
  # (vCPUs, memory and allowed instance types).

  user_data              = data.ec2runners_runner_script.this.content_base64
  vpc_security_group_ids = var.security_group_ids

  iam_instance_profile {
    arn = aws_iam_instance_profile.runner.arn
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required" # IMDSv2 only
    http_put_response_hop_limit = 1          # containers in jobs cannot reach the instance's credentials
    instance_metadata_tags      = "enabled"  # the agent reads its InitialRunId tag from IMDS
  }

  block_device_mappings {
    device_name = "/dev/xvda" # the root device of Amazon Linux 2023

    ebs {
      volume_type           = "gp3"
      volume_size           = var.root_volume_size
      encrypted             = true
      delete_on_termination = true
    }
  }

  # Claims launch with the version the pool names (latest_version below);
  # keeping the default version current helps anyone launching by hand.
  update_default_version = true

  # Claims launch only a template tagged for their pool, and the broker may
  # launch only with one (iam.tf): the pool's table names the template, the
  # tag says who may use it.
  tags = {
    "ec2runners:pool" = local.pool
  }

  tag_specifications {
    resource_type = "instance"
    tags          = merge(var.tags, { Name = "${local.pool}-runner" })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(var.tags, { Name = "${local.pool}-runner" })
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "ec2runners_pool" "this" {
  name = local.pool

  # The owner of the runners. Through the broker, each claim's runners
  # register with the claim's repository alone.
  github_owner      = var.github_owner
  github_repository = var.github_repository

  # The broker mints the runners' tokens with this one (github.tf): no
  # repository needs a GitHub secret, and no workflow can read it.
  github_credential = var.github_token != null ? { ssm_parameter = aws_ssm_parameter.github[0].name } : null

  # Who may claim through the broker, and how much: repositories (owner/name),
  # optionally only some of their workflows, and caps per repository
  # (claim_repositories). Only this stack writes it: the broker reads it
  # before every claim, and its role may not change it (iam.tf).
  access = var.claim_repositories

  idle_timeout = var.idle_timeout
  max_runtime  = var.max_runtime

  fleet = {
    launch_template_id = aws_launch_template.runner.id
    # A new template version (a new AMI, a changed script) updates the pool;
    # runners already warm keep theirs until they expire.
    launch_template_version = tostring(aws_launch_template.runner.latest_version)
    subnet_ids              = var.subnet_ids
    instance_selection      = "attribute-based"
  }

  # Claims, releases and scans publish how the pool serves its runs into
  # the pool's log stream of this log group (metrics.tf). Without this
  # block nothing is published.
  metrics = {
    log_group = aws_cloudwatch_log_group.metrics.name
    namespace = local.metrics_namespace
  }

  tags = var.tags

  # Without force_destroy, destroying the pool fails while runners are still
  # in it: release the claims and let the idle runners expire first (see
  # README.md), or set it to true to terminate them.
  force_destroy = false

  # The runners' permissions must exist before the first claim launches one.
  depends_on = [aws_iam_role_policy.runner]
}
