# The pool's broker: the one way workflows reach the pool. A workflow's claim
# invokes this function with the job's GitHub Actions OIDC token; the
# function checks the token (GitHub's published keys, the audience below),
# checks the pool's access list (claim_repositories: which repositories, and
# optionally which workflows, may claim, and their caps), and runs the claim,
# read or release for the token's repository alone. Its runners register
# with that repository, so no job of another repository reaches them,
# whatever its runs-on.
#
# The function holds what claims need (iam.tf, data.aws_iam_policy_document.broker):
# the pool's table and queues, launches, the GitHub credential. The CI role
# that workflows assume may only invoke it: no workflow reads the credential,
# the table or a runner's tokens. It also maintains the pool on a schedule
# (schedule.tf), so no workflow needs the broker's rights for that either.

locals {
  broker_function = "${local.pool}-broker"

  # The audience of the OIDC tokens the broker accepts: the provider's
  # default, which claims request unless their broker block names another.
  broker_audience = "ec2runners"
}

resource "aws_lambda_function" "broker" {
  function_name = local.broker_function
  description   = "Claims runners of the ec2runners pool ${local.pool} for the workflows its access list names"
  role          = aws_iam_role.broker.arn

  # The release's ec2runners-broker for linux/arm64 (variable broker_zip):
  # a Go binary named bootstrap, run by the OS-only runtime.
  filename         = var.broker_zip
  source_code_hash = filebase64sha256(var.broker_zip)
  runtime          = "provided.al2023"
  architectures    = ["arm64"]
  handler          = "bootstrap"

  # A claim mostly waits: for its runners' checks, and for EC2 when it
  # launches. 256 MB is ample for the binary and its clients.
  memory_size = 256

  # Lambda's maximum, 15 minutes. A claim that launches waits for its new
  # runners (up to about 5 minutes) and, when it fails, gives back what it
  # took (up to 3 minutes more); a release waits up to 2 minutes for its
  # runners to deregister; the pool's maintenance ends within 10 minutes.
  # Claims are synchronous: the provider waits for the answer (Lambda's
  # limit for synchronous requests and answers, 6 MB, is far above a
  # claim's few KB).
  timeout = 900

  # At most this many claims, reads and releases at once (and the agents'
  # registrations, and the pool's maintenance): each holds one for as long
  # as it runs (seconds for warm runners, minutes for a launch), and more
  # are throttled (TooManyRequestsException). It caps what a flood of
  # invocations costs, and keeps them when the account's other functions
  # use all the rest. Lambda keeps 100 of the account's concurrency
  # unreserved, and new accounts start with less than that: null (-1)
  # shares the account's pool instead.
  reserved_concurrent_executions = coalesce(var.broker_reserved_concurrency, -1)

  environment {
    variables = {
      EC2RUNNERS_POOL     = local.pool
      EC2RUNNERS_AUDIENCE = local.broker_audience
    }
  }

  # Not in a VPC: the broker reaches GitHub (the OIDC keys, the runners'
  # tokens) and AWS's APIs over the internet. In a VPC it would need a NAT
  # gateway or VPC endpoints, and a way to GitHub.

  # Its role's permissions exist before the first invocation, and its log
  # group, with a retention: the role may write only there (iam.tf).
  depends_on = [aws_iam_role_policy.broker, aws_iam_role_policy.broker_logs, aws_cloudwatch_log_group.broker]
}

resource "aws_cloudwatch_log_group" "broker" {
  name              = "/aws/lambda/${local.broker_function}"
  retention_in_days = 30
}
