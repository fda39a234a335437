# fault_lib.sh - what the fault and security scenarios (fault_*_test.sh,
# ctf_isolation_test.sh, ctf_valgrind_test.sh) share on top of lib.sh;
# sourced, not run. Each scenario calls fault_init NAME first.
#
# They all run the CTF operator as its own service account with the RBAC of
# config/rbac (as ctf_lifecycle_test.sh does), so any Forbidden fails them,
# and they keep every log in $WORK until the end (KOP_TEST_KEEP=1 keeps the
# directory after the run too).
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
E2E=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
declare -A OP_PID OP_METRICS OP_API PROXY_PID PROXY_CTL
OP_WRAP=()
FAULT_T0=$SECONDS

# fault_init NAME: the work directory (lib.sh's e2e_init) and the traps.
fault_init() { e2e_init "$1" fault_stop_processes; }

# fail WORDS: say why, show the end of every operator's and proxy's log, stop.
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    local f
    for f in "$WORK"/*.log; do
        [ -f "$f" ] || continue
        printf -- '--- %s (tail)\n' "${f##*/}" >&2
        tail -25 "$f" >&2
    done
    fail_summary "$*"
    exit 1
}

fault_stop_processes() {
    local n
    for n in "${!OP_PID[@]}"; do kill -9 "${OP_PID[$n]}" 2>/dev/null || true; done
    for n in "${!PROXY_PID[@]}"; do kill "${PROXY_PID[$n]}" 2>/dev/null || true; done
}

check() { python3 "$E2E/ctf_check.py" --kubectl "$KUBECTL" --kubeconfig "$DIR/kubeconfig" "$@"; }
elapsed() { echo $((SECONDS - FAULT_T0)); }

# cluster_up [DEVCLUSTER-ARGS...]: a devcluster with the RBAC, the CRDs and
# the samples' definitions, and $WORK/operator.kubeconfig: the operator's
# service account, talking to the apiserver directly.
cluster_up() {
    "$DEVCLUSTER" start --dir "$DIR" --nodes 2 "$@" >/dev/null || fail "devcluster start"
    ctf_rbac_and_samples
    APISERVER=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
    APISERVER_HOSTPORT=${APISERVER#https://}
    sa_kubeconfig "$WORK/operator.kubeconfig"
}

# spawn_op NAME [KUBECONFIG [ARGS...]]: run an operator replica in the
# background, its log appended to $WORK/NAME.log, on ports of its own (kept
# across restarts of NAME). Set OP_WRAP (an array) to run it under a
# wrapper (valgrind).
spawn_op() {
    local name=$1 kc=${2:-$WORK/operator.kubeconfig}
    shift $(($# >= 2 ? 2 : 1))
    [ -n "${OP_METRICS[$name]:-}" ] || OP_METRICS[$name]=$(free_port)
    [ -n "${OP_API[$name]:-}" ] || OP_API[$name]=$(free_port)
    "${OP_WRAP[@]}" "$OPERATOR" --kubeconfig "$kc" --metrics-bind "127.0.0.1:${OP_METRICS[$name]}" \
        --api-bind "127.0.0.1:${OP_API[$name]}" -v 1 "$@" >>"$WORK/$name.log" 2>&1 &
    OP_PID[$name]=$!
}

# start_op NAME [KUBECONFIG [ARGS...]]: spawn_op, then wait until it is ready.
start_op() {
    spawn_op "$@"
    wait_for "${OP_READY_SECS:-60}" "operator $1 ready" op_ready "$1"
}

# stop_op_clean NAME: SIGTERM, and the replica must exit 0 within 60 s.
stop_op_clean() {
    local pid=${OP_PID[$1]} rc=0 i
    kill -TERM "$pid" 2>/dev/null || fail "operator $1 was not running"
    for i in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && { kill -9 "$pid"; fail "operator $1 still running 60 s after SIGTERM"; }
    wait "$pid" || rc=$?
    unset "OP_PID[$1]"
    [ "$rc" = 0 ] || fail "operator $1 exited with $rc after SIGTERM"
}

op_ready() { curl -sf "http://127.0.0.1:${OP_METRICS[$1]}/readyz"; }
op_alive() { kill -0 "${OP_PID[$1]}" 2>/dev/null; }

# stop_op NAME [SIGNAL]: signal the replica (default KILL) and reap it.
stop_op() {
    kill "-${2:-KILL}" "${OP_PID[$1]}" 2>/dev/null || true
    wait "${OP_PID[$1]}" 2>/dev/null || true
    unset "OP_PID[$1]"
}

# metric NAME PATTERN: the sum of the samples whose line matches the
# extended regular expression PATTERN on replica NAME's /metrics (0: none).
metric() {
    curl -sf "http://127.0.0.1:${OP_METRICS[$1]}/metrics" |
        awk -v re="$2" '!/^#/ && $0 ~ re { s += $NF } END { printf "%d\n", s }'
}

# is_leader NAME: replica NAME holds the Lease (its leader_election_master_status is 1).
is_leader() { [ "$(metric "$1" '^leader_election_master_status')" = 1 ]; }

# leader_of A B: the name of the replica that leads (fails unless exactly one).
leader_of() {
    local a b
    a=$(metric "$1" '^leader_election_master_status')
    b=$(metric "$2" '^leader_election_master_status')
    [ $((a + b)) = 1 ] || return 1
    if [ "$a" = 1 ]; then echo "$1"; else echo "$2"; fi
}

# challenges PREFIX FIRST LAST [DEFINITION]: YAML for Challenges PREFIX-NNN
# of DEFINITION (default web), each for a team of its own (team PREFIX-NNN).
challenges() {
    python3 - "$@" <<'PY'
import sys
prefix, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
definition = sys.argv[4] if len(sys.argv) > 4 else "web"
for i in range(first, last + 1):
    n = f"{prefix}-{i:03d}"
    print(f"---\napiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\n"
          f"metadata: {{name: {n}, namespace: ctf}}\nspec: {{definition: {definition}, team: {n}}}")
PY
}

# apply_retrying FILE: kubectl apply FILE until it succeeds (the apiserver
# may be down: a request that failed was not made, so it is made again).
apply_retrying() {
    local end=$((SECONDS + 300))
    until k apply -f "$1" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || return 1
        sleep 1
    done
}

# serving_cert DIR CA_CRT CA_KEY: DIR/proxy.crt and DIR/proxy.key for
# 127.0.0.1, signed by the given CA.
serving_cert() {
    local d=$1
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=faultproxy \
        -keyout "$d/proxy.key" -out "$d/proxy.csr" 2>/dev/null || fail "openssl req"
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' >"$d/proxy.ext"
    openssl x509 -req -in "$d/proxy.csr" -CA "$2" -CAkey "$3" -CAcreateserial -days 1 \
        -extfile "$d/proxy.ext" -out "$d/proxy.crt" 2>/dev/null || fail "openssl x509"
}

# start_proxy NAME [ARGS...]: faultproxy.py in front of the apiserver on a
# free port ($PROXY_PORT), its control on PROXY_CTL[NAME]; tcp mode unless
# ARGS give --cert/--key.
start_proxy() {
    local name=$1
    shift
    PROXY_PORT=$(free_port)
    PROXY_CTL[$name]=$(free_port)
    python3 "$E2E/faultproxy.py" --listen "$PROXY_PORT" --upstream "$APISERVER_HOSTPORT" \
        --control "${PROXY_CTL[$name]}" "$@" >>"$WORK/proxy-$name.log" 2>&1 &
    PROXY_PID[$name]=$!
    wait_for 20 "proxy $name up" curl -sf "http://127.0.0.1:${PROXY_CTL[$name]}/stats"
}

# proxy NAME PATH?QUERY: a control request (prints the JSON answer).
proxy() { curl -sf "http://127.0.0.1:${PROXY_CTL[$1]}$2"; }

# no_forbidden NAME...: fail when a replica's log shows a Forbidden answer.
no_forbidden() {
    local n c
    for n in "$@"; do
        c=$(grep -c 'Forbidden' "$WORK/$n.log" || true)
        [ "$c" = 0 ] || fail "operator $n met $c Forbidden answers with its least-privilege RBAC"
    done
}
