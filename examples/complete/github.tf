# The GitHub credential claims and releases mint the runners' registration
# and removal tokens with, kept in this account: the workflows' claims read
# it with the CI role (iam.tf), and no repository holds a GitHub secret.
# A SecureString under the AWS managed key aws/ssm, which the CI role reads
# with ssm:GetParameter alone (a customer managed key also needs
# kms:Decrypt on it). The value is in this stack's state too: keep the
# state encrypted.
resource "aws_ssm_parameter" "github" {
  count = var.github_token != null ? 1 : 0

  name = "/ec2runners/${local.pool}/github"
  type = "SecureString"
  value = jsonencode({
    owner      = var.github_owner
    repository = var.github_repository
    token      = var.github_token
  })

  # Or a GitHub App installed on the owner (recommended for organizations):
  # value = jsonencode({
  #   owner           = var.github_owner
  #   app_id          = 123456
  #   installation_id = 45678901
  #   private_key     = file("${path.root}/github-app.private-key.pem")
  # })
}
