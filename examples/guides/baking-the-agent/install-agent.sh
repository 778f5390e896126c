#!/usr/bin/env bash
# Run as root on Packer's build instance (runner.pkr.hcl): bakes the
# ec2runners agent AGENT_VERSION for ARCH (amd64 or arm64) into the image,
# checked against the release's SHA256SUMS, and that file's signature when
# SIGNING_KEY holds the provider's public key (base64 of its ASCII armor);
# then installs what the agent, the runner and your jobs need.
set -euo pipefail
: "${AGENT_VERSION:?}" "${ARCH:?}"

release=https://github.com/ec2runners/terraform-provider-ec2runners/releases/download/v$AGENT_VERSION
binary=ec2runners-agent_${AGENT_VERSION}_linux_$ARCH
sums=ec2runners-agent_${AGENT_VERSION}_SHA256SUMS

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
curl -fsSL --retry 5 -O "$release/$binary" -O "$release/$sums"
if [ -n "${SIGNING_KEY:-}" ]; then
  export GNUPGHOME=$work/gnupg
  mkdir -m 0700 "$GNUPGHOME"
  base64 -d <<<"$SIGNING_KEY" | gpg --batch --quiet --import
  curl -fsSL --retry 5 -O "$release/$sums.sig"
  gpg --batch --verify "$sums.sig" "$sums"
fi
# The binary's line of SHA256SUMS, "<sha256>  <file>": sha256sum checks it.
awk -v file="$binary" '$2 == file' "$sums" | sha256sum --check --strict
install -m 0711 -o root -g root "$binary" /usr/local/sbin/ec2runners-agent
test "$(/usr/local/sbin/ec2runners-agent version)" = "$AGENT_VERSION"

# nftables for the agent's metadata firewall (without it the agent installs
# it at every instance's first boot), libicu for the GitHub runner; then
# what your jobs need.
dnf install -y --setopt=install_weak_deps=False nftables libicu git
dnf clean all
