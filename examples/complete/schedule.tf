# The pool's maintenance, every 5 minutes: the broker (broker.tf) reaps
# the pool (runners past their deadline, instances without a record, the
# claims of runs that ended without releasing them, re-runs waiting for a
# released claim's label) and then fills the warm targets in force, as the
# ec2runners_reap and ec2runners_warm actions do. Claims and releases reap
# along the way, at most once a minute, but leave the ended runs, the
# re-runs and the hot tier to it. The invocation carries no token: the
# broker does only what the pool's config and records say is due, and
# nothing while another maintenance runs or within a minute of the last
# one, whoever asks. What it did is in the function's log group.
#
# Every 5 minutes: an ended run's runners come back, and a re-run gets its
# runners, within 5 minutes; a schedule window's hot runners are launched
# within 5 minutes of its opening (open it that much and a boot's time
# before the runs it is for); a claim whose job still runs near its
# deadline gets two chances to be held longer (docs/guides/protocol.md).
# More often costs more GitHub API requests (one per claim older than 5
# minutes, each time) for little.
resource "aws_scheduler_schedule" "maintenance" {
  name        = "${local.broker_function}-maintenance"
  description = "Maintains the ec2runners pool ${local.pool}: reaps it, then fills its warm targets"

  schedule_expression = "rate(5 minutes)"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = aws_lambda_function.broker.arn
    role_arn = aws_iam_role.scheduler.arn
    input    = jsonencode({ operation = "maintain" })

    # A maintenance not delivered within its 5 minutes is dropped: the next
    # one is due by then.
    retry_policy {
      maximum_event_age_in_seconds = 300
    }
  }

  depends_on = [aws_iam_role_policy.scheduler]
}

# The schedule invokes the function asynchronously, through Lambda's queue
# (claims, releases and the agents invoke it synchronously, which this does
# not apply to). A maintenance that waited there past its 5 minutes
# (throttled: claims use the reserved concurrency) or failed is dropped,
# not retried: the next one does the same work.
resource "aws_lambda_function_event_invoke_config" "broker" {
  function_name                = aws_lambda_function.broker.function_name
  maximum_event_age_in_seconds = 300
  maximum_retry_attempts       = 0
}
