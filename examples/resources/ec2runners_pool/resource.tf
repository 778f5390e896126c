resource "ec2runners_pool" "ci" {
  name = "ci-runners"

  # Optional: the default is seven classes from large (2 vCPU) to 16xlarge (64 vCPU).
  resource_classes = {
    large     = { cpu = 2, memory_mib = 4096 }
    xlarge    = { cpu = 4, memory_mib = 8192 }
    "2xlarge" = { cpu = 8, memory_mib = 16384 }
  }

  # Where the runners register; claims and releases mint their tokens with
  # the provider's github credentials, whose owner must match, or else with
  # the credential the pool keeps in an SSM SecureString (JSON: owner, and
  # token or app_id, installation_id and private_key).
  github_owner      = "octo-org"
  github_repository = "app"
  github_credential = { ssm_parameter = "/ec2runners/ci-runners/github" }

  idle_timeout = "10m"
  max_runtime  = "45m"

  # Launch missing capacity with EC2 CreateFleet.
  fleet = {
    launch_template_name = "github-runner"
    subnet_ids           = ["subnet-0a1b2c3d", "subnet-4e5f6a7b", "subnet-8c9d0e1f"]
  }

  # Retire runners launched more than three days ago.
  max_runner_age = "72h"

  # Warm large runners: 4 hot on weekdays during office hours in Berlin, 1
  # otherwise, and 6 stopped around the clock (on-demand, EBS only; a claim
  # starts them). The apply launches what lacks; the plan shows warm_status.
  warm = {
    large = {
      hot     = 1
      stopped = 6
      schedule = [{
        days      = ["mon", "tue", "wed", "thu", "fri"]
        from      = "08:00"
        to        = "19:00"
        time_zone = "Europe/Berlin"
        hot       = 4
      }]
    }
  }

  # Publish how the pool serves its claims to CloudWatch (the metrics
  # guide), into an existing log group.
  metrics = {
    log_group = "/ec2runners/ci-runners"
  }

  # Who may claim through the pool's broker, and how much: the app's CI
  # workflow on main, and any workflow of the docs. Claims made with direct
  # AWS access are not checked: give workflows only the right to invoke
  # the broker.
  access = [
    {
      repository       = "octo-org/app"
      workflows        = ["octo-org/app/.github/workflows/ci.yml@refs/heads/main"]
      max_runners      = 10
      resource_classes = ["large", "xlarge"]
    },
    { repository = "octo-org/docs", max_runners = 2, max_runtime = "15m" },
  ]

  tags = {
    Team = "platform"
  }
}
