# Fills the warm targets of pool ci-runners when invoked:
#   terraform apply -invoke=action.ec2runners_warm.ci
action "ec2runners_warm" "ci" {
  config {
    pool = "ci-runners"
  }
}
