# The agent of the pool's runners, as the launch template's user data.
data "ec2runners_runner_script" "agent" {
  pool              = "ci-runners"
  github_owner      = "octo-org"
  github_repository = "app" # omit for organization runners

  # Runs once per instance, as root, before the runner serves its first claim.
  # It ends up in the launch template's user data: keep secrets out of it.
  pre_runner_script = <<-EOT
    dnf install -y git docker
    systemctl enable --now docker
    usermod -aG docker runner
  EOT

  # A mirror of the runner tarball, and the SHA-256 it must have:
  # runner_download_url = "https://mirror.example.com/actions-runner-linux-x64-2.329.0.tar.gz"
  # runner_sha256       = "<sha256sum of the tarball>"
}

# The launch template needs IMDSv2 with instance tags in metadata, and an
# instance profile that may read and write the pool's table and terminate
# its own instance (see examples/complete/iam.tf).
#
# resource "aws_launch_template" "runner" {
#   user_data = data.ec2runners_runner_script.agent.content_base64
#   metadata_options {
#     http_tokens            = "required"
#     instance_metadata_tags = "enabled"
#   }
#   ...
# }
