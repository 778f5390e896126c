#!/bin/bash
# Stand-in for actions/runner's run.sh (VERSION is set by the stub GitHub
# when it packs this file), reporting to the server of its .runner: online
# until stopped, it takes the jobs queued for its labels and runs each
# one's script as this user, in a workspace under the work folder, with the
# environment a job's steps get from the real runner, and posts the output
# and exit code back. Like the real listener it exits when the service
# refuses its version, and after its one job when it is ephemeral; with
# --jitconfig it first writes the files of the just-in-time configuration
# (base64 of a JSON object of file names and their base64 contents), as
# the real listener does, and runs from them.
cd "$(dirname "$0")" || exit 1
if [ "${1:-}" = --jitconfig ]; then
	jitconfig=$(printf '%s' "${2:-}" | base64 -d) || exit 1
	for file in runner credentials; do
		printf '%s' "$jitconfig" | sed -n 's/.*"\.'"$file"'": *"\([^"]*\)".*/\1/p' | base64 -d >".$file" || exit 1
	done
fi
setting() { sed -n 's/.*"'"$1"'": *"\([^"]*\)".*/\1/p' .runner; }
name=$(setting agentName)
server=$(setting serverUrl)
work=$(setting workFolder)
[[ $work == /* ]] || work=$PWD/$work
home=$(getent passwd "$(id -un)" | cut -d: -f6)
echo $$ >run.pid
curl -sSf -X POST "$server/_stub/run" --data-urlencode "name=$name"
# Once: runuser passes on the SIGTERM its process group also gets.
trap 'trap "" TERM INT; curl -sSf -X POST "$server/_stub/stop" --data-urlencode "name=$name"; exit 0' TERM INT

# run_job runs the job in $work/_job: a line "<id> <repository>", then the
# script. RUNNER_TEMP is emptied for every job, as the real runner does.
run_job() {
	local id repository repo rc
	{ read -r id repository && cat >"$work/_job.sh"; } <"$work/_job" || return 1
	repo=${repository#*/}
	rm -rf "$work/_temp" && mkdir -p "$work/_temp" "$work/$repo/$repo" || return 1
	mv "$work/_job.sh" "$work/_temp/$id.sh"
	(
		cd "$work/$repo/$repo" || exit 1
		export GITHUB_ACTIONS=true CI=true GITHUB_REPOSITORY="$repository" GITHUB_WORKSPACE="$work/$repo/$repo" \
			RUNNER_NAME="$name" RUNNER_OS=Linux RUNNER_TEMP="$work/_temp" RUNNER_WORKSPACE="$work/$repo" \
			RUNNER_TOOL_CACHE="$work/_tool" HOME="${home:-$HOME}"
		# The real runner's default shell for a run step.
		exec bash --noprofile --norc -eo pipefail "$work/_temp/$id.sh"
	) </dev/null >"$work/_temp/$id.out" 2>&1 &
	wait $!
	rc=$?
	curl -sSf -X POST "$server/_stub/job/result" --data-urlencode "id=$id" --data-urlencode "exit_code=$rc" \
		--data-urlencode "output@$work/_temp/$id.out"
}

mkdir -p "$work" || exit 1
while :; do
	# A long poll; in the background, so that a TERM is handled at once.
	curl -sS -o "$work/_job" -w '%{http_code}' -G "$server/_stub/job" --data-urlencode "name=$name" \
		--data-urlencode "version=$VERSION" >"$work/_job.status" &
	wait $!
	case $(<"$work/_job.status") in
	200)
		run_job
		if grep -q '"ephemeral": *true' .runner; then
			exit 0
		fi
		;;
	204) ;;
	403)
		cat "$work/_job" >&2
		exit 1
		;;
	*) sleep 1 & wait $! ;;
	esac
done
