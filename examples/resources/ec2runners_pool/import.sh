# A pool is imported by its name.
terraform import ec2runners_pool.ci ci-runners
