# The runners of pool ci-runners: idle, stopped, or claimed by a run.
data "ec2runners_runners" "ci" {
  pool = "ci-runners"
}

output "idle_runners" {
  value = [for r in data.ec2runners_runners.ci.runners : "${r.id} (${r.resource_class}, ${r.age} old)" if r.state == "idle"]
}

output "claimed_runners" {
  value = { for r in data.ec2runners_runners.ci.runners : r.id => r.run_id if r.state == "claimed" }
}
