import {
  to = ec2runners_claim.build
  identity = {
    pool   = "ci-runners"
    run_id = "run-1234-1"
  }
}
