#!/usr/bin/env bash
# The steps of the claim and release actions (.github/actions/claim and
# .github/actions/release), which run Terraform (or OpenTofu) with
# ec2runners_claim: the provider stays the one implementation.
#
#   ec2runners.sh prepare claim|release  can this run claim (credentials, forks)?
#                                        what to install and cache
#   ec2runners.sh cli                    put the CLI on PATH from the cache, else
#                                        download and check it into the cache
#   ec2runners.sh claim                  apply the run's claim; its label for runs-on
#   ec2runners.sh release                adopt the run's claims by identity and destroy them
#
# Settings come from the environment, as the actions' steps set them from
# their inputs (EC2RUNNERS_*), and from what GitHub sets in every job
# (GITHUB_*, RUNNER_*). Step outputs go to $GITHUB_OUTPUT.
set -euo pipefail

die() {
  echo "::error title=ec2runners::$*" >&2
  exit 1
}
notice() { echo "::notice title=ec2runners::$*"; }
output() { echo "$1=$2" >>"${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set: run as a step of the action}"; }
summary() { if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then echo "$*" >>"$GITHUB_STEP_SUMMARY"; fi; }

POOL=${EC2RUNNERS_POOL:-}
# The pool's broker (the broker-function input): the provider makes the
# claim, its reads and its release through it, with the job's OIDC token.
BROKER=${EC2RUNNERS_BROKER_FUNCTION:-}
CLI=${EC2RUNNERS_CLI:-terraform}
CACHE_DIR=${EC2RUNNERS_CACHE_DIR:-${HOME:-/tmp}/.cache/ec2runners}
# The CLI's release files, in a cache of their own: they change with the
# CLI's version, the providers with theirs.
CLI_CACHE_DIR=${CACHE_DIR%/}-cli
# The CLI versions installed when cli-version is empty and the CLI is not on
# PATH. Terraform: the newest that the provider's tests run with
# (.github/workflows/test.yml). OpenTofu: a release of the 1.10 series.
DEFAULT_TERRAFORM_VERSION=1.15.9
DEFAULT_TOFU_VERSION=1.10.6
RUN_ID_PATTERN='^[a-z0-9][a-z0-9_.-]{0,99}$'
# A new claim's run id leaves room in its label for '-' and the random part.
MAX_NEW_RUN_ID_LENGTH=86

# The claim's run id, which begins its label: the workflow run and its attempt
# (each attempt claims anew, see the re-runs section of the adoption guide),
# and the action's name input when a workflow has several claim jobs.
default_run_id() {
  local attempt=${1:-${GITHUB_RUN_ATTEMPT:-1}} id name
  id="${GITHUB_RUN_ID:?GITHUB_RUN_ID is not set}-$attempt"
  name=$(printf '%s' "${EC2RUNNERS_NAME:-}" | tr '[:upper:]' '[:lower:]')
  if [ -n "$name" ]; then
    [[ $name =~ ^[a-z0-9][a-z0-9_.-]*$ ]] || die "name '$EC2RUNNERS_NAME': use letters, digits, '_', '.' and '-' (it becomes part of the runners' label)"
    id="$id-$name"
  fi
  printf '%s' "$id"
}

# A pull request from a fork: GitHub gives such runs no secrets and no OIDC
# token. Prints why, or nothing. (Runs Dependabot triggers get Dependabot
# secrets and the permissions the workflow grants, an OIDC token included.)
secretless_event() {
  local event=${GITHUB_EVENT_NAME:-} head=${EC2RUNNERS_PR_HEAD_REPO:-}
  if [[ $event == pull_request* && $event != pull_request_target && -n $head && $head != "${GITHUB_REPOSITORY:-}" ]]; then
    echo "a pull request from the fork $head"
  fi
}

# The provider version: the provider-version input; else, for an action
# pinned to a release tag vX.Y.Z, that release (a tag of the provider is a
# tag of the actions); for one pinned to a commit, the release that
# provider-version beside this script names (make release checks that a
# tagged commit names its tag's); on a branch, none: the newest.
provider_version() {
  local ref=${EC2RUNNERS_ACTION_REF:-} path
  if [ -n "${EC2RUNNERS_PROVIDER_VERSION:-}" ]; then
    printf '%s' "$EC2RUNNERS_PROVIDER_VERSION"
    return
  fi
  if [ -z "$ref" ] && [ -n "${GITHUB_ACTION_PATH:-}" ]; then
    # <runner>/_actions/<owner>/<repo>/<ref>/.github/actions/<action>
    path=${GITHUB_ACTION_PATH%/.github/actions/*}
    ref=${path##*/}
  fi
  if [[ $ref =~ ^v([0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?)$ ]]; then
    printf '%s' "${BASH_REMATCH[1]}"
  elif [[ $ref =~ ^[0-9a-f]{40}$ ]]; then
    tr -d '[:space:]' <"$(dirname "${BASH_SOURCE[0]}")/provider-version"
  fi
}

cmd_prepare() {
  local mode=${1:-} why oidc_use version key region cli_version platform
  [ "$mode" = claim ] || [ "$mode" = release ] || die "usage: ec2runners.sh prepare claim|release"
  [ -n "$POOL" ] || die "the pool input is empty: set it to the pool's name (for example a repository or organization variable, vars.EC2RUNNERS_POOL)"
  output attempt "${GITHUB_RUN_ATTEMPT:-1}"

  why=$(secretless_event)
  oidc_use="" # what needs the job's OIDC token
  if [ -n "$BROKER" ]; then
    oidc_use="the pool's broker $BROKER checks it"
  elif [ -n "${EC2RUNNERS_ROLE_TO_ASSUME:-}" ]; then
    oidc_use="it assumes ${EC2RUNNERS_ROLE_TO_ASSUME} with it"
  fi
  # Credentials after all: an OIDC token, or keys the workflow set when
  # nothing needs the token.
  if [ -n "$why" ] && { [ -n "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ] || { [ -z "$oidc_use" ] && [ -n "${AWS_ACCESS_KEY_ID:-}" ]; }; }; then
    why=""
  fi
  if [ -z "$why" ] && [ -n "$oidc_use" ] && [ -z "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ]; then
    die "GitHub gave this job no OIDC token, and $oidc_use: give the job 'permissions: id-token: write'"
  fi
  if [ -n "$why" ]; then
    output proceed false
    if [ "$mode" = release ]; then
      notice "nothing to release: this is $why, which gets no secrets and no OIDC token, so it claimed no runners"
      return
    fi
    if [ -z "${EC2RUNNERS_FALLBACK_RUNS_ON:-}" ]; then
      die "this is $why: GitHub gives it no secrets and no OIDC token, so it cannot claim runners from pool $POOL. Set the claim action's fallback-runs-on input (for example ubuntu-latest) to run its jobs there, or skip these jobs for such runs."
    fi
    notice "this is $why, which gets no secrets and no OIDC token: its jobs run on ${EC2RUNNERS_FALLBACK_RUNS_ON} (fallback-runs-on), not on runners of pool $POOL"
    output runs-on "$EC2RUNNERS_FALLBACK_RUNS_ON"
    output claimed false
    output instance-ids "[]"
    return
  fi

  case "$CLI" in
  terraform | tofu) ;;
  *) die "cli '$CLI': use terraform or tofu" ;;
  esac
  version=$(provider_version)
  if [ -z "$version" ]; then
    notice "the newest ec2runners provider is used: pin the action to a release tag (vX.Y.Z) or to a commit, or set provider-version, for the provider of that release"
  fi
  region=${EC2RUNNERS_AWS_REGION:-${AWS_REGION:-}}
  if [ -n "${EC2RUNNERS_ROLE_TO_ASSUME:-}" ] && [ -z "$region" ]; then
    die "role-to-assume needs the pool's region: set the aws-region input (or AWS_REGION)"
  fi
  # The providers and the lock file that selects them, cached per provider
  # version: init downloads nothing once the cache is saved. Without a
  # pinned version the cache is renewed monthly.
  key="ec2runners-${RUNNER_OS:-$(uname -s)}-${RUNNER_ARCH:-$(uname -m)}-$CLI-${version:-newest-$(date -u +%Y-%m)}"
  output proceed true
  output aws-region "$region"
  output cache-dir "$CACHE_DIR"
  output cache-key "${key//[^A-Za-z0-9._-]/_}"
  # The CLI: the one on PATH when it is of cli-version (or cli-version is
  # empty), else the cli step installs that version from its own cache.
  cli_version=${EC2RUNNERS_CLI_VERSION:-}
  if [ -z "$cli_version" ] && command -v "$CLI" >/dev/null; then
    return
  fi
  if [ -z "$cli_version" ]; then
    cli_version=$(default_cli_version)
  fi
  [[ $cli_version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] ||
    die "cli-version '$cli_version': give an exact version, such as $(default_cli_version) (the cache is keyed on it)"
  if [ "$(path_cli_version)" = "$cli_version" ]; then
    return
  fi
  platform=$(cli_platform)
  output cli-version "$cli_version"
  output cli-dir "$CLI_CACHE_DIR/${CLI}_${cli_version}_$platform"
  output cli-cache-key "ec2runners-cli-${CLI}_${cli_version}_$platform"
}

default_cli_version() {
  case "$CLI" in
  terraform) printf '%s' "$DEFAULT_TERRAFORM_VERSION" ;;
  tofu) printf '%s' "$DEFAULT_TOFU_VERSION" ;;
  esac
}

# path_cli_version prints the version of the CLI on PATH ("Terraform v1.15.9"
# or "OpenTofu v1.10.6" begins `version`'s output), or nothing.
path_cli_version() {
  local out
  command -v "$CLI" >/dev/null || return 0
  out=$(CHECKPOINT_DISABLE=1 "$CLI" version 2>/dev/null) || return 0
  if [[ ${out%%$'\n'*} =~ \ v([0-9][0-9A-Za-z.-]*)$ ]]; then
    printf '%s' "${BASH_REMATCH[1]}"
  fi
}

# cli_platform names the runner's OS and architecture as the release files
# do: linux_amd64, darwin_arm64.
cli_platform() {
  local os arch
  case "${RUNNER_OS:-$(uname -s)}" in
  Linux) os=linux ;;
  macOS | Darwin) os=darwin ;;
  *) die "the actions install $CLI on Linux and macOS only: put $CLI on the runner's PATH" ;;
  esac
  case "${RUNNER_ARCH:-$(uname -m)}" in
  X64 | x86_64 | amd64) arch=amd64 ;;
  ARM64 | arm64 | aarch64) arch=arm64 ;;
  *) die "the actions install $CLI on x64 and arm64 only: put $CLI on the runner's PATH" ;;
  esac
  printf '%s_%s' "$os" "$arch"
}

# cmd_cli puts the CLI of version EC2RUNNERS_CLI_VERSION on PATH for the
# steps after it. Its release files (the zip, SHA256SUMS and, for Terraform,
# HashiCorp's signature of SHA256SUMS) are kept in EC2RUNNERS_CLI_DIR, which
# actions/cache restores and saves. They are checked every time, restored or
# downloaded, so a cache entry cannot bring in another binary.
# EC2RUNNERS_TERRAFORM_RELEASES_URL (default https://releases.hashicorp.com)
# and EC2RUNNERS_TOFU_RELEASES_URL (default OpenTofu's GitHub releases) name
# a mirror of the same layout.
cmd_cli() {
  local version=${EC2RUNNERS_CLI_VERSION:?EC2RUNNERS_CLI_VERSION is not set} dir=${EC2RUNNERS_CLI_DIR:?EC2RUNNERS_CLI_DIR is not set}
  local platform url zip sums sig="" why bin
  platform=$(cli_platform)
  zip="${CLI}_${version}_$platform.zip"
  sums="${CLI}_${version}_SHA256SUMS"
  case "$CLI" in
  terraform)
    url="${EC2RUNNERS_TERRAFORM_RELEASES_URL:-https://releases.hashicorp.com}/terraform/$version"
    # Named by the ID of the key that signs every release since 2021.
    sig="$sums.72D7468F.sig"
    ;;
  tofu) url="${EC2RUNNERS_TOFU_RELEASES_URL:-https://github.com/opentofu/opentofu/releases/download}/v$version" ;;
  *) die "cli '$CLI': use terraform or tofu" ;;
  esac
  if [ -n "$sig" ] && ! { command -v gpg && command -v gpgv; } >/dev/null; then
    die "GnuPG (gpg and gpgv) is needed to check $CLI's signature: install it on the runner, or put $CLI $version on its PATH"
  fi
  if [ -f "$dir/$zip" ] && why=$(check_release "$dir" "$zip" "$sums" "$sig"); then
    echo "$CLI $version: from the cache ($dir)"
  else
    if [ -f "$dir/$zip" ]; then
      notice "the cached $CLI $version failed its check ($why): downloading it again"
    fi
    forget_release "$dir" "$zip" "$sums" "$sig"
    mkdir -p "$dir"
    download "$url/$sums" "$dir/$sums" ||
      die "$CLI $version: no $sums at $url: is $version a release of $CLI? (cli-version)"
    grep -q " $zip\$" "$dir/$sums" || die "$CLI $version has no build for $platform"
    if [ -n "$sig" ]; then
      download "$url/$sig" "$dir/$sig" || die "$CLI $version: cannot download $url/$sig"
    fi
    download "$url/$zip" "$dir/$zip" || die "$CLI $version: cannot download $url/$zip"
    if ! why=$(check_release "$dir" "$zip" "$sums" "$sig"); then
      forget_release "$dir" "$zip" "$sums" "$sig" # not for actions/cache to save
      die "$CLI $version from $url refused: $why"
    fi
    echo "$CLI $version: downloaded from $url and checked; the cache keeps it"
  fi
  bin="${RUNNER_TEMP:-/tmp}/ec2runners/bin"
  mkdir -p "$bin"
  unzip -o -q "$dir/$zip" "$CLI" -d "$bin" || die "cannot unpack $CLI from $dir/$zip"
  echo "$bin" >>"${GITHUB_PATH:?GITHUB_PATH is not set: run as a step of the action}"
}

# forget_release removes a release's files from dir.
forget_release() {
  local dir=$1 file
  shift
  for file in "$@"; do
    if [ -n "$file" ]; then rm -f "${dir:?}/$file"; fi
  done
}

# download fetches a URL to a file, saying why when it cannot.
download() {
  local err
  if ! err=$(curl -fsSL --retry 3 --proto-redir =https -o "$2" "$1" 2>&1); then
    echo "$1: ${err:-curl failed}" >&2
    rm -f "$2"
    return 1
  fi
}

# check_release prints why a release's files in dir fail their check: the
# signature of SHA256SUMS (when sig names one) by the key shipped beside
# this script, then the zip's SHA-256 against SHA256SUMS.
check_release() {
  local dir=$1 zip=$2 sums=$3 sig=$4 gnupg want got
  if [ -n "$sig" ]; then
    gnupg=$(mktemp -d)
    gpg --batch --quiet --homedir "$gnupg" --dearmor -o "$gnupg/key.gpg" "$(dirname "${BASH_SOURCE[0]}")/hashicorp.asc"
    if ! gpgv --homedir "$gnupg" --keyring "$gnupg/key.gpg" "$dir/$sig" "$dir/$sums" >/dev/null 2>&1; then
      rm -rf "$gnupg"
      echo "$sums is not signed by HashiCorp's key (.github/actions/lib/hashicorp.asc)"
      return 1
    fi
    rm -rf "$gnupg"
  fi
  want=$(awk -v f="$zip" '$2 == f { print $1 }' "$dir/$sums")
  got=$(sha256 "$dir/$zip")
  if [ -z "$want" ] || [ "$got" != "$want" ]; then
    echo "$zip has SHA-256 $got, but $sums lists ${want:-none}"
    return 1
  fi
}

sha256() {
  if command -v sha256sum >/dev/null; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1
  fi
}

# tf runs the CLI and passes the signals that cancel a step on to it, then
# waits for it. GitHub cancels a step by signalling its process alone, this
# script (the actions' run: lines exec it): SIGINT, then SIGTERM 7.5 s later
# and SIGKILL 2.5 s after that. On the first, Terraform stops gracefully: a
# claim under way gives back what it took. On the second it exits at once,
# before the SIGKILL, and leaves no process behind; what a claim still held
# is listed in its record, which the release adopts. (bash starts
# background commands with SIGINT ignored; Go programs such as terraform and
# tofu handle it all the same.)
tf() {
  local pid status
  "$CLI" "$@" &
  pid=$!
  trap 'echo "Cancelled: stopping $CLI."; kill -INT "$pid" 2>/dev/null || true' INT
  trap 'kill -TERM "$pid" 2>/dev/null || true' TERM
  status=0
  wait "$pid" || status=$?
  while kill -0 "$pid" 2>/dev/null; do # wait was interrupted by the signal
    status=0
    wait "$pid" || status=$?
  done
  trap - INT TERM
  return "$status"
}

# workdir writes the configuration into a directory of its own and runs
# init there, with the cached providers and lock file.
workdir() {
  local dir=$1 version source=${EC2RUNNERS_PROVIDER_SOURCE:-ec2runners/ec2runners} backend=${EC2RUNNERS_BACKEND:-}
  local lock="$CACHE_DIR/$CLI.terraform.lock.hcl" args=() line
  command -v "$CLI" >/dev/null || die "$CLI is not on PATH"
  version=$(provider_version)
  [[ $source =~ ^[A-Za-z0-9./_-]+$ ]] || die "provider-source '$source' is not a provider source address"
  [[ $version =~ ^[0-9A-Za-z.,\<\>=~!\ +-]*$ ]] || die "provider-version '$version' is not a version constraint"
  [[ $backend =~ ^[a-z0-9_]*$ ]] || die "backend '$backend' is not a backend type"
  mkdir -p "$dir" "$CACHE_DIR/plugins"
  cp "$(dirname "${BASH_SOURCE[0]}")/claim.tf" "$dir/claim.tf"
  {
    echo 'terraform {'
    echo '  required_providers {'
    echo '    ec2runners = {'
    echo "      source = \"$source\""
    if [ -n "$version" ]; then echo "      version = \"$version\""; fi
    echo '    }'
    echo '  }'
    if [ -n "$backend" ]; then echo "  backend \"$backend\" {}"; fi
    echo '}'
  } >"$dir/versions.tf"
  while IFS= read -r line; do
    if [ -n "${line// /}" ]; then args+=("-backend-config=$line"); fi
  done <<<"${EC2RUNNERS_BACKEND_CONFIG:-}"
  export TF_PLUGIN_CACHE_DIR="$CACHE_DIR/plugins" TF_IN_AUTOMATION=1 TF_INPUT=0 CHECKPOINT_DISABLE=1
  if [ -n "$BROKER" ] && [ -n "${GITHUB_TOKEN:-}" ]; then
    # The broker mints the runners' tokens with the pool's credential, and
    # the token would only sit in Terraform's environment.
    notice "the github-token input is not used: with a broker, the pool's GitHub credential mints the runners' tokens"
    unset GITHUB_TOKEN
  fi
  if [ -n "${EC2RUNNERS_AWS_REGION:-}" ]; then export AWS_REGION="$EC2RUNNERS_AWS_REGION"; fi
  cd "$dir"
  if [ -f "$lock" ]; then cp "$lock" .terraform.lock.hcl; fi
  if ! tf init -input=false -no-color "${args[@]}" >init.log 2>&1; then
    if [ -f "$lock" ]; then # a stale cache: resolve anew
      rm -f .terraform.lock.hcl
      tf init -input=false -no-color -upgrade "${args[@]}" >init.log 2>&1 || { cat init.log; die "$CLI init failed"; }
    else
      cat init.log
      die "$CLI init failed"
    fi
  fi
  cat init.log
  cp .terraform.lock.hcl "$lock" 2>/dev/null || true
}

# claim_vars exports the claim's settings as variables; the provider checks
# them.
claim_vars() {
  local types=() t
  export TF_VAR_pool="$POOL"
  if [ -n "${EC2RUNNERS_INSTANCE_COUNT:-}" ]; then
    [[ $EC2RUNNERS_INSTANCE_COUNT =~ ^[0-9]+$ ]] || die "instance-count '$EC2RUNNERS_INSTANCE_COUNT' is not a number"
    export TF_VAR_instance_count="$EC2RUNNERS_INSTANCE_COUNT"
  fi
  if [ -n "${EC2RUNNERS_RESOURCE_CLASS:-}" ]; then export TF_VAR_resource_class="$EC2RUNNERS_RESOURCE_CLASS"; fi
  if [ -n "${EC2RUNNERS_USAGE_CLASS:-}" ]; then export TF_VAR_usage_class="$EC2RUNNERS_USAGE_CLASS"; fi
  if [ -n "${EC2RUNNERS_MAX_RUNTIME:-}" ]; then export TF_VAR_max_runtime="$EC2RUNNERS_MAX_RUNTIME"; fi
  if [ -n "${EC2RUNNERS_TIMEOUT:-}" ]; then export TF_VAR_create_timeout="$EC2RUNNERS_TIMEOUT"; fi
  if [ -n "${EC2RUNNERS_RUNNER_GROUP:-}" ]; then export TF_VAR_runner_group="$EC2RUNNERS_RUNNER_GROUP"; fi
  if [ -n "${EC2RUNNERS_ALLOWED_INSTANCE_TYPES:-}" ]; then
    for t in ${EC2RUNNERS_ALLOWED_INSTANCE_TYPES//,/ }; do
      [[ $t =~ ^[A-Za-z0-9.*-]+$ ]] || die "allowed-instance-types: '$t' is not an instance type pattern"
      types+=("\"$t\"")
    done
    TF_VAR_allowed_instance_types="[$(
      IFS=,
      echo "${types[*]}"
    )]"
    export TF_VAR_allowed_instance_types
  fi
}

cmd_claim() {
  local run_id result key value label="" ids="" counts="" started=$SECONDS
  run_id=$(default_run_id)
  [[ $run_id =~ $RUN_ID_PATTERN && ${#run_id} -le $MAX_NEW_RUN_ID_LENGTH ]] ||
    die "the run id '$run_id' cannot begin a label (up to $MAX_NEW_RUN_ID_LENGTH of a-z 0-9 _ . -): shorten the name input"
  claim_vars
  export TF_VAR_run_ids="[\"$run_id\"]"
  if [ -n "${GITHUB_JOB:-}" ]; then export TF_VAR_claimant="$GITHUB_JOB"; fi
  workdir "${RUNNER_TEMP:-/tmp}/ec2runners/claim-$run_id"
  # Errors only: the plan and the progress go to the log as they come.
  if ! tf apply -auto-approve -input=false -no-color 2>apply.err; then
    cat apply.err >&2
    if grep -q "is claimed by another claimant" apply.err; then
      die "another job of this workflow run claimed runners as run $run_id: give each claim job its own name input (and its release job the same name)"
    fi
    die "claiming runners from pool $POOL failed (see above); a failed claim holds nothing: what it took is back in the pool or terminated"
  fi
  result=$("$CLI" output -raw claim)
  while IFS='=' read -r key value; do
    case $key in
    label) label=$value ;;
    instance_ids) ids=$value ;;
    summary) counts=$value ;;
    esac
  done <<<"$result"
  output runs-on "$label"
  output label "$label"
  output run-id "$run_id"
  output instance-ids "$ids"
  output claimed true
  echo "Claimed runners from pool $POOL${BROKER:+ through broker $BROKER} for runs-on: $label ($counts) in $((SECONDS - started)) s: $ids"
  summary "ec2runners: runners of pool \`$POOL\` for \`runs-on: $label\`: $ids ($counts)"
}

# release_ids: the claim to release (the claim job's run-id output, else this
# attempt's) and, when it is the run's default one, those of the run's
# earlier attempts, which a release that failed may have left.
release_ids() {
  local own=${EC2RUNNERS_RUN_ID:-} attempt=${GITHUB_RUN_ATTEMPT:-1} n id
  [ -n "$own" ] || own=$(default_run_id)
  echo "$own"
  for ((n = 1; n <= attempt; n++)); do
    id=$(default_run_id "$n")
    if [ "$id" != "$own" ]; then echo "$id"; fi
  done
}

cmd_release() {
  local ids=() id list held=() state out
  mapfile -t ids < <(release_ids)
  for id in "${ids[@]}"; do
    [[ $id =~ $RUN_ID_PATTERN ]] || die "run-id '$id' is not a claim's run id"
  done
  export TF_VAR_pool="$POOL"
  list=$(printf '"%s",' "${ids[@]}")
  export TF_VAR_run_ids="[${list%,}]"
  workdir "${RUNNER_TEMP:-/tmp}/ec2runners/release-${ids[0]}"
  # With a backend, the claim job's state may hold the claim; without one,
  # it is adopted by its identity, pool and run id: from the pool's table,
  # or through the broker, which reads only this repository's claims.
  state=$("$CLI" state list 2>/dev/null || true)
  for id in "${ids[@]}"; do
    if grep -qxF "ec2runners_claim.this[\"$id\"]" <<<"$state"; then
      held+=("$id")
      continue
    fi
    if out=$(tf import -input=false -no-color "ec2runners_claim.this[\"$id\"]" "$POOL/$id" 2>&1); then
      held+=("$id")
    elif grep -q "non-existent remote object" <<<"$out"; then
      echo "No claim $POOL/$id (never made, or released already)."
    else
      echo "$out"
      die "cannot adopt claim $POOL/$id"
    fi
  done
  if [ ${#held[@]} -eq 0 ]; then
    echo "Nothing to release."
    return
  fi
  if ! tf destroy -auto-approve -input=false -no-color -refresh=false; then
    die "releasing ${held[*]} from pool $POOL failed (see above): run the release again; runners not released terminate when the claim's max_runtime ends"
  fi
  echo "Released ${held[*]}: its runners are back in pool $POOL, warm (those that could not go back are terminated)."
  summary "ec2runners: released \`${held[*]}\` back to pool \`$POOL\`"
}

case "${1:-}" in
prepare) cmd_prepare "${2:-}" ;;
cli) cmd_cli ;;
claim) cmd_claim ;;
release) cmd_release ;;
*) die "usage: ec2runners.sh prepare claim|release | cli | claim | release" ;;
esac
