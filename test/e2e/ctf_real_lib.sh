# ctf_real_lib.sh - the CTF operator on a devcluster with a real node, for
# the scenarios whose instances must run and answer; sourced, not run.
#
# real_ctf_up starts a devcluster with one real node (no fake ones), pushes
# the sample challenges' images into its registry, installs the CRDs, the
# RBAC and the samples (config/samples, whose images are those), creates the
# API's token Secrets (an admin token and one per team in TEAMS) and runs the
# operator here, as its own service account, with its API and metrics on
# free loopback ports and NodePort endpoints on the node's address. It
# leaves, exported for ctf_real_test.py: WORK, NODE_IP, API, METRICS,
# ADMIN_TOKEN, TEAM_TOKENS (JSON team -> token), KUBECTL, KUBECONFIG, OP_LOG
# (the operator's log) and PASSED_FILE; and OP_PID.
#
# With GATEWAY_DOMAIN set, the devcluster runs the gateway (--gateway-domain:
# Traefik on the real node, reached at 127.0.0.1:GATEWAY_PORT) and the
# operator its gateway mode for that domain, its endpoints showing
# GATEWAY_PORT, its probe trusting GATEWAY_CA; GATEWAY_PORT, GATEWAY_CA (the
# CA to trust) and CLUSTER_CA (the apiserver's, which vouches for no
# gateway host) are exported.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
TEAMS=${TEAMS:-team-a team-b team-c}
MAX_PER_TEAM=${MAX_PER_TEAM:-3} # --max-instances-per-team
OP_PID=

# real_ctf_init NAME: the work directory (lib.sh's e2e_init) and the traps.
real_ctf_init() { e2e_init "$1" real_ctf_stop_operator; }

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/op.log" ] && { echo "--- operator log (tail)" >&2; tail -30 "$WORK/op.log" >&2; }
    real_node_logs "$DIR" >&2
    fail_summary "$*"
    exit 1
}

real_ctf_stop_operator() {
    [ -n "$OP_PID" ] && kill -9 "$OP_PID" 2>/dev/null || true
    [ -f "$WORK/op.pid" ] && kill -9 "$(cat "$WORK/op.pid")" 2>/dev/null || true
}

# start_real_operator: (re)start the operator with the flags real_ctf_up
# chose. Its command line is in $WORK/op.cmd (one argument a line) and its
# pid in $WORK/op.pid, for a scenario that restarts it itself.
start_real_operator() {
    local cmd=("$OPERATOR" --kubeconfig "$WORK/operator.kubeconfig" --metrics-bind "127.0.0.1:$METRICS_PORT"
        --api-bind "127.0.0.1:$API_PORT" --node-address "$NODE_IP" --api-heartbeat 1
        --max-instances-per-team "$MAX_PER_TEAM" -v 1)
    if [ -n "${GATEWAY_DOMAIN:-}" ]; then
        cmd+=(--gateway-domain "$GATEWAY_DOMAIN" --gateway-port "$GATEWAY_PORT")
        # Running waits until the gateway serves the host (controller/probe.h),
        # its certificate checked against the gateway's CA; GATEWAY_PROBE=0
        # runs without, to see what Accepted alone gives.
        [ "${GATEWAY_PROBE:-1}" = 0 ] ||
            cmd+=(--gateway-probe-address "127.0.0.1:$GATEWAY_PORT" --gateway-probe-ca "$GATEWAY_CA")
    fi
    printf '%s\n' "${cmd[@]}" >"$WORK/op.cmd"
    "${cmd[@]}" >>"$WORK/op.log" 2>&1 &
    OP_PID=$!
    echo "$OP_PID" >"$WORK/op.pid"
    wait_for 60 "the operator to be ready" curl -sf "$METRICS/readyz"
}

# stop_real_operator: SIGTERM the operator (whichever started it last), which
# must exit cleanly.
stop_real_operator() {
    local pid
    pid=$(cat "$WORK/op.pid" 2>/dev/null || true)
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    if [ "$pid" = "$OP_PID" ]; then
        wait "$OP_PID" || fail "the operator's exit code was $? after SIGTERM"
    else
        wait_for 40 "the operator to exit" bash -c "! kill -0 $pid 2>/dev/null"
    fi
    OP_PID=
    rm -f "$WORK/op.pid"
}

real_ctf_up() {
    local gw=()
    [ -z "${GATEWAY_DOMAIN:-}" ] || gw=(--gateway-domain "$GATEWAY_DOMAIN")
    "$DEVCLUSTER" start --dir "$DIR" --nodes 0 --real-nodes 1 "${gw[@]}" >/dev/null ||
        fail "devcluster start --real-nodes 1 ${gw[*]}"
    if [ -n "${GATEWAY_DOMAIN:-}" ]; then
        GATEWAY_PORT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gatewayPort"])' "$DIR/devcluster.json")
        GATEWAY_CA=$DIR/gateway/ca.crt
        CLUSTER_CA=$DIR/ca.crt
        export GATEWAY_DOMAIN GATEWAY_PORT GATEWAY_CA CLUSTER_CA
    fi
    NODE_IP=$(k get node real-node-0 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    "$SRC/tools/images.sh" "$DIR" greeter webflag >/dev/null || fail "tools/images.sh"
    ctf_rbac_and_samples
    ctf_token_secrets $TEAMS
    sa_kubeconfig "$WORK/operator.kubeconfig"
    API_PORT=$(free_port)
    METRICS_PORT=$(free_port)
    while [ "$METRICS_PORT" = "$API_PORT" ]; do METRICS_PORT=$(free_port); done
    API=http://127.0.0.1:$API_PORT
    METRICS=http://127.0.0.1:$METRICS_PORT
    start_real_operator
    export WORK API METRICS ADMIN_TOKEN TEAM_TOKENS NODE_IP KUBECTL
    export KUBECONFIG=$DIR/kubeconfig OP_LOG=$WORK/op.log PASSED_FILE=$WORK/passed
    synced() { curl -sf -H @- "$API/api/v1/challenges" <<<"Authorization: Bearer $ADMIN_TOKEN" | grep -q '"nc"'; }
    wait_for 60 "the API's caches to sync" synced
}
