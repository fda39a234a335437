#!/usr/bin/env bash
# devcluster_ports_test.sh - a devcluster's ports stay its own (issue 27,
# item 9). New clusters start, and one restarts, while port_churn.py opens
# and closes outgoing loopback connections as fast as it can, so the
# kernel's ephemeral range (ip_local_port_range) is being handed out all
# the time. Each start must succeed, and every port the cluster chose (the
# apiserver's, etcd's client and peer ports) must lie outside that range,
# be distinct, and survive a restart unchanged.
#
# Before the fix the devcluster asked the kernel for a port (listen on :0),
# closed it, and etcd bound it seconds later: a port of the ephemeral range,
# which the churn took meanwhile, and the start failed with "bind: address
# already in use" (seen in a `make test` beside a CPU hog).
#
# The churn takes ephemeral ports machine-wide for about two minutes, so the
# test runs alone (RUN_SERIAL under ctest; beside other engineers' clusters,
# under `cluster-lock --real`, which holds every slot). One cluster is up at
# a time.
#
# ctest: alone
# Env: DEVCLUSTER, KUBECTL (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?path to devcluster}
KUBECTL=${KUBECTL:?path to kubectl}
SRC=${SRC:?repo root}
CLUSTERS=3
mkdir -p "${KOP_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/devcluster-ports.XXXXXX")
CHURN_PID=
LAST=

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    if [ -n "$LAST" ] && [ -f "$LAST/devcluster.log" ]; then
        echo "--- tail of $LAST/devcluster.log" >&2
        tail -30 "$LAST/devcluster.log" >&2
    fi
    fail_summary "$*"
    exit 1
}

cleanup() {
    [ -z "$CHURN_PID" ] || kill "$CHURN_PID" 2>/dev/null || true
    local d
    for d in "$WORK"/c*; do
        if [ -d "$d" ]; then "$DEVCLUSTER" stop --dir "$d" >/dev/null 2>&1 || true; fi
    done
    if [ "${KOP_TEST_KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

read -r EPH_LO EPH_HI </proc/sys/net/ipv4/ip_local_port_range

# ports DIR: the ports DIR's cluster chose, one per line.
ports() {
    python3 -c "
import json, sys
s = json.load(open(sys.argv[1] + '/devcluster.json'))
for k in ('apiserverPort', 'etcdPort', 'etcdPeerPort'):
    print(s[k])" "$1"
}

# start_under_churn DIR WHAT: start DIR's cluster (one fake node); it must
# come up and answer /readyz.
start_under_churn() {
    LAST=$1
    local t0=$SECONDS
    "$DEVCLUSTER" start --dir "$1" --nodes 1 >>"$WORK/start.log" 2>&1 ||
        fail "$2 did not start while outgoing connections churned: $(tail -3 "$WORK/start.log")"
    "$KUBECTL" --kubeconfig "$1/kubeconfig" --request-timeout=30s get --raw /readyz >/dev/null ||
        fail "$2 started but does not answer /readyz"
    echo "    $2 started in $((SECONDS - t0)) s, ports $(ports "$1" | tr '\n' ' ')"
}

log "churn outgoing connections over the ephemeral range $EPH_LO-$EPH_HI"
python3 "$SRC/test/e2e/port_churn.py" >"$WORK/churn.out" 2>&1 &
CHURN_PID=$!
wait_for 30 "port_churn.py ready" grep -qx ready "$WORK/churn.out"
ok "port_churn.py running (pid $CHURN_PID)"

log "$CLUSTERS new clusters while it churns"
declare -A seen
for i in $(seq "$CLUSTERS"); do
    start_under_churn "$WORK/c$i" "cluster $i"
    for p in $(ports "$WORK/c$i"); do
        if [ "$p" -ge "$EPH_LO" ] && [ "$p" -le "$EPH_HI" ]; then
            fail "cluster $i chose port $p, inside the ephemeral range $EPH_LO-$EPH_HI"
        fi
        [ -z "${seen[$p]:-}" ] || fail "port $p chosen twice (${seen[$p]} and cluster $i)"
        seen[$p]="cluster $i"
    done
    # One cluster at a time (the last stays up for the restart below).
    [ "$i" = "$CLUSTERS" ] || "$DEVCLUSTER" stop --dir "$WORK/c$i" >/dev/null || fail "stop cluster $i"
done
ok "each started, with its ports outside the ephemeral range and all distinct"

log "a restart while it churns keeps the ports"
last=$WORK/c$CLUSTERS
before=$(ports "$last")
"$DEVCLUSTER" stop --dir "$last" >/dev/null || fail "stop cluster $CLUSTERS"
start_under_churn "$last" "cluster $CLUSTERS again"
[ "$(ports "$last")" = "$before" ] || fail "the ports changed across a restart: $before -> $(ports "$last")"
ok "cluster $CLUSTERS restarted on the same ports"

kill "$CHURN_PID"
wait "$CHURN_PID" || fail "port_churn.py failed: $(cat "$WORK/churn.out")"
CHURN_PID=
stats=$(tail -1 "$WORK/churn.out")
echo "    churn: $stats"
made=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["connections"])' "$stats")
[ "$made" -ge 10000 ] || fail "the churn made only $made connections: too weak to test anything"
ok "the churn was real: $made connections"

echo "$passed passed, 0 failed"
