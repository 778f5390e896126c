#!/usr/bin/env bash
# make release-snapshot: the Terraform Registry's release layout in dist/,
# built by goreleaser (.goreleaser.yml) from the working tree, with
# SHA256SUMS signed by a throwaway RSA key generated for this build. Its
# public half goes to dist/signing-key.asc for the checks in
# internal/testworld/release; the key itself is deleted at the end. Beside it, the
# assets a release uploads with the archives: the agent's binaries and the
# broker's zips, each with its signed SHA256SUMS
# (tools/release-agent-and-broker.sh, goreleaser's before hook), and the
# renamed manifest.
#
# SNAPSHOT_PLATFORMS=all (the default) builds every platform of the
# configuration; host builds only this machine's (what the install test
# needs: make test and CI build that). The agent and the broker are built
# for linux/amd64 and linux/arm64 either way.
set -euo pipefail
cd "$(dirname "$0")/.."

goreleaser=(go tool -modfile=tools/go.mod goreleaser)
config=.goreleaser.yml
case ${SNAPSHOT_PLATFORMS:-all} in
  all) ;;
  host)
    mkdir -p bin
    config=bin/goreleaser-host.yml
    goos=$(go env GOOS) goarch=$(go env GOARCH)
    sed -e "s/^    goos: .*/    goos: [$goos]/" -e "s/^    goarch: .*/    goarch: [$goarch]/" .goreleaser.yml >"$config"
    if ! grep -q "^    goos: \[$goos\]" "$config" || ! grep -q "^    goarch: \[$goarch\]" "$config"; then
      echo "release-snapshot: no one-line goos/goarch in .goreleaser.yml to restrict to $goos/$goarch" >&2
      exit 1
    fi
    ;;
  *)
    echo "release-snapshot: SNAPSHOT_PLATFORMS is all or host, not ${SNAPSHOT_PLATFORMS}" >&2
    exit 2
    ;;
esac

command -v gpg >/dev/null || { echo "release-snapshot signs SHA256SUMS with gpg (apt-get install gnupg)" >&2; exit 1; }
GNUPGHOME=$(mktemp -d "${TMPDIR:-/tmp}/ec2runners-gpg.XXXXXX")
export GNUPGHOME
cleanup() {
  gpgconf --kill gpg-agent 2>/dev/null || true # the agent gpg started for this home
  rm -rf "$GNUPGHOME"
}
trap cleanup EXIT
# RSA: the registry takes only RSA and DSA keys.
gpg --batch --quiet --pinentry-mode loopback --passphrase '' \
  --quick-generate-key 'ec2runners snapshot (throwaway) <snapshot@ec2runners.invalid>' rsa4096 sign never
GPG_FINGERPRINT=$(gpg --batch --with-colons --list-secret-keys | awk -F: '$1 == "fpr" { print $10; exit }')
export GPG_FINGERPRINT

# goreleaser reads the commit only where `git ls-remote --get-url` answers;
# a clone without a remote (a worktree, a copied tree) gets the project's
# URL for this command alone, so that the version names the commit instead
# of "none".
if [ -z "$(git remote)" ]; then
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url \
    GIT_CONFIG_VALUE_0=https://github.com/ec2runners/terraform-provider-ec2runners.git
fi
"${goreleaser[@]}" release --snapshot --clean --config "$config"

# What release.extra_files uploads, which a snapshot publishes nowhere:
# the manifest, as the registry reads it, <name>_<version>_manifest.json
# (SHA256SUMS already lists it), and the files of the agent and the broker.
sums=$(echo dist/terraform-provider-ec2runners_*_SHA256SUMS)
version=${sums#dist/terraform-provider-ec2runners_}
version=${version%_SHA256SUMS}
cp terraform-registry-manifest.json "dist/terraform-provider-ec2runners_${version}_manifest.json"
cp bin/release-agent-and-broker/ec2runners-{agent,broker}_"${version}"_* dist/
gpg --batch --armor --export "$GPG_FINGERPRINT" >dist/signing-key.asc
touch dist/.snapshot-stamp # make test's record that a snapshot of this tree exists

echo "release-snapshot: version $version in dist/:"
(cd dist && ls -1 ./*.zip ./*_SHA256SUMS* ./*_manifest.json ./ec2runners-agent_*_linux_* signing-key.asc)
