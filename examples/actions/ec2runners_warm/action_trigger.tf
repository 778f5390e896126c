# Or from a resource's lifecycle: refill the pool after a claim took from it
# (the next run of the stack then finds its runners warm again).
resource "ec2runners_claim" "build" {
  pool           = "ci-runners"
  instance_count = 4

  lifecycle {
    action_trigger {
      events  = [after_create]
      actions = [action.ec2runners_warm.ci]
    }
  }
}
