# One workflow run's claim, applied by the run's claim job and destroyed by
# its release job (-auto-approve: CI has no terminal to answer a prompt):
#   CLAIM_RUN_ID="$GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT" terragrunt apply -auto-approve
#   CLAIM_RUN_ID="$GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT" terragrunt destroy -auto-approve
# in a workflow of the pool's own repository: its role invokes the broker,
# as the CI role does (EC2RUNNERS_BROKER_FUNCTION), and also uses the state
# bucket (this unit's state, and the pool unit's outputs), which the CI role
# may not: the pool unit's state holds the GitHub credential. Workflows of
# other repositories claim with the actions, which need no state.
include "root" {
  path   = find_in_parent_folders("root.hcl")
  expose = true
}

locals {
  # Outside a workflow run (plan, validate, run --all): "local".
  run_id = get_env("CLAIM_RUN_ID", "local")
}

terraform {
  source = "${get_terragrunt_dir()}/../../claim"
}

# One working directory per run: each initializes its own run's backend (a
# second run id in the same checkout would otherwise find the first run's
# backend configuration), and runs at once never share one.
download_dir = "${get_terragrunt_dir()}/.terragrunt-cache/${local.run_id}"

# One state per run: concurrent runs never share (or lock) one state, and
# the release job finds the claim job's. Replaces the root's remote_state.
remote_state {
  backend = "s3"
  # The pool unit has created the bucket; the claims' role needs only the
  # objects under ec2runners/claims/, not the bucket's settings.
  disable_init = true

  generate = {
    path      = "backend.tf"
    if_exists = "overwrite_terragrunt"
  }

  config = merge(include.root.locals.state_config, {
    key = "ec2runners/claims/${local.run_id}/terraform.tfstate"
  })
}

dependency "pool" {
  config_path = "../pool"

  # Until the pool is applied, plan and validate use this name; and so does
  # destroy once the pool has no outputs: a `run --all destroy` that failed
  # at the pool (runners still warm) has removed them, and its retry must
  # not fail here.
  mock_outputs = {
    pool_name = "ci-runners"
  }
  mock_outputs_allowed_terraform_commands = ["init", "validate", "plan", "destroy"]
}

inputs = {
  pool           = dependency.pool.outputs.pool_name
  run_id         = local.run_id
  instance_count = 2
  resource_class = "large"
}
