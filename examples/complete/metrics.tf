# How the pool serves its claims, in CloudWatch (the provider's metrics
# guide): claims, releases and scans of the pool write embedded metric
# format events into a log stream named after the pool in this log group,
# and CloudWatch turns them into metrics of the namespace below, per pool
# and resource class. The broker may write into the pool's stream only
# (iam.tf). Cost: each metric and dimension value is a custom metric
# ($0.30 a month each in us-east-1, prorated by the hour it is published);
# each claim's events are about 1 KB of log ingestion ($0.50 per GB).

locals {
  metrics_log_group = "/ec2runners/${local.pool}"
  metrics_namespace = "EC2Runners"
}

resource "aws_cloudwatch_log_group" "metrics" {
  name = local.metrics_log_group
  # The events themselves (run ids, the instances that failed their
  # checks), for CloudWatch Logs Insights; CloudWatch keeps the metrics
  # for 15 months whatever this says.
  retention_in_days = 30
}

locals {
  # The dashboard's graphs: one line per resource class (and per source,
  # outcome, state or reason), found by SEARCH, so that new classes appear
  # without an edit here.
  metric_graphs = [
    { title = "Claims (fulfilled, failed)", metric = ["Claims", "ClaimsFailed"], dimensions = "", stat = "Sum", stacked = false, unit = "claims per 5 minutes" },
    { title = "Runners claimed by source (hot, stopped, fleet)", metric = ["RunnersClaimed"], dimensions = ",Source", stat = "Sum", stacked = true, unit = "runners per 5 minutes" },
    { title = "Warm hit rate (runners claimed warm, mean per claim)", metric = ["WarmHitRate"], dimensions = "", stat = "Average", stacked = false, unit = "%" },
    { title = "Time to runner (p50)", metric = ["TimeToRunner"], dimensions = "", stat = "p50", stacked = false, unit = "ms" },
    { title = "Time to runner (p90)", metric = ["TimeToRunner"], dimensions = "", stat = "p90", stacked = false, unit = "ms" },
    { title = "Runners released by outcome (kept hot, kept stopped, idle, terminated)", metric = ["RunnersReleased"], dimensions = ",Outcome", stat = "Sum", stacked = true, unit = "runners per 5 minutes" },
    { title = "Runners by state (idle, stopped, claimed)", metric = ["Runners"], dimensions = ",State", stat = "Maximum", stacked = true, unit = "runners" },
    { title = "Failed checks by reason", metric = ["FailedChecks"], dimensions = ",Reason", stat = "Sum", stacked = true, unit = "runners per 5 minutes" },
  ]
}

resource "aws_cloudwatch_dashboard" "pool" {
  dashboard_name = "ec2runners-${local.pool}"

  dashboard_body = jsonencode({
    widgets = concat(
      [
        for i, g in local.metric_graphs : {
          type   = "metric"
          x      = (i % 2) * 12
          y      = floor(i / 2) * 6
          width  = 12
          height = 6
          properties = {
            title   = g.title
            region  = var.region
            view    = "timeSeries"
            stacked = g.stacked
            period  = 300
            yAxis   = { left = { label = g.unit, showUnits = false, min = 0 } }
            metrics = [
              for j, m in g.metric : [{
                id         = "e${j}"
                expression = "SEARCH('{\"${local.metrics_namespace}\",Pool,Class${g.dimensions}} MetricName=\"${m}\" Pool=\"${local.pool}\"', '${g.stat}', 300)"
              }]
            ]
          }
        }
      ],
      [
        {
          type   = "log"
          x      = 0
          y      = ceil(length(local.metric_graphs) / 2) * 6
          width  = 24
          height = 6
          properties = {
            title  = "Latest claims"
            region = var.region
            view   = "table"
            query  = "SOURCE '${local.metrics_log_group}' | fields @timestamp, Class, RunId, Hot, Stopped, Fleet, TimeToRunner, WarmHitRate | filter ispresent(Claims) | sort @timestamp desc | limit 50"
          }
        },
      ],
    )
  })
}
