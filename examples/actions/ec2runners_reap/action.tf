# Reaps pool ci-runners when invoked:
#   terraform apply -invoke=action.ec2runners_reap.ci
action "ec2runners_reap" "ci" {
  config {
    pool = "ci-runners"
  }
}
