#!/usr/bin/env bash
# tools/release-agents.sh VERSION: the agent released with the provider,
# built by goreleaser's before hook (.goreleaser.yml), so that make release
# and make release-snapshot build it the same way, with the version
# goreleaser gives the provider. Into bin/release-agents/ (goreleaser
# --clean empties dist/ after the hook, and a hook may not write there):
#
#   ec2runners-agent_<version>_linux_amd64, ..._arm64
#       the binaries the user data downloads (agentscript.AssetName), built
#       as the provider is: CGO_ENABLED=0, -trimpath, -s -w, the version in
#       main.version. Both architectures whatever the provider is built for.
#   ec2runners-agent_<version>_SHA256SUMS and its detached signature .sig
#       (gpg, the key GPG_FINGERPRINT names, as goreleaser signs the
#       provider's SHA256SUMS). Separate from the provider's SHA256SUMS,
#       which the Terraform Registry rejects when it lists anything but the
#       archives and the manifest.
#   digests
#       amd64=<sha256>,arm64=<sha256>: what every provider binary embeds
#       (-X .../internal/agentscript.builtDigests, read with mustReadFile).
#
# release.extra_files uploads the first four with the release;
# tools/release-snapshot.sh copies them into dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:?usage: tools/release-agents.sh VERSION}
: "${GPG_FINGERPRINT:?release-agents: set GPG_FINGERPRINT to the key that signs the agents SHA256SUMS}"
out=bin/release-agents
rm -rf "$out"
mkdir -p "$out"

digests=()
for arch in amd64 arm64; do
  binary=ec2runners-agent_${version}_linux_$arch
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X main.version=$version" \
    -o "$out/$binary" ./internal/agent/cmd/ec2runners-agent
  digests+=("$arch=$(sha256sum "$out/$binary" | cut -d' ' -f1)")
done

sums=ec2runners-agent_${version}_SHA256SUMS
(cd "$out" && sha256sum ec2runners-agent_"${version}"_linux_* >"$sums")
gpg --batch --local-user "$GPG_FINGERPRINT" --output "$out/$sums.sig" --detach-sign "$out/$sums"
(IFS=,; echo "${digests[*]}") >"$out/digests"
