#!/usr/bin/env bash
# make demo: the provider end to end on the local AWS emulator.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/examples/demo/emulator.sh"
export CHECKPOINT_DISABLE=1 GOFLAGS=-buildvcs=false

work=$(mktemp -d -t ec2runners-demo.XXXXXX)
cleanup() { stop_emulator; rm -rf "$work"; }
trap cleanup EXIT

step() { printf '\n==> %s\n' "$*"; }

step "Starting the AWS emulator"
start_emulator

step "Building the provider"
go build -C "$root" -o "$work/bin/terraform-provider-ec2runners" .
cat >"$work/terraformrc" <<RC
provider_installation {
  dev_overrides {
    "registry.terraform.io/ec2runners/ec2runners" = "$work/bin"
  }
  direct {}
}
RC
export TF_CLI_CONFIG_FILE="$work/terraformrc"
cp "$root/examples/demo/"*.tf "$work/"
tf() { terraform -chdir="$work" "$@" 2> >(grep -v -e 'Provider development overrides are in effect' >&2); }

step "terraform apply: create the pool"
tf apply -auto-approve -input=false -no-color | grep -E '^(ec2runners_|Apply complete|data\.)' || true

step "Pool outputs"
tf output -no-color

step "terraform destroy"
tf destroy -auto-approve -input=false -no-color | grep -E '^(ec2runners_|Destroy complete)' || true
