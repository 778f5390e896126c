# In a stack that only claims runners: find the pool by name.
data "ec2runners_pool" "ci" {
  name = "ci-runners"
}

output "idle_large_runners" {
  value = data.ec2runners_pool.ci.idle_messages["large"]
}
