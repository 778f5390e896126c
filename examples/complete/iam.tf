# IAM of the pool, one role per side:
#
# - the runner instances' role: what the agent on every runner needs (it calls
#   DynamoDB, EC2 and the pool's broker with the AWS SDK and the instance's
#   credentials from IMDSv2, nothing else);
# - the broker's role (broker.tf): what claims, releases and the pool's
#   maintenance need (the provider's guide "IAM permissions"; none of
#   the pool's create, delete or tag actions: whoever applies this
#   configuration does that, with broader permissions);
# - the CI role, assumed by workflows through GitHub OIDC: it may only invoke
#   the broker, which checks the workflow's own OIDC token against the
#   pool's access list. No workflow reads the GitHub credential, the table
#   or a runner's tokens;
# - the schedule's role, with which the pool's schedule (schedule.tf) asks
#   the broker for the pool's maintenance: it too may only invoke the
#   broker;
# - the plan role, for `terraform plan` of this stack in pull requests: it
#   reads the pool and writes nothing.

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

# Jobs run on these instances. The agent's firewall rule keeps them from the
# instance's credentials (unless jobs_metadata_access = true), and the IMDS
# hop limit of 1 keeps containers from them; should a job get them all the
# same, the role holds exactly what the agent needs (docs/guides/protocol.md),
# and only for its own instance where it writes:
#
# DynamoDB conditions can pin only the partition key (dynamodb:LeadingKeys),
# never the sort key. Everything an agent reads or writes but its record is
# in its own partition, PK = AGENT#<its instance ARN> (heartbeat, signal, the
# tokens the broker hands it for a claim or release, the runner release it is
# told of), which the policy pins to the calling instance with
# ec2:SourceInstanceARN: a runner reads no other runner's tokens and writes
# no other runner's heartbeats or signals, and no workflow reads them (the
# CI role reads no table at all). It may read the
# instance records (TYPE#INSTANCE): other runners' state and run ids, nothing
# secret. ForAllValues is safe here because GetItem and PutItem always carry
# the key. ($${...} is an IAM policy variable, not a Terraform one.)
data "aws_iam_policy_document" "runner" {
  statement {
    sid       = "ReadInstanceRecords"
    actions   = ["dynamodb:GetItem"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = ["TYPE#INSTANCE"]
    }
  }

  statement {
    sid       = "OwnAgentPartition"
    actions   = ["dynamodb:GetItem", "dynamodb:PutItem"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = ["AGENT#$${ec2:SourceInstanceARN}"]
    }
  }

  # A runner past its deadline terminates itself, and nothing else.
  statement {
    sid       = "TerminateSelf"
    actions   = ["ec2:TerminateInstances"]
    resources = ["$${ec2:SourceInstanceARN}"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/ec2runners:pool"
      values   = [local.pool]
    }
  }

  # A runner the pool keeps in its stopped tier stops itself, and nothing
  # else; only claims start it again.
  statement {
    sid       = "StopSelf"
    actions   = ["ec2:StopInstances"]
    resources = ["$${ec2:SourceInstanceARN}"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/ec2runners:pool"
      values   = [local.pool]
    }
  }

  # A runner of a run claimed through the broker presents its registration
  # grant to the broker (the runner script's broker_function, main.tf) for
  # each job's just-in-time registration, and to delete the last one at
  # release: the broker, which checks the grant against the pool's records,
  # and no other function.
  statement {
    sid       = "InvokeBroker"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.broker.arn, "${aws_lambda_function.broker.arn}:*"]
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
# The broker (broker.tf)
################################################################################

data "aws_iam_policy_document" "broker_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "broker" {
  name               = "${local.pool}-broker"
  description        = "The broker of the ec2runners pool ${local.pool}: claims, releases and maintenance"
  assume_role_policy = data.aws_iam_policy_document.broker_assume.json
}

locals {
  # The pool's GitHub credential (github.tf).
  github_parameter_arn = "arn:${local.partition}:ssm:${var.region}:${local.account_id}:parameter/ec2runners/${local.pool}/github"
}

# What a claim, a release and the pool's maintenance do in AWS. The broker
# runs claims and releases for the workflows of the access list, and the
# maintenance on the pool's schedule (schedule.tf).
data "aws_iam_policy_document" "broker" {
  # The pool's table: its config, instance and claim records, the agents'
  # heartbeats and signals; the table itself, to check it is the pool's.
  statement {
    sid = "ReadPoolTable"
    actions = [
      "dynamodb:DescribeTable", "dynamodb:ListTagsOfResource",
      "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query",
    ]
    resources = [local.table_arn]
  }

  # Writes to everything but TYPE#METADATA, the pool's config item (its
  # settings and access list), which only whoever applies the pool writes: a
  # broker that could rewrite it could let any repository claim, or send
  # runners anywhere. Instance and claim records, the reaper's lease, the
  # markers of released claims (for re-runs), and the runners' agent
  # partitions (the tokens claims and releases hand them). Transactions are
  # authorized as the writes they contain.
  statement {
    sid       = "WritePoolTable"
    actions   = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values = [
        "TYPE#INSTANCE",
        "TYPE#CLAIM",
        "TYPE#LEASE",
        "TYPE#RELEASED",
        "AGENT#arn:${local.partition}:ec2:${var.region}:${local.account_id}:instance/*",
      ]
    }
  }

  # The pool's queues, exactly (a wildcard <pool>-* would also match the
  # queues of a pool named <pool>-something). ChangeMessageVisibility makes
  # the messages a claim held but did not take visible again.
  statement {
    sid = "PoolQueues"
    actions = [
      "sqs:GetQueueUrl", "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:SendMessage", "sqs:ChangeMessageVisibility",
    ]
    resources = values(ec2runners_pool.this.queue_arns)
  }

  # Launching what the pool cannot give (fleet_fallback), only from a launch
  # template tagged for the pool: the pool's table names the template, the
  # tag says it may be used (claims check it too, before CreateFleet).
  statement {
    sid       = "LaunchFromPoolTemplate"
    actions   = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = ["arn:${local.partition}:ec2:${var.region}:${local.account_id}:launch-template/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/ec2runners:pool"
      values   = [local.pool]
    }
  }

  # What else a launch creates or uses; not launch templates (above). Narrow
  # the subnets and security groups if your organization's policies require it.
  statement {
    sid     = "LaunchRunners"
    actions = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = [
      "arn:${local.partition}:ec2:${var.region}:${local.account_id}:fleet/*",
      "arn:${local.partition}:ec2:${var.region}:${local.account_id}:instance/*",
      "arn:${local.partition}:ec2:${var.region}:${local.account_id}:volume/*",
      "arn:${local.partition}:ec2:${var.region}:${local.account_id}:network-interface/*",
      "arn:${local.partition}:ec2:${var.region}:${local.account_id}:subnet/*",
      "arn:${local.partition}:ec2:${var.region}:${local.account_id}:security-group/*",
      "arn:${local.partition}:ec2:${var.region}:${local.account_id}:spot-instances-request/*",
      "arn:${local.partition}:ec2:${var.region}::image/*",
    ]
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

  # DescribeLaunchTemplates: the tag check before every launch;
  # DescribeInstances: the reaper, and instances a lost CreateFleet answer
  # launched. The others only for instance_selection = "explicit".
  statement {
    sid = "Describe"
    actions = [
      "ec2:DescribeLaunchTemplates",
      "ec2:DescribeInstances",
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeLaunchTemplateVersions",
      "ec2:DescribeImages",
    ]
    resources = ["*"]
  }

  # Discarding a broken runner, or one that did not confirm its release;
  # starting a runner of the stopped tier.
  statement {
    sid       = "PoolInstances"
    actions   = ["ec2:TerminateInstances", "ec2:StartInstances"]
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

  # The pool's metrics (metrics.tf): claims and releases write into the
  # pool's log stream, and no other; the pool's apply creates the stream.
  statement {
    sid       = "PoolMetrics"
    actions   = ["logs:PutLogEvents"]
    resources = ["arn:${local.partition}:logs:${var.region}:${local.account_id}:log-group:${local.metrics_log_group}:log-stream:${local.pool}"]
  }

  # The pool's GitHub credential (github.tf): claims and releases mint the
  # runners' tokens with it, and no repository holds a GitHub secret.
  statement {
    sid       = "PoolGitHubCredential"
    actions   = ["ssm:GetParameter"]
    resources = [local.github_parameter_arn]
  }

  # Its key (github.tf), only as SSM decrypts that parameter for the role:
  # no other use of the key, no other parameter.
  statement {
    sid       = "DecryptPoolGitHubCredential"
    actions   = ["kms:Decrypt"]
    resources = ["arn:${local.partition}:kms:${var.region}:${local.account_id}:key/*"]

    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["ssm.${var.region}.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "kms:EncryptionContext:PARAMETER_ARN"
      values   = [local.github_parameter_arn]
    }
  }

  # The same, kept in Secrets Manager instead (github_credential =
  # { secrets_manager_secret = "ec2runners/<pool>/github" }); remove the
  # statement of the store you do not use. -?????? is the 6 random
  # characters Secrets Manager adds to a secret's ARN.
  statement {
    sid       = "PoolGitHubSecret"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = ["arn:${local.partition}:secretsmanager:${var.region}:${local.account_id}:secret:ec2runners/${local.pool}/github-??????"]
  }

  # The secret's key, when it is a customer managed key: only as Secrets
  # Manager decrypts that secret for the role.
  statement {
    sid       = "DecryptPoolGitHubSecret"
    actions   = ["kms:Decrypt"]
    resources = ["arn:${local.partition}:kms:${var.region}:${local.account_id}:key/*"]

    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["secretsmanager.${var.region}.amazonaws.com"]
    }

    condition {
      test     = "StringLike"
      variable = "kms:EncryptionContext:SecretARN"
      values   = ["arn:${local.partition}:secretsmanager:${var.region}:${local.account_id}:secret:ec2runners/${local.pool}/github-??????"]
    }
  }

}

resource "aws_iam_role_policy" "broker" {
  name   = "ec2runners-broker"
  role   = aws_iam_role.broker.id
  policy = data.aws_iam_policy_document.broker.json
}

# The function's own logs (broker.tf), which Lambda writes with its role.
resource "aws_iam_role_policy" "broker_logs" {
  name = "ec2runners-broker-logs"
  role = aws_iam_role.broker.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid      = "FunctionLogs"
      Effect   = "Allow"
      Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
      Resource = "${aws_cloudwatch_log_group.broker.arn}:*"
    }]
  })
}

################################################################################
# The broker's schedule (schedule.tf)
################################################################################

# Only this account's schedules may use the role.
data "aws_iam_policy_document" "scheduler_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

# The schedule's role: it asks the broker for the pool's maintenance, which
# the broker runs with its own role. Whatever holds this role reaches
# nothing of the pool but that function: no table, no credential.
resource "aws_iam_role" "scheduler" {
  name               = "${local.pool}-schedule"
  description        = "The schedule of the ec2runners pool ${local.pool}: invokes its broker's maintenance"
  assume_role_policy = data.aws_iam_policy_document.scheduler_assume.json
}

data "aws_iam_policy_document" "scheduler" {
  statement {
    sid       = "InvokeBroker"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.broker.arn]
  }
}

resource "aws_iam_role_policy" "scheduler" {
  name   = "ec2runners-schedule"
  role   = aws_iam_role.scheduler.id
  policy = data.aws_iam_policy_document.scheduler.json
}

################################################################################
# Workflows, assumed with GitHub OIDC
################################################################################

locals {
  # Each repository of the access list (main.tf), and no other, unless
  # ci_oidc_subjects says otherwise. The broker checks the repository again,
  # from the job's own token: this trust only keeps other repositories from
  # invoking it at all.
  ci_subjects = var.ci_oidc_subjects != null ? var.ci_oidc_subjects : [
    for r in var.claim_repositories : "repo:${r.repository}:*"
  ]

  # The roles workflows assume, with the subjects that may: the CI role
  # always, the plan role when its subjects are set.
  github_roles = merge(
    { ci = local.ci_subjects },
    var.plan_oidc_subjects != null ? { plan = var.plan_oidc_subjects } : {},
  )
}

data "aws_iam_policy_document" "github_assume" {
  for_each = local.github_roles

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
      values   = each.value
    }
  }
}

# The CI role: claims, reads and releases, all through the broker. A claim's
# plan (terraform plan, the release action's import) calls the broker's
# read, which changes nothing, with the same role: IAM cannot tell a read
# from a claim inside an invocation, so a plan role for claims would hold
# exactly this. The broker decides what each workflow may do.
resource "aws_iam_role" "ci" {
  name               = "${local.pool}-claims"
  description        = "GitHub Actions workflows claiming runners from the ec2runners pool ${local.pool} through its broker"
  assume_role_policy = data.aws_iam_policy_document.github_assume["ci"].json
}

data "aws_iam_policy_document" "ci" {
  # The function, and its versions and aliases (a qualified ARN): nothing
  # else in AWS.
  statement {
    sid       = "InvokeBroker"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.broker.arn, "${aws_lambda_function.broker.arn}:*"]
  }
}

resource "aws_iam_role_policy" "ci" {
  name   = "ec2runners-claims"
  role   = aws_iam_role.ci.id
  policy = data.aws_iam_policy_document.ci.json
}

# The plan role: a pull request's plan of this stack. It reads every claim's
# record and this stack's state, which holds the GitHub credential (github.tf):
# trust only the pool's own repository (plan_oidc_subjects), never the
# repositories that claim.
resource "aws_iam_role" "plan" {
  count = var.plan_oidc_subjects != null ? 1 : 0

  name               = "${local.pool}-plan"
  description        = "Plans (read-only) of the ec2runners pool ${local.pool}"
  assume_role_policy = data.aws_iam_policy_document.github_assume["plan"].json
}

# Plans, refreshes, the data sources and terraform query write nothing: no
# reap, no launch, no message received. Record reads are held to the pool's
# records, so a plan reads no runner's tokens (AGENT#...).
data "aws_iam_policy_document" "plan" {
  statement {
    sid       = "DescribePoolTable"
    actions   = ["dynamodb:DescribeTable", "dynamodb:ListTagsOfResource"]
    resources = [local.table_arn]
  }

  statement {
    sid       = "ReadPoolRecords"
    actions   = ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = ["TYPE#METADATA", "TYPE#INSTANCE", "TYPE#CLAIM", "TYPE#LEASE"]
    }
  }

  statement {
    sid       = "ReadPoolQueues"
    actions   = ["sqs:GetQueueUrl", "sqs:GetQueueAttributes"]
    resources = values(ec2runners_pool.this.queue_arns)
  }

  # This stack's Terraform state, read only.
  dynamic "statement" {
    for_each = var.state_bucket != null ? [var.state_bucket] : []

    content {
      sid     = "ReadState"
      actions = ["s3:ListBucket", "s3:GetObject"]
      resources = [
        "arn:${local.partition}:s3:::${statement.value}",
        "arn:${local.partition}:s3:::${statement.value}/ec2runners/pool/terraform.tfstate",
      ]
    }
  }
}

resource "aws_iam_role_policy" "plan" {
  count = var.plan_oidc_subjects != null ? 1 : 0

  name   = "ec2runners-plan"
  role   = aws_iam_role.plan[0].id
  policy = data.aws_iam_policy_document.plan.json
}
