#!/usr/bin/env bash
# ctf_api_abuse_test.sh - the CTF operator's two HTTP servers (the instance
# API and the metrics/probe port) against hostile clients, with raw sockets
# (ctf_api_abuse_test.py): malformed request lines and headers, hundreds
# of idle and slow-dripping connections from one address and from many
# loopback addresses (127.0.0.0/8). Other clients must keep being served
# (the API's pages and reads, /healthz and /readyz), the operator's thread
# count must not follow the connection count, an idle connection is closed,
# and everything is as before once the abusers let go (issue 17, defect 2).
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
e2e_init ctf-abuse stop_processes
op_pid=
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/op.log" ] && { echo "--- operator log (tail)" >&2; tail -40 "$WORK/op.log" >&2; }
    fail_summary "$*"
    exit 1
}
stop_processes() {
    [ -n "$op_pid" ] && kill -9 "$op_pid" 2>/dev/null || true
}

log "cluster, CRDs, token Secrets, the operator with its API"
"$DEVCLUSTER" start --dir "$DIR" --nodes 1 >/dev/null || fail "devcluster start"
ctf_crds
k create namespace ctf >/dev/null
k create namespace kopc-system >/dev/null
ctf_token_secrets team-a team-b
API_PORT=$(free_port)
METRICS_PORT=$(free_port)
while [ "$METRICS_PORT" = "$API_PORT" ]; do METRICS_PORT=$(free_port); done
"$OPERATOR" --kubeconfig "$DIR/kubeconfig" --metrics-bind "127.0.0.1:$METRICS_PORT" \
    --api-bind "127.0.0.1:$API_PORT" --api-heartbeat 5 -v 0 >>"$WORK/op.log" 2>&1 &
op_pid=$!
wait_for 60 "the API to answer" curl -sf "http://127.0.0.1:$API_PORT/api/openapi.json"
ok "the operator serves the API on $API_PORT and probes on $METRICS_PORT"

echo "$passed" >"$WORK/passed"
export API_PORT METRICS_PORT OP_PID=$op_pid ADMIN_TOKEN PASSED_FILE=$WORK/passed
python3 "$SRC/test/e2e/ctf_api_abuse_test.py" || fail "ctf_api_abuse_test.py"
passed=$(cat "$WORK/passed")

kill -0 "$op_pid" 2>/dev/null || fail "the operator died"
kill -TERM "$op_pid"
wait "$op_pid" || fail "operator exit code $? after SIGTERM"
op_pid=
ok "the operator stops cleanly on SIGTERM"
echo "$passed passed, 0 failed"
