# The pool, the runners' launch template and the IAM roles: apply once, and
# again on changes (a new AMI, another runner version).
include "root" {
  path   = find_in_parent_folders("root.hcl")
  expose = true
}

terraform {
  # In your repository: wherever you keep the module, e.g.
  # "git::https://github.com/acme/infra.git//modules/runners?ref=v1.2.0".
  source = "${get_terragrunt_dir()}/../.."
}

inputs = {
  region                   = include.root.locals.region
  pool_name                = "ci-runners"
  subnet_ids               = ["subnet-0a1b2c3d4e5f60718", "subnet-0b2c3d4e5f6071829"]
  security_group_ids       = ["sg-0c3d4e5f60718293a"]
  github_owner             = "acme"
  github_oidc_provider_arn = "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"
  state_bucket             = include.root.locals.state_bucket
  tags                     = include.root.locals.default_tags

  # Who may claim through the broker, and the release's broker package.
  claim_repositories = [
    { repository = "acme/app", max_runners = 10 },
    { repository = "acme/web", workflows = ["acme/web/.github/workflows/ci.yml@refs/heads/*"], resource_classes = ["large"] },
  ]
  broker_zip = "${get_terragrunt_dir()}/ec2runners-broker_0.1.0_linux_arm64.zip"

  # This repository's pull requests' plans.
  plan_oidc_subjects = ["repo:acme/platform:pull_request"]

  # github_token: export TF_VAR_github_token instead of writing it here.
}
