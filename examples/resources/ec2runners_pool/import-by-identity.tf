import {
  to = ec2runners_pool.ci
  identity = {
    name = "ci-runners"
  }
}
