#!/usr/bin/env bash
# tools/release-agent-and-broker.sh VERSION: the agent and the broker
# released with the provider, built by goreleaser's before hook
# (.goreleaser.yml), so that make release and make release-snapshot build
# them the same way, with the version goreleaser gives the provider. Into
# bin/release-agent-and-broker/ (goreleaser --clean empties dist/ after the
# hook, and a hook may not write there):
#
#   ec2runners-agent_<version>_linux_amd64, ..._arm64
#       the binaries the user data downloads (agentscript.AssetName).
#   ec2runners-agent_<version>_SHA256SUMS and its detached signature .sig
#   agent-digests
#       amd64=<sha256>,arm64=<sha256>: what every provider binary embeds
#       (-X .../internal/agentscript.builtDigests, read with mustReadFile).
#   ec2runners-broker_<version>_linux_amd64.zip, ..._arm64.zip
#       the pool's broker as Lambda's provided.al2023 runtime takes it: a zip
#       holding one executable, bootstrap (examples/complete/broker.tf).
#   ec2runners-broker_<version>_SHA256SUMS and its detached signature .sig
#
# Both programs are built as the provider is: CGO_ENABLED=0, -trimpath,
# -s -w, the version in main.version; for linux/amd64 and linux/arm64
# whatever the provider is built for. Each has a SHA256SUMS of its own,
# signed with gpg by the key GPG_FINGERPRINT names (as goreleaser signs the
# provider's), named for what it lists: those who bake the agent into an
# image check the agent's, those who deploy a pool's broker the broker's
# (examples/complete/README.md). Neither is in the provider's SHA256SUMS,
# which the Terraform Registry rejects when it lists anything but the
# archives and the manifest.
#
# release.extra_files uploads all but agent-digests with the release;
# tools/release-snapshot.sh copies them into dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:?usage: tools/release-agent-and-broker.sh VERSION}
: "${GPG_FINGERPRINT:?release-agent-and-broker: set GPG_FINGERPRINT to the key that signs the SHA256SUMS of the agent and the broker}"
command -v zip >/dev/null || { echo "release-agent-and-broker: packages the broker with zip (apt-get install zip)" >&2; exit 1; }
out=bin/release-agent-and-broker
rm -rf "$out"
mkdir -p "$out"
architectures=(amd64 arm64)

# build_linux ARCH PACKAGE OUTPUT: PACKAGE's command for linux/ARCH.
build_linux() {
  CGO_ENABLED=0 GOOS=linux GOARCH=$1 go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$3" "$2"
}

# sign_sums NAME FILE...: NAME lists the SHA-256 of the files in $out, and
# NAME.sig is its detached signature.
sign_sums() {
  local sums=$1
  shift
  (cd "$out" && sha256sum "$@" >"$sums")
  gpg --batch --local-user "$GPG_FINGERPRINT" --output "$out/$sums.sig" --detach-sign "$out/$sums"
}

agents=() digests=()
for arch in "${architectures[@]}"; do
  agent=ec2runners-agent_${version}_linux_$arch
  build_linux "$arch" ./internal/agent/cmd/ec2runners-agent "$out/$agent"
  agents+=("$agent")
  digests+=("$arch=$(sha256sum "$out/$agent" | cut -d' ' -f1)")
done
sign_sums "ec2runners-agent_${version}_SHA256SUMS" "${agents[@]}"
(IFS=,; echo "${digests[*]}") >"$out/agent-digests"

# The same commit makes the same zip: zip -X leaves out the owner and the
# extended timestamps, and the one timestamp it keeps (a DOS time, in local
# time) is fixed, in UTC. The mode, 0755, is set here, not left to the umask.
brokers=()
for arch in "${architectures[@]}"; do
  broker=ec2runners-broker_${version}_linux_$arch.zip
  staging=$out/staging-broker-$arch
  mkdir "$staging"
  build_linux "$arch" ./internal/broker/cmd/ec2runners-broker "$staging/bootstrap"
  chmod 0755 "$staging/bootstrap"
  TZ=UTC touch -t 198001010000 "$staging/bootstrap"
  (cd "$staging" && TZ=UTC zip -q -X "../$broker" bootstrap)
  rm -r "$staging"
  brokers+=("$broker")
done
sign_sums "ec2runners-broker_${version}_SHA256SUMS" "${brokers[@]}"
