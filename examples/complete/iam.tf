# IAM for both sides of the pool:
#
# - the runner instances' role: what the agent on every runner needs (it calls
#   DynamoDB and EC2 directly over HTTPS with SigV4, nothing else);
# - the CI role, assumed by the workflow through GitHub OIDC: what claims need
#   (README.md of the provider, "IAM permissions"; a claim needs none of the
#   pool's create, delete or tag actions: whoever applies this configuration
#   does that, with broader permissions).

################################################################################
# Runner instances
################################################################################

data "aws_iam_policy_document" "runner_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "runner" {
  name               = "${local.pool}-runner"
  description        = "Runner instances of the ec2runners pool ${local.pool}"
  assume_role_policy = data.aws_iam_policy_document.runner_assume.json
}

resource "aws_iam_instance_profile" "runner" {
  name = "${local.pool}-runner"
  role = aws_iam_role.runner.name
}

# Jobs run on these instances and can use the instance's credentials too
# (IMDS hop limit 1 keeps them from containers, not from the job's own
# processes), so the role holds only what the agent needs, its own records
# only where conditions allow:
#
# DynamoDB conditions can pin only the partition key (dynamodb:LeadingKeys),
# never the sort key. The agent's items are PK = TYPE#INSTANCE / TYPE#HEARTBEAT
# / TYPE#WS with SK = ID#<its instance id>, so the policy can limit it to
# those item types and actions, not to its own instance id: a runner could
# read other runners' records, and write heartbeats and signals for them.
# ForAllValues is safe here because GetItem and PutItem always carry the key.
data "aws_iam_policy_document" "runner" {
  statement {
    sid       = "ReadOwnRecordAndRegistrationToken"
    actions   = ["dynamodb:GetItem"]
    resources = [local.table_arn]

    # TYPE#INSTANCE: its instance record (state, runId, threshold);
    # TYPE#METADATA: the registration token item (ID#gh_registration_token).
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = ["TYPE#INSTANCE", "TYPE#METADATA"]
    }
  }

  statement {
    sid       = "WriteHeartbeatAndSignals"
    actions   = ["dynamodb:PutItem"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = ["TYPE#HEARTBEAT", "TYPE#WS"]
    }
  }

  # A runner past its deadline terminates itself. The instance tags set at
  # launch limit this to the pool's instances that allow it.
  statement {
    sid       = "TerminateSelf"
    actions   = ["ec2:TerminateInstances"]
    resources = ["arn:${local.partition}:ec2:${var.region}:${local.account_id}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/AllowSelfTermination"
      values   = ["true"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/ec2runners:pool"
      values   = [local.pool]
    }
  }
}

resource "aws_iam_role_policy" "runner" {
  name   = "ec2runners-agent"
  role   = aws_iam_role.runner.id
  policy = data.aws_iam_policy_document.runner.json
}

# Optional, for debugging only: a shell on the runners through SSM Session
# Manager. It widens what jobs can do with the instance's credentials.
# resource "aws_iam_role_policy_attachment" "runner_ssm" {
#   role       = aws_iam_role.runner.name
#   policy_arn = "arn:${local.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
# }

################################################################################
# CI workflow (claims), assumed with GitHub OIDC
################################################################################

locals {
  # Every workflow of the repository, or of the owner's repositories for
  # organization-level runners, unless ci_oidc_subjects narrows it.
  ci_subjects = var.ci_oidc_subjects != null ? var.ci_oidc_subjects : [
    var.github_repository != null ? "repo:${var.github_owner}/${var.github_repository}:*" : "repo:${var.github_owner}/*",
  ]
}

data "aws_iam_policy_document" "ci_assume" {
  statement {
    actions = ["sts:AssumeRoleWithWebIdentity"]

    principals {
      type        = "Federated"
      identifiers = [var.github_oidc_provider_arn]
    }

    condition {
      test     = "StringEquals"
      variable = "token.actions.githubusercontent.com:aud"
      values   = ["sts.amazonaws.com"]
    }

    condition {
      test     = "StringLike"
      variable = "token.actions.githubusercontent.com:sub"
      values   = local.ci_subjects
    }
  }
}

resource "aws_iam_role" "ci" {
  name               = "${local.pool}-claims"
  description        = "GitHub Actions workflows claiming runners from the ec2runners pool ${local.pool}"
  assume_role_policy = data.aws_iam_policy_document.ci_assume.json
}

data "aws_iam_policy_document" "ci" {
  # The pool's table: instance records, claim records, the pool's config.
  statement {
    sid = "PoolTable"
    actions = [
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
      "dynamodb:DeleteItem",
      "dynamodb:Query",
      "dynamodb:BatchGetItem",
    ]
    resources = [local.table_arn]
  }

  # The pool's queues, exactly (a wildcard <pool>-* would also match the
  # queues of a pool named <pool>-something).
  statement {
    sid       = "PoolQueues"
    actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:SendMessage"]
    resources = values(ec2runners_pool.this.queue_arns)
  }

  # Launching what the pool cannot give (fleet_fallback). Narrow CreateFleet
  # and RunInstances to the launch template, subnets and security groups if
  # your organization's policies require it.
  statement {
    sid       = "LaunchRunners"
    actions   = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = ["*"]
  }

  # Tags only while launching (the pool tags and InitialRunId), never on
  # existing resources.
  statement {
    sid       = "TagLaunchedRunners"
    actions   = ["ec2:CreateTags"]
    resources = ["*"]

    condition {
      test     = "StringEquals"
      variable = "ec2:CreateAction"
      values   = ["CreateFleet", "RunInstances"]
    }
  }

  # Needed only with instance_selection = "explicit"; harmless otherwise.
  statement {
    sid = "ResolveInstanceTypes"
    actions = [
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeLaunchTemplateVersions",
      "ec2:DescribeImages",
    ]
    resources = ["*"]
  }

  # Discarding a broken runner, or one that did not confirm its release.
  statement {
    sid       = "TerminatePoolInstances"
    actions   = ["ec2:TerminateInstances"]
    resources = ["arn:${local.partition}:ec2:${var.region}:${local.account_id}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/ec2runners:pool"
      values   = [local.pool]
    }
  }

  # The launch template's instance profile.
  statement {
    sid       = "PassRunnerRole"
    actions   = ["iam:PassRole"]
    resources = [aws_iam_role.runner.arn]

    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["ec2.amazonaws.com"]
    }
  }

  # The claims' Terraform state: the claim job writes it, the release job
  # reads it to destroy the claim. Terragrunt's claims unit also reads the
  # pool unit's outputs from its state.
  dynamic "statement" {
    for_each = var.state_bucket != null ? [var.state_bucket] : []

    content {
      sid       = "StateBucket"
      actions   = ["s3:ListBucket"]
      resources = ["arn:${local.partition}:s3:::${statement.value}"]
    }
  }

  dynamic "statement" {
    for_each = var.state_bucket != null ? [var.state_bucket] : []

    content {
      sid       = "ClaimState"
      actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
      resources = ["arn:${local.partition}:s3:::${statement.value}/ec2runners/claims/*"]
    }
  }

  dynamic "statement" {
    for_each = var.state_bucket != null ? [var.state_bucket] : []

    content {
      sid       = "ReadPoolState"
      actions   = ["s3:GetObject"]
      resources = ["arn:${local.partition}:s3:::${statement.value}/ec2runners/pool/terraform.tfstate"]
    }
  }
}

resource "aws_iam_role_policy" "ci" {
  name   = "ec2runners-claims"
  role   = aws_iam_role.ci.id
  policy = data.aws_iam_policy_document.ci.json
}
