# The GitHub credential the broker mints the runners' registration and
# removal tokens with, kept in this account: the broker reads it (iam.tf),
# no workflow can, and no repository holds a GitHub secret. The value is in this stack's state too: keep the state encrypted,
# and readable only by whoever applies or plans this stack.
resource "aws_ssm_parameter" "github" {
  count = var.github_token != null ? 1 : 0

  name   = "/ec2runners/${local.pool}/github"
  type   = "SecureString"
  key_id = aws_kms_key.github[0].arn
  value = jsonencode({
    owner = var.github_owner
    token = var.github_token
  })

  # Or a GitHub App installed on the claim repositories (recommended for
  # organizations):
  # value = jsonencode({
  #   owner           = var.github_owner
  #   app_id          = 123456
  #   installation_id = 45678901
  #   private_key     = file("${path.root}/github-app.private-key.pem")
  # })
}

# The parameter's own key. Under the AWS managed key aws/ssm, every principal
# of the account that may read the parameter may decrypt it; under this key,
# only those IAM also gives kms:Decrypt on it: the broker's role, through
# SSM and for this parameter only (iam.tf). The key's default policy lets
# the account's IAM policies decide.
resource "aws_kms_key" "github" {
  count = var.github_token != null ? 1 : 0

  description             = "The GitHub credential of the ec2runners pool ${local.pool}"
  enable_key_rotation     = true
  deletion_window_in_days = 7
}
