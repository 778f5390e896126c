# The user data of the pool's runners: a short bootstrap that installs the
# agent (the one in the image when it is the provider's version, else the
# release's binary for the instance's architecture, checked against its
# SHA-256) and starts it as a systemd service.
data "ec2runners_runner_script" "agent" {
  pool              = "ci-runners"
  github_owner      = "octo-org"
  github_repository = "app" # omit for organization runners

  # Runs once per instance, as root, after the runner is installed and
  # before the runner serves its first claim. It ends up in the launch
  # template's user data: keep secrets out of it, and keep it short (EC2
  # takes 16 KB of user data; bake bigger installs into the image). Stock
  # Amazon Linux 2023 lacks the ICU library the GitHub runner needs.
  pre_runner_script = <<-EOT
    set -euo pipefail
    dnf install -y libicu git
  EOT

  # Without runner_version the agent installs GitHub's newest runner and
  # keeps it up to date. A pin must be moved by hand: GitHub stops sending
  # jobs to a release about 30 days after the next one.
  # runner_version      = "2.331.0"
  # runner_download_url = "https://mirror.example.com/actions-runner-linux-x64-2.331.0.tar.gz"
  # runner_sha256       = "<SHA-256 of that archive>"

  # A mirror of the agent's release binaries (checked against the
  # release's SHA-256 all the same):
  # agent_download_url = "https://mirror.example.com/ec2runners"
}

# The launch template needs IMDSv2 with instance tags in metadata, and an
# instance profile with the runner policy of the guide "IAM permissions"
# (its own agent partition of the pool's table, stopping or terminating its
# own instance, invoking the broker). Its image decides the runners'
# architecture: x86_64 or arm64.
#
# resource "aws_launch_template" "runner" {
#   user_data = data.ec2runners_runner_script.agent.content_base64
#   metadata_options {
#     http_tokens            = "required"
#     instance_metadata_tags = "enabled"
#   }
#   ...
# }
