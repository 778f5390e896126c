# Sourced by the demo and CI: start the AWS emulator on 127.0.0.1:4566 unless
# something already listens there. It is moto with DynamoDB requests
# serialized, so conditional writes are atomic as in real DynamoDB.
EMULATOR_PORT=${EMULATOR_PORT:-4566}
EMULATOR_PID=

emulator_up() { (exec 3<>"/dev/tcp/127.0.0.1/$EMULATOR_PORT") 2>/dev/null; }

start_emulator() {
  if emulator_up; then
    echo "Using the AWS emulator already listening on 127.0.0.1:$EMULATOR_PORT"
    return
  fi
  local root log
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  log=$(mktemp -t ec2runners-emulator.XXXXXX.log)
  MOTO_ACCOUNT_ID=000000000000 "${EC2RUNNERS_PYTHON:-python3}" "$root/internal/testworld/emulator/serialized_moto.py" \
    -H 127.0.0.1 -p "$EMULATOR_PORT" >"$log" 2>&1 &
  EMULATOR_PID=$!
  for _ in $(seq 1 150); do
    emulator_up && { echo "Started the AWS emulator on 127.0.0.1:$EMULATOR_PORT (log: $log)"; return; }
    kill -0 "$EMULATOR_PID" 2>/dev/null || break
    sleep 0.2
  done
  echo "The AWS emulator did not start; its log ($log):" >&2
  cat "$log" >&2
  return 1
}

stop_emulator() {
  [ -n "$EMULATOR_PID" ] && kill "$EMULATOR_PID" 2>/dev/null && wait "$EMULATOR_PID" 2>/dev/null
  EMULATOR_PID=
  return 0
}
