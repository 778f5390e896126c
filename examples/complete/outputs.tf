output "pool_name" {
  description = "Name of the pool, for the claims' `pool` (EC2RUNNERS_POOL in workflow.yml)."
  value       = ec2runners_pool.this.name
}

output "broker_function_name" {
  description = "The broker's Lambda function, which claims go through (EC2RUNNERS_BROKER_FUNCTION in workflow.yml)."
  value       = aws_lambda_function.broker.function_name
}

output "ci_role_arn" {
  description = "Role the CI workflow assumes with GitHub OIDC to claim runners through the broker (role-to-assume in workflow.yml); it may only invoke the broker."
  value       = aws_iam_role.ci.arn
}

output "plan_role_arn" {
  description = "Role this stack's pull requests assume with GitHub OIDC to plan it; it only reads. Null without plan_oidc_subjects."
  value       = one(aws_iam_role.plan[*].arn)
}

output "runner_role_arn" {
  description = "Role of the runner instances."
  value       = aws_iam_role.runner.arn
}

output "launch_template_id" {
  description = "Launch template of the runners."
  value       = aws_launch_template.runner.id
}

output "launch_template_version" {
  description = "Launch template version the pool launches."
  value       = ec2runners_pool.this.fleet.launch_template_version
}

output "ami_id" {
  description = "AMI of the runners."
  value       = local.ami_id
}

output "table_arn" {
  description = "ARN of the pool's DynamoDB table."
  value       = ec2runners_pool.this.table_arn
}

output "queue_urls" {
  description = "URL of each resource class's SQS queue."
  value       = ec2runners_pool.this.queue_urls
}

output "dashboard_name" {
  description = "CloudWatch dashboard of the pool's metrics, per resource class."
  value       = aws_cloudwatch_dashboard.pool.dashboard_name
}
