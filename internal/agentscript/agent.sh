# The agent: the instance half of the ec2runners pool protocol
# (docs/guides/protocol.md). Run by cloud-init as user data, it installs
# itself as the systemd service ec2runners-agent, which runs "agent run" at
# every boot: heartbeat, self-termination past the threshold (or a stop,
# in the pool's stopped tier, until a claim starts the instance again), and
# for every run id the pool assigns: register a GitHub runner labelled with
# it, wait for the release, deregister, and wait for the next run.
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

# The agent's own items live in the partition AGENT#<its instance ARN>,
# which the instance role's policy pins to the instance
# (dynamodb:LeadingKeys = AGENT#${ec2:SourceInstanceARN}): it can write no
# other instance's heartbeat or signal, and read no other's tokens.
agent_key() { printf '"PK":{"S":"AGENT#%s"},"SK":{"S":"%s"}' "$INSTANCE_ARN" "$1"; }

# put_agent_item SK ENTITY_TYPE VALUE: writes the agent item SK with VALUE
# (DynamoDB JSON) and a TTL a day ahead, so that the table forgets it once
# the agent is gone.
put_agent_item() {
	ddb PutItem "{\"TableName\":\"$POOL\",\"Item\":{$(agent_key "$1"),\"entityType\":{\"S\":\"$2\"},\"identifier\":{\"S\":\"$INSTANCE_ID\"},\"updatedAt\":{\"S\":\"$(now_ts)\"},\"expiresAt\":{\"N\":\"$((EPOCHSECONDS + 86400))\"},\"value\":$3}}"
}

heartbeat() { put_agent_item HEARTBEAT HEARTBEAT '{"S":"PING"}'; }

# signal STATE RUN_ID: the worker signal the claim waits for.
signal() {
	log "signal $1 for run $2"
	until put_agent_item SIGNAL WS "{\"M\":{\"state\":{\"S\":\"$1\"},\"runId\":{\"S\":\"$2\"}}}"; do
		sleep 1
	done
}

# read_record: the instance's own record into REC_STATE, REC_RUN_ID,
# REC_THRESHOLD and REC_STOP_UNTIL (all empty when there is no record).
read_record() {
	ddb GetItem "{\"TableName\":\"$POOL\",\"Key\":{\"PK\":{\"S\":\"TYPE#INSTANCE\"},\"SK\":{\"S\":\"ID#$INSTANCE_ID\"}},\"ConsistentRead\":true,\"ProjectionExpression\":\"#s, runId, threshold, stopUntil\",\"ExpressionAttributeNames\":{\"#s\":\"state\"}}" || return 1
	REC_STATE=$(attr_s state "$REPLY")
	REC_RUN_ID=$(attr_s runId "$REPLY")
	REC_THRESHOLD=$(attr_s threshold "$REPLY")
	REC_STOP_UNTIL=$(attr_s stopUntil "$REPLY")
}

# read_token KIND RUN_ID: the token (KIND REGISTER or REMOVE) a claim or a
# release left for this instance, into TOKEN, if it was left for RUN_ID and
# this agent's GitHub target and stays valid for another minute.
read_token() {
	local run target expires
	TOKEN=''
	ddb GetItem "{\"TableName\":\"$POOL\",\"Key\":{$(agent_key "TOKEN#$1")},\"ConsistentRead\":true}" || return 1
	run=$(attr_s runId "$REPLY")
	target=$(attr_s target "$REPLY")
	expires=$(attr_s expires_at "$REPLY")
	if [ "$run" != "$2" ] || [ "$target" != "$GITHUB_TARGET" ]; then
		return 1
	fi
	if [ "$(epoch_of "$expires" || echo 0)" -lt $((EPOCHSECONDS + 60)) ]; then
		log "the $1 token for run $2 expired at $expires"
		return 1
	fi
	TOKEN=$(attr_s token "$REPLY")
	[ -n "$TOKEN" ]
}

# await_token KIND RUN_ID: read_token, retried for a while: the claim or
# release writes the token before the run id reaches this instance, so it
# is normally there at once.
await_token() {
	local deadline=$((EPOCHSECONDS + TOKEN_WAIT))
	until read_token "$1" "$2"; do
		if [ "$EPOCHSECONDS" -ge "$deadline" ]; then
			log "no usable $1 token for run $2 and $GITHUB_TARGET within ${TOKEN_WAIT}s: configure the provider's github block"
			return 1
		fi
		sleep 1
	done
}

# ---------------------------------------------------------------- EC2

# ec2_self ACTION: the EC2 ACTION (TerminateInstances, StopInstances) on
# this instance, the only one the instance role allows it on.
ec2_self() {
	aws_post ec2 "$EC2_URL" 'application/x-www-form-urlencoded; charset=utf-8' "Action=$1&InstanceId.1=$INSTANCE_ID&Version=2016-11-15"
}

# terminate_self REASON terminates this instance, and ends the agent.
terminate_self() {
	log "terminating this instance: $1"
	ec2_self TerminateInstances && kill -TERM "$$"
}

# stop_self REASON stops this instance into the pool's stopped tier: EC2
# keeps its disk (the runner installed, the instance prepared), and a claim
# starts it again. When EC2 does not stop it (a Spot instance: EC2 answers
# UnsupportedOperation, logged by aws_post), it terminates, as it would
# without a stopped tier.
stop_self() {
	log "stopping this instance: $1"
	ec2_self StopInstances || terminate_self "StopInstances failed"
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
# the grace period past (past_threshold), once the record says terminated,
# or when no record appears within the created lifetime (a claim that
# crashed after launching).
self_check_loop() {
	local booted=$EPOCHSECONDS threshold
	while :; do
		if read_record; then
			threshold=$(epoch_of "$REC_THRESHOLD" || echo '')
			if [ -z "$REC_STATE" ] && [ $((EPOCHSECONDS - booted)) -gt "$ORPHAN_TIMEOUT" ]; then
				terminate_self "no instance record ${ORPHAN_TIMEOUT}s after boot"
			elif [ "$REC_STATE" = terminated ]; then
				terminate_self "its record is terminated"
			elif [ -n "$threshold" ] && [ $((threshold + SELF_TERMINATION_GRACE)) -lt "$EPOCHSECONDS" ]; then
				past_threshold "$booted"
			fi
		fi
		sleep "$SELF_CHECK_INTERVAL"
	done
}

# past_threshold BOOTED: the record read last is past its threshold. A runner
# of the stopped tier stops, once this start of the agent is ready (prepare):
# a stopped fill must have reported its preparation first, and a claim that
# starts it must find it prepared. Until then it waits, unless it booted
# more than the created lifetime ago (its preparation hangs, or failed).
# Any other runner terminates.
past_threshold() {
	if ! in_stopped_tier; then
		terminate_self "state $REC_STATE expired at $REC_THRESHOLD"
	elif [ -f "$STATE_DIR/ready" ]; then
		# A claim may have taken the runner since the last read: stop only
		# if its record, read again, still says so.
		if read_record && in_stopped_tier; then
			stop_self "idle in the stopped tier until $REC_STOP_UNTIL"
		fi
	elif [ $((EPOCHSECONDS - $1)) -gt "$ORPHAN_TIMEOUT" ]; then
		terminate_self "not prepared ${ORPHAN_TIMEOUT}s after boot"
	fi
}

# in_stopped_tier: the record read last keeps the runner in the pool's
# stopped tier (protocol.Instance.Stopped): idle, unowned, its stopped time
# (stopUntil) still ahead.
in_stopped_tier() {
	local end
	[ "$REC_STATE" = idle ] && [ -z "$REC_RUN_ID" ] && [ -n "$REC_STOP_UNTIL" ] &&
		end=$(epoch_of "$REC_STOP_UNTIL") && [ "$end" -gt "$EPOCHSECONDS" ]
}

# ---------------------------------------------------------------- the wall between jobs and the pool
#
# Jobs are untrusted code, run as RUNNER_USER on a machine the pool hands to
# the next run. They must not reach the instance's credentials (the metadata
# service), this agent's state or tokens, the runner installation, or
# anything of a later run.

RUNNER_UID=''
RUNNER_HOME=''

# ensure_runner_user creates the unprivileged user jobs run as.
ensure_runner_user() {
	local group
	if ! id -u "$RUNNER_USER" >/dev/null 2>&1; then
		useradd --create-home --user-group --shell /bin/bash "$RUNNER_USER" || return 1
	fi
	RUNNER_UID=$(id -u "$RUNNER_USER")
	RUNNER_HOME=$(getent passwd "$RUNNER_USER" | cut -d: -f6)
	if [ "$RUNNER_UID" = 0 ] || [ -z "$RUNNER_HOME" ] || [ "$RUNNER_HOME" = / ]; then
		log "the runner user $RUNNER_USER must be an unprivileged user with a home of its own"
		return 1
	fi
	for group in $(id -Gn "$RUNNER_USER"); do
		case $group in
		root | sudo | wheel | admin | adm | docker | lxd | disk)
			log "warning: the runner user is in group $group, which gives jobs root: they can reach everything this agent protects (see the guide Runner security)"
			;;
		esac
	done
}

# block_metadata keeps the runner user's processes away from the instance
# metadata service, which hands out the instance role's credentials: one
# owner-matched firewall rule each for IPv4 and IPv6. Without a firewall
# the instance does not serve, unless jobs may reach the metadata service.
block_metadata() {
	local v4=169.254.169.254 v6=fd00:ec2::254
	local rule=(-m owner --uid-owner "$RUNNER_UID" -j REJECT)
	if [ "$JOBS_METADATA_ACCESS" = true ]; then
		log "jobs may reach the instance metadata service, and with it the instance role (jobs_metadata_access)"
		return 0
	fi
	if ! command -v nft >/dev/null && ! command -v iptables >/dev/null; then
		# Stock Amazon Linux 2023 ships neither.
		log "installing nftables"
		{ command -v dnf >/dev/null && dnf -y -q install nftables; } ||
			{ command -v apt-get >/dev/null && apt-get -y -qq install nftables; } >/dev/null 2>&1
	fi
	if command -v iptables >/dev/null && command -v ip6tables >/dev/null; then
		iptables -C OUTPUT -d "$v4" "${rule[@]}" 2>/dev/null || iptables -I OUTPUT -d "$v4" "${rule[@]}" || return 1
		ip6tables -C OUTPUT -d "$v6" "${rule[@]}" 2>/dev/null || ip6tables -I OUTPUT -d "$v6" "${rule[@]}" || return 1
	elif command -v nft >/dev/null; then
		if ! nft list table inet ec2runners >/dev/null 2>&1; then
			printf '%s\n' 'table inet ec2runners {' '	chain output {' \
				'		type filter hook output priority filter; policy accept;' \
				"		meta skuid $RUNNER_UID ip daddr $v4 reject" \
				"		meta skuid $RUNNER_UID ip6 daddr $v6 reject" '	}' '}' | nft -f - || return 1
		fi
	else
		log "neither iptables nor nft is installed: cannot keep jobs away from the instance metadata service"
		return 1
	fi
	log "jobs are kept away from the instance metadata service"
}

# hide_processes lets every user see only their own processes in /proc, so
# that jobs see nothing of this agent's (no secret is ever in a program's
# arguments either; this is a second wall).
hide_processes() {
	mount -o remount,hidepid=invisible /proc 2>/dev/null || mount -o remount,hidepid=2 /proc 2>/dev/null ||
		log "warning: /proc cannot be remounted with hidepid; jobs can list the agent's processes"
}

# end_jobs kills every process of the runner user, however it detached
# (setsid, nohup, a double fork), until none is left.
end_jobs() {
	local round
	for round in 1 2 3 4 5 6 7 8 9; do
		pkill -KILL -U "$RUNNER_UID" 2>/dev/null
		pgrep -U "$RUNNER_UID" >/dev/null || return 0
		sleep "0.$round"
	done
	log "processes of $RUNNER_USER survive: $(pgrep -a -U "$RUNNER_UID" | tr '\n' ';')"
	return 1
}

# wipe_jobs removes everything the runner user can have left for the next
# run: its processes, its home (the run's runner copy and work directory
# included), its files in the shared temporary directories, its System V
# IPC objects, its cron and at jobs, and the containers of a Docker daemon.
wipe_jobs() {
	local kind id
	end_jobs || return 1
	find /tmp /var/tmp /dev/shm -xdev -user "$RUNNER_UID" -delete 2>/dev/null
	for kind in m q s; do
		for id in $(ipcs -"$kind" 2>/dev/null | awk -v u="$RUNNER_USER" '$3 == u { print $2 }'); do
			ipcrm -"$kind" "$id" 2>/dev/null
		done
	done
	if command -v crontab >/dev/null; then crontab -r -u "$RUNNER_USER" 2>/dev/null; fi
	if command -v atq >/dev/null; then
		for id in $(atq 2>/dev/null | awk -v u="$RUNNER_USER" '$NF == u { print $1 }'); do atrm "$id"; done
	fi
	if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
		docker ps --all --quiet | xargs -r docker rm --force --volumes >/dev/null
	fi
	rm -rf --one-file-system "$RUNNER_HOME" &&
		install -d -m 0700 -o "$RUNNER_USER" -g "$(id -g "$RUNNER_USER")" "$RUNNER_HOME" || return 1
	if [ -d /etc/skel ]; then
		cp -RT /etc/skel "$RUNNER_HOME" && chown -R "$RUNNER_USER:" "$RUNNER_HOME"
	fi
}

# ---------------------------------------------------------------- the runner

RUNNER_PID=''
RUN_DIR=''
AS_RUNNER=()

# install_runner unpacks the GitHub runner once, owned by root and written
# by no one else, and records its checksums: every run gets a copy of it
# (install_run_dir), and it is checked before every registration.
install_runner() {
	local url=$RUNNER_DOWNLOAD_URL arch archive sum
	if [ -f "$STATE_DIR/runner.sha256" ]; then
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
	log "installing the GitHub runner from $url"
	archive="$STATE_DIR/runner.tar.gz"
	curl -fsSL --retry 5 --max-time 600 -o "$archive" "$url" || { log "cannot download $url"; return 1; }
	if [ -n "${RUNNER_SHA256:-}" ]; then
		sum=$(sha256sum "$archive")
		if [ "${sum%% *}" != "$RUNNER_SHA256" ]; then
			log "the runner archive's SHA-256 is ${sum%% *}, not $RUNNER_SHA256: not installed"
			return 1
		fi
	fi
	rm -rf "$RUNNER_DIR"
	# Every directory above the installation stays open to the runner user,
	# whatever this agent's umask.
	if ! (umask 022 && mkdir -p "$RUNNER_DIR") || ! tar -xzf "$archive" -C "$RUNNER_DIR" --no-same-owner; then
		log "cannot unpack $url"
		return 1
	fi
	rm -f "$archive"
	if [ -x "$RUNNER_DIR/bin/installdependencies.sh" ]; then
		"$RUNNER_DIR/bin/installdependencies.sh" >/dev/null || log "the runner's installdependencies.sh failed; continuing"
	fi
	chown -R root:root "$RUNNER_DIR" && chmod -R go-w,a+rX "$RUNNER_DIR" || return 1
	(cd "$RUNNER_DIR" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$STATE_DIR/runner.sha256.new" &&
		mv "$STATE_DIR/runner.sha256.new" "$STATE_DIR/runner.sha256"
}

# check_runner: the installation is still what was installed: root's,
# writable by no one else, every file with its checksum.
check_runner() {
	if [ -n "$(find "$RUNNER_DIR" \( ! -user root -o -perm /022 \) -print -quit)" ]; then
		log "the runner installation has files not owned by root, or writable by others"
		return 1
	fi
	if ! (cd "$RUNNER_DIR" && sha256sum --quiet --strict --check "$STATE_DIR/runner.sha256") >/dev/null; then
		log "the runner installation differs from what was installed"
		return 1
	fi
}

# install_run_dir DIR makes DIR, in the runner user's home, a runner
# directory of its own: the installation's files hard-linked (still root's
# and read-only: a job can replace one in this copy, never in the
# installation) in directories the runner can write its configuration and
# work in. It goes with the home at release. Called only while no process
# of the runner user runs, so nothing can swap DIR for a link meanwhile.
install_run_dir() {
	rm -rf --one-file-system "$1"
	cp -al "$RUNNER_DIR" "$1" 2>/dev/null || cp -a "$RUNNER_DIR" "$1" || return 1
	find "$1" -type d -exec chown "$RUNNER_USER:" {} + -exec chmod 0755 {} +
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

# raise_walls puts the wall between jobs and the pool up: the runner user,
# /proc with hidepid, the firewall rule, no process of the runner user. The
# agent does it at every start, before anything else: mount options and
# firewall rules do not survive a stop and start of the instance.
raise_walls() {
	hide_processes
	ensure_runner_user && block_metadata && end_jobs
}

# prepare WALLS (up or down) sets the instance up once (the runner
# installed, the pre-runner script run) and, at every start, tells whoever
# waits on the InitialRunId (a claim of a fleet instance, the fill of a
# warm slot) how that and the walls went: an earlier start may have been
# cut short before it told. A start that went well is ready (to stop, in
# the stopped tier).
prepare() {
	local outcome=UD_OK
	if [ "$1" != up ]; then
		outcome=UD_FAILED
	elif [ ! -f "$STATE_DIR/prepared" ]; then
		if install_runner && run_pre_runner_script; then
			touch "$STATE_DIR/prepared"
		else
			outcome=UD_FAILED
		fi
	fi
	if [ "$outcome" = UD_FAILED ]; then
		# Unhealthy from now on: the claim gives up on it, and it ends itself
		# once its record expires (past_threshold). The beats stop before
		# the signal, so that no claim sees a fresh beat after it.
		kill "$HEARTBEAT_PID"
		wait "$HEARTBEAT_PID"
	fi
	if [ -n "$INITIAL_RUN_ID" ]; then
		signal "$outcome" "$INITIAL_RUN_ID"
	fi
	[ "$outcome" = UD_OK ] && touch "$STATE_DIR/ready"
}

start_runner() {
	# A session of its own, so that stop_runner can stop the runner
	# gracefully first; end_jobs ends whatever escaped it.
	(cd "$RUN_DIR" && exec setsid "${AS_RUNNER[@]}" ./run.sh) &
	RUNNER_PID=$!
}

stop_runner() {
	local waited=0
	if [ -n "$RUNNER_PID" ]; then
		kill -TERM -- "-$RUNNER_PID" 2>/dev/null
		while kill -0 "$RUNNER_PID" 2>/dev/null && [ "$waited" -lt 30 ]; do
			sleep 1
			waited=$((waited + 1))
		done
		wait "$RUNNER_PID" 2>/dev/null
		RUNNER_PID=''
	fi
	end_jobs
}

# register RUN_ID registers a fresh runner for the run with the token the
# claim left, handed over in the environment variable the runner reads it
# from: never in a program's arguments.
register() {
	local run_id=$1
	await_token REGISTER "$run_id" && check_runner || return 1
	RUN_DIR="$RUNNER_HOME/runner"
	if ! wipe_jobs || ! install_run_dir "$RUN_DIR"; then
		log "cannot prepare the run's runner directory"
		return 1
	fi
	log "registering runner $INSTANCE_ID with label $run_id at $GITHUB_URL/$GITHUB_TARGET"
	if ! (cd "$RUN_DIR" && ACTIONS_RUNNER_INPUT_TOKEN=$TOKEN exec "${AS_RUNNER[@]}" ./config.sh --unattended \
		--url "$GITHUB_URL/$GITHUB_TARGET" --name "$INSTANCE_ID" --labels "$run_id" \
		--no-default-labels --replace --disableupdate --work _work); then
		log "config.sh failed"
		return 1
	fi
	start_runner
}

# deregister RUN_ID removes the run's runner from GitHub with the removal
# token the release left, so that no offline runner is left behind. The
# run's runner directory is the jobs' to change: its code is not run again.
# config.sh runs from a fresh copy of the installation, with the run's
# registration files copied by the runner user (a link there cannot make
# root read anything for it).
deregister() {
	local from=$RUN_DIR
	if [ -z "$from" ] || [ ! -f "$from/.runner" ]; then
		return 0 # never registered
	fi
	await_token REMOVE "$1" || return 1
	RUN_DIR="$RUNNER_HOME/runner-remove"
	if ! install_run_dir "$RUN_DIR" || ! (cd "$from" && exec "${AS_RUNNER[@]}" cp .runner .credentials* "$RUN_DIR/"); then
		log "cannot prepare the runner's removal"
		return 1
	fi
	if ! (cd "$RUN_DIR" && ACTIONS_RUNNER_INPUT_TOKEN=$TOKEN exec "${AS_RUNNER[@]}" ./config.sh remove); then
		log "config.sh remove failed"
		return 1
	fi
}

# ---------------------------------------------------------------- the loop

# Run ids as the provider validates them: GitHub compares labels without
# regard to case, so they are lower case.
RUN_ID_PATTERN='^[a-z0-9][a-z0-9_.-]{0,99}$'

wait_for_run_id() {
	while :; do
		if read_record && [[ $REC_RUN_ID =~ $RUN_ID_PATTERN ]]; then
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
	log "ready: waiting for a claim"
	while :; do
		wait_for_run_id
		run_id=$REC_RUN_ID
		if register "$run_id"; then
			signal UD_REG_OK "$run_id"
		else
			signal UD_REG_FAILED "$run_id"
		fi
		TOKEN=''
		wait_for_release "$run_id"
		log "released from run $run_id"
		stop_runner
		if deregister "$run_id" && wipe_jobs; then
			signal UD_REMOVE_REG_OK "$run_id"
			signal UD_REMOVE_REG_REMOVE_RUN_OK "$run_id"
		else
			signal UD_REMOVE_REG_FAILED "$run_id"
		fi
		TOKEN=''
		RUN_DIR=''
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

# identify reads the instance's id, ARN and initial run id from the metadata
# service into INSTANCE_ID, INSTANCE_ARN and INITIAL_RUN_ID.
identify() {
	local account partition
	until imds_get meta-data/instance-id && [[ $REPLY =~ ^i-[0-9a-f]+$ ]]; do
		log "waiting for the instance metadata service"
		sleep 2
	done
	INSTANCE_ID=$REPLY
	imds_get dynamic/instance-identity/document || return 1
	account=$(json_s accountId "$REPLY")
	imds_get meta-data/services/partition || return 1
	partition=$REPLY
	if ! [[ $account =~ ^[0-9]{12}$ && $partition =~ ^aws(-[a-z]+)*$ ]]; then
		log "unexpected instance identity: account '$account', partition '$partition'"
		return 1
	fi
	INSTANCE_ARN="arn:$partition:ec2:$REGION:$account:instance/$INSTANCE_ID"
	INITIAL_RUN_ID=''
	if imds_get meta-data/tags/instance/InitialRunId 2>/dev/null; then
		if [[ $REPLY =~ $RUN_ID_PATTERN ]]; then
			INITIAL_RUN_ID=$REPLY
		else
			log "ignoring the InitialRunId tag: not a run id"
		fi
	fi
}

run_agent() {
	local walls=up
	install -d -m 0700 -o root -g root "$STATE_DIR" || exit 1
	rm -f "$STATE_DIR/ready" # of the last start; prepare says when this one is
	raise_walls || walls=down
	until identify; do
		sleep 2
	done
	AS_RUNNER=(runuser -u "$RUNNER_USER" --)
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
	if ! prepare "$walls"; then
		wait
		exit 1
	fi
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

if [ "$(id -u)" != 0 ]; then
	echo "$0: the agent runs as root, as EC2 runs user data" >&2
	exit 2
fi
case ${1:-install} in
run) run_agent ;;
install) install_service ;;
*)
	echo "usage: $0 [install|run]" >&2
	exit 2
	;;
esac
