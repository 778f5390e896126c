# A claim is imported as <pool>/<run_id>.
terraform import ec2runners_claim.build ci-runners/run-1234-1
