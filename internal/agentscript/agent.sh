# The agent: the instance half of the ec2runners pool protocol
# (docs/guides/protocol.md). Run by cloud-init as user data, it installs
# itself as the systemd service ec2runners-agent, which runs "agent run":
# heartbeat, self-termination past the threshold, and for every run id the
# pool assigns: register a GitHub runner labelled with it, wait for the
# release, deregister, and wait for the next run.
#
# Needs only bash 5, curl, GNU coreutils, util-linux and systemd, as
# on stock Amazon Linux 2023 and Ubuntu images; AWS requests are signed with
# SigV4 here, so no AWS CLI is needed.

set -u -o pipefail
umask 077
# Dates and EPOCHREALTIME in one fixed form, whatever the image's locale.
export TZ=UTC LC_ALL=C

# Time comes from bash's builtins (printf %()T, EPOCHSECONDS, EPOCHREALTIME):
# the heartbeat and the idle poll run every few seconds for the instance's
# whole life, and every program they start costs a fork and an exec.
log() { printf '%(%Y-%m-%dT%H:%M:%SZ)T ec2runners-agent: %s\n' -1 "$*" >&2; }
now_ts() { printf '%(%Y-%m-%dT%H:%M:%SZ)T' -1; }
epoch_of() { date -u -d "$1" +%s 2>/dev/null; }
now_us() { REPLY=${EPOCHREALTIME/./}; }

# usec_of SECONDS: a decimal number of seconds as whole microseconds, into REPLY.
usec_of() {
	local whole=${1%%.*} frac=000000
	[[ $1 == *.* ]] && frac="${1#*.}000000"
	REPLY=$((10#$whole * 1000000 + 10#${frac:0:6}))
}

# sleep_us MICROSECONDS
sleep_us() { sleep "$(($1 / 1000000)).$(printf '%06d' $(($1 % 1000000)))"; }

# curl_stdin OPTION...: curl with its options (name=value, or a bare name)
# given as a config on its standard input: no header, token or body then
# shows in its arguments, which any local user can read in /proc/*/cmdline.
curl_stdin() {
	local opt value config=''
	for opt in "$@"; do
		if [[ $opt != *=* ]]; then
			config+="$opt"$'\n'
			continue
		fi
		value=${opt#*=}
		value=${value//\\/\\\\}
		value=${value//\"/\\\"}
		value=${value//$'\n'/\\n}
		config+="${opt%%=*} = \"$value\""$'\n'
	done
	printf '%s' "$config" | curl -K -
}

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
	if [ -z "$IMDS_TOKEN" ] || [ $((EPOCHSECONDS - IMDS_TOKEN_AT)) -gt 3600 ]; then
		IMDS_TOKEN=$(curl_stdin silent show-error fail max-time=5 request=PUT \
			header='X-aws-ec2-metadata-token-ttl-seconds: 21600' url="$IMDS_URL/latest/api/token") || return 1
		IMDS_TOKEN_AT=$EPOCHSECONDS
	fi
	REPLY=$(curl_stdin silent show-error fail max-time=5 header="X-aws-ec2-metadata-token: $IMDS_TOKEN" url="$IMDS_URL/latest/$1")
}

# ---------------------------------------------------------------- SigV4

AWS_KEY=''
AWS_SECRET=''
AWS_SESSION=''
CREDENTIALS_AT=0
SIGNING_SCOPE=''
SIGNING_IPAD=''
SIGNING_OPAD=''

# load_credentials: the instance profile's credentials, re-read every 5 minutes
# (IMDS rotates them well before they expire).
load_credentials() {
	local role
	if [ -n "$AWS_KEY" ] && [ $((EPOCHSECONDS - CREDENTIALS_AT)) -lt 300 ]; then
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
	CREDENTIALS_AT=$EPOCHSECONDS
	SIGNING_SCOPE=''
}

# Hashes and HMACs are computed by sha256sum on data piped from bash's
# builtin printf: no key ever shows in a program's arguments.

# sha256_hex TEXT: the SHA-256 of TEXT in hex, into REPLY.
sha256_hex() {
	local h
	h=$(printf '%s' "$1" | sha256sum)
	REPLY=${h%% *}
}

# escapes_of HEX: the bytes of HEX as printf escapes (\xNN...), into REPLY.
escapes_of() {
	local i out=''
	for ((i = 0; i < ${#1}; i += 2)); do
		out+="\\x${1:i:2}"
	done
	REPLY=$out
}

# hmac_key KEY_HEX: the HMAC-SHA256 pads of a key (RFC 2104) as printf
# escapes, into IPAD and OPAD.
hmac_key() {
	local key=$1 i b h
	if [ ${#key} -gt 128 ]; then
		escapes_of "$key"
		# shellcheck disable=SC2059 # the escapes are the format
		h=$(printf "$REPLY" | sha256sum)
		key=${h%% *}
	fi
	while [ ${#key} -lt 128 ]; do key+=00; done
	IPAD='' OPAD=''
	for ((i = 0; i < 128; i += 2)); do
		b=$((16#${key:i:2}))
		printf -v IPAD '%s\\x%02x' "$IPAD" $((b ^ 0x36))
		printf -v OPAD '%s\\x%02x' "$OPAD" $((b ^ 0x5c))
	done
}

# hmac_hex MESSAGE: HMAC-SHA256 of MESSAGE in hex under the key of the last
# hmac_key, into REPLY.
hmac_hex() {
	local h
	# shellcheck disable=SC2059 # the escapes are the format
	h=$({ printf "$IPAD"; printf '%s' "$1"; } | sha256sum)
	escapes_of "${h%% *}"
	# shellcheck disable=SC2059
	h=$({ printf "$OPAD"; printf "$REPLY"; } | sha256sum)
	REPLY=${h%% *}
}

# signing_scope SERVICE [DAY]: the SigV4 scope of SERVICE on DAY (default
# today) into SCOPE, and its key (derived once a day, and with new
# credentials) into SIGNING_IPAD and SIGNING_OPAD.
signing_scope() {
	local day=${2:-} secret hex='' i part
	[ -n "$day" ] || printf -v day '%(%Y%m%d)T' -1
	SCOPE="$day/$REGION/$1/aws4_request"
	if [ "$SIGNING_SCOPE" = "$SCOPE" ]; then
		return 0
	fi
	secret="AWS4$AWS_SECRET"
	for ((i = 0; i < ${#secret}; i++)); do
		printf -v hex '%s%02x' "$hex" "'${secret:i:1}"
	done
	hmac_key "$hex"
	for part in "$day" "$REGION" "$1" aws4_request; do
		hmac_hex "$part"
		hmac_key "$REPLY"
	done
	SIGNING_IPAD=$IPAD SIGNING_OPAD=$OPAD SIGNING_SCOPE=$SCOPE
}

# aws_post SERVICE URL CONTENT_TYPE BODY [TARGET]: a SigV4-signed POST; the
# response body in REPLY; fails on any status but 2xx.
aws_post() {
	local service=$1 url=$2 ctype=$3 body=$4 target=${5:-}
	load_credentials || return 1
	local amzdate host headers signed body_hash out status
	printf -v amzdate '%(%Y%m%dT%H%M%SZ)T' -1
	signing_scope "$service" "${amzdate%%T*}"
	host=${url#*://}
	host=${host%%/*}
	local opts=(silent show-error max-time=10 request=POST url="$url" header="Content-Type: $ctype" header="X-Amz-Date: $amzdate")
	headers="content-type:$ctype"$'\n'"host:$host"$'\n'"x-amz-date:$amzdate"$'\n'
	signed='content-type;host;x-amz-date'
	if [ -n "$AWS_SESSION" ]; then
		headers+="x-amz-security-token:$AWS_SESSION"$'\n'
		signed+=';x-amz-security-token'
		opts+=(header="X-Amz-Security-Token: $AWS_SESSION")
	fi
	if [ -n "$target" ]; then
		headers+="x-amz-target:$target"$'\n'
		signed+=';x-amz-target'
		opts+=(header="X-Amz-Target: $target")
	fi
	sha256_hex "$body"
	body_hash=$REPLY
	sha256_hex "POST"$'\n'"/"$'\n'$'\n'"$headers"$'\n'"$signed"$'\n'"$body_hash"
	IPAD=$SIGNING_IPAD OPAD=$SIGNING_OPAD
	hmac_hex "AWS4-HMAC-SHA256"$'\n'"$amzdate"$'\n'"$SCOPE"$'\n'"$REPLY"
	opts+=(header="Authorization: AWS4-HMAC-SHA256 Credential=$AWS_KEY/$SCOPE, SignedHeaders=$signed, Signature=$REPLY")
	out=$(curl_stdin "${opts[@]}" data-binary="$body" write-out=$'\n%{http_code}') || { log "$service: request failed"; return 1; }
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

# put_agent_item SK ENTITY_TYPE VALUE: writes item SK of this instance's
# agent partition (AGENT#<instance ARN>, the only items it may write) with
# VALUE (DynamoDB JSON), and a TTL a day ahead, so the table forgets the
# item once the agent is gone.
put_agent_item() {
	local expires=$((EPOCHSECONDS + 86400))
	ddb PutItem "{\"TableName\":\"$POOL\",\"Item\":{\"PK\":{\"S\":\"$AGENT_PK\"},\"SK\":{\"S\":\"$1\"},\"entityType\":{\"S\":\"$2\"},\"identifier\":{\"S\":\"$INSTANCE_ID\"},\"updatedAt\":{\"S\":\"$(now_ts)\"},\"expiresAt\":{\"N\":\"$expires\"},\"value\":$3}}"
}

heartbeat() { put_agent_item HEARTBEAT HEARTBEAT '{"S":"PING"}'; }

# signal STATE RUN_ID: the worker signal the claim waits for.
signal() {
	log "signal $1 for run $2"
	until put_agent_item SIGNAL WS "{\"M\":{\"state\":{\"S\":\"$1\"},\"runId\":{\"S\":\"$2\"}}}"; do
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

# read_token SORT_KEY RUN_ID: the token a claim (TOKEN#REGISTER) or a release
# (TOKEN#REMOVE) handed this instance, into TOKEN, if it was handed for
# RUN_ID and GITHUB_TARGET and is valid for another minute: a token for
# another run or target is never used.
read_token() {
	local expires
	ddb GetItem "{\"TableName\":\"$POOL\",\"Key\":{\"PK\":{\"S\":\"$AGENT_PK\"},\"SK\":{\"S\":\"$1\"}},\"ConsistentRead\":true,\"ProjectionExpression\":\"#v\",\"ExpressionAttributeNames\":{\"#v\":\"value\"}}" || return 1
	TOKEN=$(attr_s token "$REPLY")
	expires=$(attr_s expires_at "$REPLY")
	if [ -z "$TOKEN" ] || [ "$(attr_s runId "$REPLY")" != "$2" ] || [ "$(attr_s target "$REPLY")" != "$GITHUB_TARGET" ]; then
		log "no $1 token for run $2 and $GITHUB_TARGET in the pool table: configure the provider's github block"
		return 1
	fi
	if [ "$(epoch_of "$expires" || echo 0)" -lt $((EPOCHSECONDS + 60)) ]; then
		log "the $1 token for run $2 expired at $expires"
		return 1
	fi
}

# ---------------------------------------------------------------- EC2

terminate_self() {
	log "terminating this instance: $1"
	aws_post ec2 "$EC2_URL" 'application/x-www-form-urlencoded; charset=utf-8' "Action=TerminateInstances&InstanceId.1=$INSTANCE_ID&Version=2016-11-15"
}

# ---------------------------------------------------------------- background loops

# heartbeat_loop beats on a fixed schedule, one interval after the last
# beat was due, so that a slow write does not stretch the interval; a beat
# that is late goes at once, without a burst to catch up.
heartbeat_loop() {
	local interval next
	usec_of "$HEARTBEAT_INTERVAL"
	interval=$REPLY
	now_us
	next=$REPLY
	while :; do
		heartbeat || log "heartbeat failed"
		next=$((next + interval))
		now_us
		if [ "$next" -gt "$REPLY" ]; then
			sleep_us $((next - REPLY))
		else
			next=$REPLY
		fi
	done
}

# self_check_loop ends the instance once its record's threshold is more than
# the grace period past, once the record says terminated, or when no record
# appears within the created lifetime (a claim that crashed after launching).
self_check_loop() {
	local booted threshold
	booted=$EPOCHSECONDS
	while :; do
		if read_record; then
			threshold=$(epoch_of "$REC_THRESHOLD" || echo '')
			if [ -z "$REC_STATE" ] && [ $((EPOCHSECONDS - booted)) -gt "$ORPHAN_TIMEOUT" ]; then
				terminate_self "no instance record ${ORPHAN_TIMEOUT}s after boot" && kill -TERM "$$"
			elif [ "$REC_STATE" = terminated ]; then
				terminate_self "its record is terminated" && kill -TERM "$$"
			elif [ -n "$threshold" ] && [ $((threshold + SELF_TERMINATION_GRACE)) -lt "$EPOCHSECONDS" ]; then
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
		# Unhealthy from now on: the claim gives up on it, and it ends itself
		# once its record expires. The beats stop before the signal, so that
		# no claim sees a fresh beat after it.
		kill "$HEARTBEAT_PID"
		wait "$HEARTBEAT_PID"
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
	read_token 'TOKEN#REGISTER' "$run_id" || return 1
	log "registering runner $INSTANCE_ID with label $run_id at $GITHUB_URL/$GITHUB_TARGET"
	"${AS_RUNNER[@]}" ./config.sh --unattended --url "$GITHUB_URL/$GITHUB_TARGET" --token "$TOKEN" \
		--name "$INSTANCE_ID" --labels "$run_id" --no-default-labels --replace --work _work || {
		log "config.sh failed"
		return 1
	}
	start_runner
}

# deregister RUN_ID removes the runner of RUN_ID from GitHub, so that no
# offline runner is left behind; a failure leaves the local configuration
# out of the way, as the next registration replaces the runner of the same
# name anyway.
deregister() {
	if [ ! -f .runner ]; then
		return 0
	fi
	if read_token 'TOKEN#REMOVE' "$1" && "${AS_RUNNER[@]}" ./config.sh remove --token "$TOKEN"; then
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
		if deregister "$run_id"; then
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
	local identity
	mkdir -p "$STATE_DIR" "$RUNNER_DIR" || exit 1
	until imds_get meta-data/instance-id && [[ $REPLY =~ ^i-[0-9a-f]+$ ]]; do
		log "waiting for the instance metadata service"
		sleep 2
	done
	INSTANCE_ID=$REPLY
	# The instance's ARN keys its agent partition, which IAM pins to it
	# (dynamodb:LeadingKeys = AGENT#${ec2:SourceInstanceARN}).
	until imds_get dynamic/instance-identity/document && identity=$REPLY && imds_get meta-data/services/partition; do
		log "waiting for the instance identity document"
		sleep 2
	done
	AGENT_PK="AGENT#arn:$REPLY:ec2:$(json_s region "$identity"):$(json_s accountId "$identity"):instance/$INSTANCE_ID"
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
	# The loops below inherit the credentials and the day's signing key:
	# none of them pays for deriving its own before its first request.
	until load_credentials; do
		sleep 2
	done
	signing_scope dynamodb
	heartbeat_loop &
	HEARTBEAT_PID=$!
	self_check_loop &
	if ! prepare; then
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
