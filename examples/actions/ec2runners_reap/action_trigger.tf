# Or from a resource's lifecycle: reap the pool whenever its settings change.
resource "ec2runners_pool" "ci" {
  name = "ci-runners"

  lifecycle {
    action_trigger {
      events  = [after_update]
      actions = [action.ec2runners_reap.ci]
    }
  }
}
