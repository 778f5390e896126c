# The complete claims of pool ci-runners whose record is at least two hours
# old, with `terraform query`; `terraform query -generate-config-out=claims.tf`
# writes the resource and import blocks that adopt them.
list "ec2runners_claim" "stale" {
  provider         = ec2runners
  include_resource = true

  config {
    pool    = "ci-runners"
    state   = "complete"
    min_age = "2h"
  }
}
