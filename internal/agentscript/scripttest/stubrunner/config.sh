#!/bin/bash
# Stand-in for actions/runner's config.sh, reporting to the stub GitHub at
# STUB (set by the stub when it packs this file). Like the real one it takes
# any argument also from the environment as ACTIONS_RUNNER_INPUT_<NAME>
# (the command line wins), so a token need not show in process arguments,
# and clears the variables it read.
set -eu
cd "$(dirname "$0")"

token=${ACTIONS_RUNNER_INPUT_TOKEN:-}
url=${ACTIONS_RUNNER_INPUT_URL:-}
name=${ACTIONS_RUNNER_INPUT_NAME:-}
labels=${ACTIONS_RUNNER_INPUT_LABELS:-}
work=${ACTIONS_RUNNER_INPUT_WORK:-_work}
unset ACTIONS_RUNNER_INPUT_TOKEN ACTIONS_RUNNER_INPUT_URL ACTIONS_RUNNER_INPUT_NAME ACTIONS_RUNNER_INPUT_LABELS ACTIONS_RUNNER_INPUT_WORK

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
	name=$(cat .runner)
	curl -sSf -X POST "$STUB/_stub/remove" --data-urlencode "name=$name" --data-urlencode "token=$token"
	rm -f .runner .credentials .work
	exit 0
fi
if [ -f .runner ]; then
	echo "Cannot configure the runner because it is already configured." >&2
	exit 1
fi
unattended=0 nodefault=0
while [ $# -gt 0 ]; do
	case $1 in
	--url) url=$2; shift ;;
	--token) token=$2; shift ;;
	--name) name=$2; shift ;;
	--labels) labels=$2; shift ;;
	--work) work=$2; shift ;;
	--unattended) unattended=1 ;;
	--no-default-labels) nodefault=1 ;;
	--replace | --disableupdate) ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
{ [ "$unattended" = 1 ] && [ "$nodefault" = 1 ]; } || { echo "expected --unattended --no-default-labels" >&2; exit 2; }
[ -n "$token" ] || { echo "no token: pass --token or ACTIONS_RUNNER_INPUT_TOKEN" >&2; exit 2; }
curl -sSf -X POST "$STUB/_stub/register" --data-urlencode "url=$url" --data-urlencode "token=$token" \
	--data-urlencode "name=$name" --data-urlencode "labels=$labels"
printf '%s' "$name" >.runner
printf '%s' "$work" >.work
echo secret >.credentials
