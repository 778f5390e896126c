# Credentials and region come from the AWS SDK's default chain, e.g. the
# GitHub OIDC role assumed by aws-actions/configure-aws-credentials.
provider "ec2runners" {
  region = "eu-west-1"

  default_tags {
    tags = {
      ManagedBy = "terraform"
    }
  }

  # For pools with a github_owner: each claim mints a registration token
  # and each release a removal token for its runners, only for pools of
  # this owner (default: GITHUB_REPOSITORY_OWNER). A token (or
  # GITHUB_TOKEN), or a GitHub App.
  github {
    app_id          = 123456
    installation_id = 45678901
    private_key     = file("github-app.pem")
    owner           = "octo-org"
  }
}

# Against LocalStack (or any emulator on port 4566):
provider "ec2runners" {
  alias      = "local"
  region     = "us-east-1"
  access_key = "test"
  secret_key = "test"

  endpoints {
    sqs      = "http://localhost:4566"
    dynamodb = "http://localhost:4566"
    ec2      = "http://localhost:4566"
    sts      = "http://localhost:4566"
  }
}
