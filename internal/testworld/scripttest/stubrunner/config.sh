#!/bin/bash
# Stand-in for actions/runner's config.sh (VERSION is set by the stub
# GitHub when it packs this file). Like the real one it refuses to run as
# root unless RUNNER_ALLOW_RUNASROOT is set, takes any argument also from
# the environment as ACTIONS_RUNNER_INPUT_<NAME> (the command line wins),
# so a token need not show in process arguments, registers with the
# GitHub at --url (in the runner group --runnergroup names, which must
# exist; ephemeral with --ephemeral: GitHub sends it one job, then removes
# it), with the default labels self-hosted, Linux and its architecture
# before --labels unless --no-default-labels, and keeps its settings in
# .runner (JSON, with the gitHubUrl that "remove" sends the removal to).
set -eu
cd "$(dirname "$0")"
if [ "$(id -u)" = 0 ] && [ -z "${RUNNER_ALLOW_RUNASROOT:-}" ]; then
	echo "Must not run with sudo" >&2
	exit 1
fi

token=${ACTIONS_RUNNER_INPUT_TOKEN:-}
url=${ACTIONS_RUNNER_INPUT_URL:-}
name=${ACTIONS_RUNNER_INPUT_NAME:-}
labels=${ACTIONS_RUNNER_INPUT_LABELS:-}
work=${ACTIONS_RUNNER_INPUT_WORK:-_work}
group=${ACTIONS_RUNNER_INPUT_RUNNERGROUP:-}
unset ACTIONS_RUNNER_INPUT_TOKEN ACTIONS_RUNNER_INPUT_URL ACTIONS_RUNNER_INPUT_NAME ACTIONS_RUNNER_INPUT_LABELS ACTIONS_RUNNER_INPUT_WORK ACTIONS_RUNNER_INPUT_RUNNERGROUP

# setting NAME: a string field of .runner.
setting() { sed -n 's/.*"'"$1"'": *"\([^"]*\)".*/\1/p' .runner; }
# origin URL: scheme://host[:port] of URL.
origin() { printf '%s' "$1" | sed -E 's#^(https?://[^/]+).*#\1#'; }

if [ "${1:-}" = remove ]; then
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		--token) token=$2; shift ;;
		--unattended) ;;
		*) echo "unknown argument $1" >&2; exit 2 ;;
		esac
		shift
	done
	[ -n "$token" ] || { echo "usage: config.sh remove --token TOKEN (or ACTIONS_RUNNER_INPUT_TOKEN)" >&2; exit 2; }
	curl -sSf -X POST "$(origin "$(setting gitHubUrl)")/_stub/remove" --data-urlencode "name=$(setting agentName)" --data-urlencode "token=$token"
	rm -f .runner .credentials .credentials_rsaparams
	exit 0
fi
if [ -f .runner ]; then
	echo "Cannot configure the runner because it is already configured." >&2
	exit 1
fi
unattended=0 nodefault=0 ephemeral=0
while [ $# -gt 0 ]; do
	case $1 in
	--url) url=$2; shift ;;
	--token) token=$2; shift ;;
	--name) name=$2; shift ;;
	--labels) labels=$2; shift ;;
	--work) work=$2; shift ;;
	--runnergroup) group=$2; shift ;;
	--unattended) unattended=1 ;;
	--no-default-labels) nodefault=1 ;;
	--ephemeral) ephemeral=1 ;;
	--replace | --disableupdate) ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
[ "$unattended" = 1 ] || { echo "expected --unattended" >&2; exit 2; }
if [ "$nodefault" = 0 ]; then
	case $(uname -m) in
	aarch64) arch=ARM64 ;;
	*) arch=X64 ;;
	esac
	labels=self-hosted,Linux,$arch${labels:+,$labels}
fi
[ -n "$token" ] || { echo "no token: pass --token or ACTIONS_RUNNER_INPUT_TOKEN" >&2; exit 2; }
server=$(origin "$url")
curl -sS --fail-with-body -X POST "$server/_stub/register" --data-urlencode "url=$url" --data-urlencode "token=$token" \
	--data-urlencode "name=$name" --data-urlencode "labels=$labels" --data-urlencode "runnergroup=$group" --data-urlencode "ephemeral=$ephemeral" --data-urlencode "version=$VERSION"
printf '{"agentName": "%s", "gitHubUrl": "%s", "serverUrl": "%s", "workFolder": "%s", "ephemeral": %s}\n' "$name" "$url" "$server" "$work" \
	"$([ "$ephemeral" = 1 ] && echo true || echo false)" >.runner
printf '{"scheme": "OAuth", "data": {"clientId": "%s"}}\n' "$name" >.credentials
printf 'LANG=C.UTF-8\n' >.env
printf '%s\n' "$PATH" >.path
