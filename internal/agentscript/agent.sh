# The agent: the instance half of the ec2runners pool protocol
# (docs/guides/protocol.md). Run by cloud-init as user data, it installs
# itself as the systemd service ec2runners-agent, which runs "agent run":
# heartbeat, self-termination past the threshold, and for every run id the
# pool assigns: register a GitHub runner labelled with it, wait for the
# release, deregister, and wait for the next run.
#
# Needs only bash, curl, openssl, GNU coreutils, util-linux and systemd, as
# on stock Amazon Linux 2023 and Ubuntu images; AWS requests are signed with
# SigV4 here, so no AWS CLI is needed.

set -u -o pipefail
umask 077

log() { printf '%s ec2runners-agent: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
now_ts() { date -u +%Y-%m-%dT%H:%M:%SZ; }
epoch_of() { date -u -d "$1" +%s 2>/dev/null; }

# ---------------------------------------------------------------- JSON

# json_s NAME JSON: the string value of the last field NAME ("NAME": "v").
json_s() { printf '%s' "$2" | tr -d '\n' | sed -n 's/.*"'"$1"'" *: *"\([^"\\]*\)".*/\1/p'; }

# attr_s NAME JSON: the value of DynamoDB attribute NAME ("NAME": {"S": "v"}).
attr_s() { printf '%s' "$2" | tr -d '\n' | sed -n 's/.*"'"$1"'" *: *{ *"S" *: *"\([^"\\]*\)" *}.*/\1/p'; }

# ---------------------------------------------------------------- IMDSv2

IMDS_TOKEN=''
IMDS_TOKEN_AT=0

# imds_get PATH: GET PATH below /latest/ of the instance metadata service, into REPLY.
imds_get() {
	local now
	now=$(date +%s)
	if [ -z "$IMDS_TOKEN" ] || [ $((now - IMDS_TOKEN_AT)) -gt 3600 ]; then
		IMDS_TOKEN=$(curl -sSf --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600' "$IMDS_URL/latest/api/token") || return 1
		IMDS_TOKEN_AT=$now
	fi
	REPLY=$(curl -sSf --max-time 5 -H "X-aws-ec2-metadata-token: $IMDS_TOKEN" "$IMDS_URL/latest/$1")
}

# ---------------------------------------------------------------- SigV4

AWS_KEY=''
AWS_SECRET=''
AWS_SESSION=''
CREDENTIALS_AT=0
SIGNING_KEY=''
SIGNING_SCOPE=''

# load_credentials: the instance profile's credentials, re-read every 5 minutes
# (IMDS rotates them well before they expire).
load_credentials() {
	local now role
	now=$(date +%s)
	if [ -n "$AWS_KEY" ] && [ $((now - CREDENTIALS_AT)) -lt 300 ]; then
		return 0
	fi
	imds_get meta-data/iam/security-credentials/ || { log "no instance profile in the instance metadata"; return 1; }
	role=${REPLY%%$'\n'*}
	imds_get "meta-data/iam/security-credentials/$role" || return 1
	AWS_KEY=$(json_s AccessKeyId "$REPLY")
	AWS_SECRET=$(json_s SecretAccessKey "$REPLY")
	AWS_SESSION=$(json_s Token "$REPLY")
	if [ -z "$AWS_KEY" ] || [ -z "$AWS_SECRET" ]; then
		log "the instance profile's credentials are incomplete"
		return 1
	fi
	CREDENTIALS_AT=$now
	SIGNING_SCOPE=''
}

sha256_hex() { printf '%s' "$1" | openssl dgst -sha256 -hex | sed 's/^.*= //'; }
hmac_hex() { printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$1" -hex | sed 's/^.*= //'; }
hex_of() { printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n'; }

# aws_post SERVICE URL CONTENT_TYPE BODY [TARGET]: a SigV4-signed POST; the
# response body in REPLY; fails on any status but 2xx.
aws_post() {
	local service=$1 url=$2 ctype=$3 body=$4 target=${5:-}
	load_credentials || return 1
	local amzdate day host scope key headers signed canonical to_sign signature out status
	amzdate=$(date -u +%Y%m%dT%H%M%SZ)
	day=${amzdate%%T*}
	host=${url#*://}
	host=${host%%/*}
	scope="$day/$REGION/$service/aws4_request"
	if [ "$SIGNING_SCOPE" != "$scope" ]; then # the key changes daily and with the credentials
		key=$(hmac_hex "$(hex_of "AWS4$AWS_SECRET")" "$day")
		key=$(hmac_hex "$key" "$REGION")
		key=$(hmac_hex "$key" "$service")
		SIGNING_KEY=$(hmac_hex "$key" aws4_request)
		SIGNING_SCOPE=$scope
	fi
	local args=(-sS --max-time 10 -X POST "$url" -H "Content-Type: $ctype" -H "X-Amz-Date: $amzdate")
	headers="content-type:$ctype"$'\n'"host:$host"$'\n'"x-amz-date:$amzdate"$'\n'
	signed='content-type;host;x-amz-date'
	if [ -n "$AWS_SESSION" ]; then
		headers+="x-amz-security-token:$AWS_SESSION"$'\n'
		signed+=';x-amz-security-token'
		args+=(-H "X-Amz-Security-Token: $AWS_SESSION")
	fi
	if [ -n "$target" ]; then
		headers+="x-amz-target:$target"$'\n'
		signed+=';x-amz-target'
		args+=(-H "X-Amz-Target: $target")
	fi
	canonical="POST"$'\n'"/"$'\n'$'\n'"$headers"$'\n'"$signed"$'\n'"$(sha256_hex "$body")"
	to_sign="AWS4-HMAC-SHA256"$'\n'"$amzdate"$'\n'"$scope"$'\n'"$(sha256_hex "$canonical")"
	signature=$(hmac_hex "$SIGNING_KEY" "$to_sign")
	args+=(-H "Authorization: AWS4-HMAC-SHA256 Credential=$AWS_KEY/$scope, SignedHeaders=$signed, Signature=$signature")
	out=$(curl "${args[@]}" --data-binary "$body" -w $'\n%{http_code}') || { log "$service: request failed"; return 1; }
	status=${out##*$'\n'}
	REPLY=${out%$'\n'*}
	if [ "$status" -ge 200 ] && [ "$status" -lt 300 ]; then
		return 0
	fi
	log "$service: HTTP $status: $REPLY"
	return 1
}

# ---------------------------------------------------------------- the pool table

ddb() { aws_post dynamodb "$DYNAMODB_URL" 'application/x-amz-json-1.0' "$2" "DynamoDB_20120810.$1"; }

key_json() { printf '{"PK":{"S":"%s"},"SK":{"S":"ID#%s"}}' "$1" "$2"; }

# put_item TYPE ID VALUE: writes the item of TYPE and ID with VALUE (DynamoDB
# JSON), and a TTL a day ahead, so the table forgets the item once the agent is gone.
put_item() {
	local expires=$(($(date +%s) + 86400))
	ddb PutItem "{\"TableName\":\"$POOL\",\"Item\":{\"PK\":{\"S\":\"$1\"},\"SK\":{\"S\":\"ID#$2\"},\"entityType\":{\"S\":\"${1#TYPE#}\"},\"identifier\":{\"S\":\"$2\"},\"updatedAt\":{\"S\":\"$(now_ts)\"},\"expiresAt\":{\"N\":\"$expires\"},\"value\":$3}}"
}

heartbeat() { put_item 'TYPE#HEARTBEAT' "$INSTANCE_ID" '{"S":"PING"}'; }

# signal STATE RUN_ID: the worker signal the claim waits for.
signal() {
	log "signal $1 for run $2"
	until put_item 'TYPE#WS' "$INSTANCE_ID" "{\"M\":{\"state\":{\"S\":\"$1\"},\"runId\":{\"S\":\"$2\"}}}"; do
		sleep 1
	done
}

# read_record: the instance's own record into REC_STATE, REC_RUN_ID and
# REC_THRESHOLD (all empty when there is no record).
read_record() {
	ddb GetItem "{\"TableName\":\"$POOL\",\"Key\":$(key_json 'TYPE#INSTANCE' "$INSTANCE_ID"),\"ConsistentRead\":true,\"ProjectionExpression\":\"#s, runId, threshold\",\"ExpressionAttributeNames\":{\"#s\":\"state\"}}" || return 1
	REC_STATE=$(attr_s state "$REPLY")
	REC_RUN_ID=$(attr_s runId "$REPLY")
	REC_THRESHOLD=$(attr_s threshold "$REPLY")
}

# read_token FIELD: the pool's registration token (FIELD token) or removal
# token (FIELD remove_token) into TOKEN, if it is valid for another minute.
read_token() {
	local expires
	ddb GetItem "{\"TableName\":\"$POOL\",\"Key\":$(key_json 'TYPE#METADATA' gh_registration_token),\"ConsistentRead\":true}" || return 1
	TOKEN=$(attr_s "$1" "$REPLY")
	expires=$(attr_s "${1%token}expires_at" "$REPLY")
	if [ -z "$TOKEN" ]; then
		log "the pool table holds no $1: configure the provider's github block"
		return 1
	fi
	if [ "$(epoch_of "$expires" || echo 0)" -lt $(($(date +%s) + 60)) ]; then
		log "the pool's $1 expired at $expires"
		return 1
	fi
}

# ---------------------------------------------------------------- EC2

terminate_self() {
	log "terminating this instance: $1"
	aws_post ec2 "$EC2_URL" 'application/x-www-form-urlencoded; charset=utf-8' "Action=TerminateInstances&InstanceId.1=$INSTANCE_ID&Version=2016-11-15"
}

# ---------------------------------------------------------------- background loops

heartbeat_loop() {
	while :; do
		heartbeat || log "heartbeat failed"
		sleep "$HEARTBEAT_INTERVAL"
	done
}

# self_check_loop ends the instance once its record's threshold is more than
# the grace period past, once the record says terminated, or when no record
# appears within the created lifetime (a claim that crashed after launching).
self_check_loop() {
	local booted threshold
	booted=$(date +%s)
	while :; do
		if read_record; then
			threshold=$(epoch_of "$REC_THRESHOLD" || echo '')
			if [ -z "$REC_STATE" ] && [ $(($(date +%s) - booted)) -gt "$ORPHAN_TIMEOUT" ]; then
				terminate_self "no instance record ${ORPHAN_TIMEOUT}s after boot" && kill -TERM "$$"
			elif [ "$REC_STATE" = terminated ]; then
				terminate_self "its record is terminated" && kill -TERM "$$"
			elif [ -n "$threshold" ] && [ $((threshold + SELF_TERMINATION_GRACE)) -lt "$(date +%s)" ]; then
				terminate_self "state $REC_STATE expired at $REC_THRESHOLD" && kill -TERM "$$"
			fi
		fi
		sleep "$SELF_CHECK_INTERVAL"
	done
}

# ---------------------------------------------------------------- the runner

RUNNER_PID=''
AS_RUNNER=()

install_runner() {
	local url=$RUNNER_DOWNLOAD_URL arch
	if [ -x "$RUNNER_DIR/config.sh" ]; then
		return 0
	fi
	if [ -z "$url" ]; then
		case $(uname -m) in
		x86_64) arch=x64 ;;
		aarch64) arch=arm64 ;;
		*) log "no GitHub runner for architecture $(uname -m)"; return 1 ;;
		esac
		url="https://github.com/actions/runner/releases/download/v$RUNNER_VERSION/actions-runner-linux-$arch-$RUNNER_VERSION.tar.gz"
	fi
	if ! id -u "$RUNNER_USER" >/dev/null 2>&1; then
		useradd --create-home --shell /bin/bash "$RUNNER_USER" || return 1
	fi
	log "installing the GitHub runner from $url"
	mkdir -p "$RUNNER_DIR" || return 1
	curl -fsSL --retry 5 --max-time 600 "$url" | tar -xz -C "$RUNNER_DIR" || { log "cannot download or unpack $url"; return 1; }
	if [ -x "$RUNNER_DIR/bin/installdependencies.sh" ]; then
		"$RUNNER_DIR/bin/installdependencies.sh" >/dev/null || log "the runner's installdependencies.sh failed; continuing"
	fi
	chown -R "$RUNNER_USER:" "$RUNNER_DIR"
}

# run_pre_runner_script runs the user's script once per instance, as root.
run_pre_runner_script() {
	local script="$STATE_DIR/pre-runner"
	if [ -z "$PRE_RUNNER_SCRIPT" ]; then
		return 0
	fi
	printf '%s' "$PRE_RUNNER_SCRIPT" | base64 -d >"$script" && chmod 700 "$script" || return 1
	log "running the pre-runner script"
	if [ "$(head -c 2 "$script")" = '#!' ]; then
		"$script"
	else
		bash "$script"
	fi
}

# prepare installs the runner and runs the pre-runner script, once, and
# tells a waiting claim how that went.
prepare() {
	local outcome=UD_OK
	if [ -f "$STATE_DIR/prepared" ]; then
		return 0
	fi
	if install_runner && run_pre_runner_script; then
		touch "$STATE_DIR/prepared"
	else
		outcome=UD_FAILED
	fi
	if [ -n "$INITIAL_RUN_ID" ]; then
		signal "$outcome" "$INITIAL_RUN_ID"
	fi
	[ "$outcome" = UD_OK ]
}

start_runner() {
	# Its own session, so that stop_runner ends every process of it.
	setsid "${AS_RUNNER[@]}" ./run.sh &
	RUNNER_PID=$!
}

stop_runner() {
	local waited=0
	if [ -z "$RUNNER_PID" ]; then
		return 0
	fi
	kill -TERM -- "-$RUNNER_PID" 2>/dev/null
	while kill -0 "$RUNNER_PID" 2>/dev/null && [ "$waited" -lt 30 ]; do
		sleep 1
		waited=$((waited + 1))
	done
	kill -KILL -- "-$RUNNER_PID" 2>/dev/null
	wait "$RUNNER_PID" 2>/dev/null
	RUNNER_PID=''
}

register() {
	local run_id=$1
	read_token token || return 1
	log "registering runner $INSTANCE_ID with label $run_id at $GITHUB_URL/$GITHUB_TARGET"
	"${AS_RUNNER[@]}" ./config.sh --unattended --url "$GITHUB_URL/$GITHUB_TARGET" --token "$TOKEN" \
		--name "$INSTANCE_ID" --labels "$run_id" --no-default-labels --replace --work _work || {
		log "config.sh failed"
		return 1
	}
	start_runner
}

# deregister removes the runner from GitHub, so that no offline runner is
# left behind; a failure leaves the local configuration out of the way, as
# the next registration replaces the runner of the same name anyway.
deregister() {
	if [ ! -f .runner ]; then
		return 0
	fi
	if read_token remove_token && "${AS_RUNNER[@]}" ./config.sh remove --token "$TOKEN"; then
		return 0
	fi
	log "config.sh remove failed"
	rm -f .runner .credentials .credentials_rsaparams
	return 1
}

# ---------------------------------------------------------------- the loop

wait_for_run_id() {
	while :; do
		if read_record && [[ $REC_RUN_ID =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$ ]]; then
			case $REC_STATE in
			created | claimed | running) return 0 ;;
			esac
		fi
		sleep "$CLAIM_POLL_INTERVAL"
	done
}

# wait_for_release RUN_ID: until the record no longer names RUN_ID.
wait_for_release() {
	while :; do
		if read_record && [ "$REC_RUN_ID" != "$1" ]; then
			return 0
		fi
		if [ -n "$RUNNER_PID" ] && ! kill -0 "$RUNNER_PID" 2>/dev/null; then
			log "the runner exited; starting it again"
			start_runner
		fi
		sleep "$RELEASE_POLL_INTERVAL"
	done
}

serve() {
	local run_id
	while :; do
		wait_for_run_id
		run_id=$REC_RUN_ID
		if register "$run_id"; then
			signal UD_REG_OK "$run_id"
		else
			signal UD_REG_FAILED "$run_id"
		fi
		wait_for_release "$run_id"
		log "released from run $run_id"
		stop_runner
		if deregister; then
			signal UD_REMOVE_REG_OK "$run_id"
			signal UD_REMOVE_REG_REMOVE_RUN_OK "$run_id"
		else
			signal UD_REMOVE_REG_FAILED "$run_id"
		fi
	done
}

cleanup() {
	trap - TERM INT EXIT
	if [ -n "$RUNNER_PID" ]; then
		kill -TERM -- "-$RUNNER_PID" 2>/dev/null
	fi
	# shellcheck disable=SC2046 # word splitting of the pids is intended
	kill $(jobs -p) 2>/dev/null
}

run_agent() {
	mkdir -p "$STATE_DIR" "$RUNNER_DIR" || exit 1
	until imds_get meta-data/instance-id && [[ $REPLY =~ ^i-[0-9a-f]+$ ]]; do
		log "waiting for the instance metadata service"
		sleep 2
	done
	INSTANCE_ID=$REPLY
	INITIAL_RUN_ID=''
	if imds_get meta-data/tags/instance/InitialRunId 2>/dev/null; then
		INITIAL_RUN_ID=$REPLY
	fi
	if [ "$(id -un)" != "$RUNNER_USER" ]; then
		AS_RUNNER=(runuser -u "$RUNNER_USER" --)
	fi
	log "agent of $INSTANCE_ID in pool $POOL (initial run: ${INITIAL_RUN_ID:-none})"
	trap cleanup EXIT
	trap 'exit 143' TERM INT
	heartbeat_loop &
	local heartbeat_pid=$!
	self_check_loop &
	if ! prepare; then
		# Unhealthy from now on: the claim gives up on it, and it ends
		# itself once its record expires.
		kill "$heartbeat_pid"
		wait
		exit 1
	fi
	cd "$RUNNER_DIR" || exit 1
	serve
}

# install_service installs this script as a systemd service and starts it, so
# that cloud-init finishes booting and systemd restarts the agent if it dies.
install_service() {
	install -D -m 0700 "$0" "$AGENT_PATH" || exit 1
	cat >"$SYSTEMD_DIR/ec2runners-agent.service" <<EOF
[Unit]
Description=ec2runners agent: keeps this instance in the runner pool $POOL
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=$AGENT_PATH run
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
EOF
	systemctl daemon-reload && systemctl enable --now ec2runners-agent.service
}

case ${1:-install} in
run) run_agent ;;
install) install_service ;;
*)
	echo "usage: $0 [install|run]" >&2
	exit 2
	;;
esac
