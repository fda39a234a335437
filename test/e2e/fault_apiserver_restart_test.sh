#!/usr/bin/env bash
# fault_apiserver_restart_test.sh - the control plane (etcd, apiserver and
# all: `devcluster stop` then `start` on the same DIR, which keeps the data
# and the port) goes away and comes back while 200 Challenges are being
# created, in batches of ten that are sent again until the apiserver takes
# them (a request that failed was not made). The operator, running as its
# service account, is not restarted:
#   - it stays up through the outage;
#   - its informers notice the outage, back off, reconnect, and relist when
#     the restarted apiserver no longer serves their resourceVersion (etcd
#     compacts every 5 s; whether a given informer meets 410 depends on how
#     soon it reconnects, so the deterministic 410 checks are in
#     fault_http_test.sh and test/integration/test_informer.c);
#   - all 200 reach Running, each with exactly one namespace: no duplicate,
#     no orphan;
#   - deleting 20 afterwards removes them and their namespaces, and leaves
#     the other 180 as they were; no Forbidden.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP;
# RESTART_COUNT (200) and RESTART_OUTAGE_SECS (5: the control plane's time
# down) for runs by hand.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init fault-restart
COUNT=${RESTART_COUNT:-200}
OUTAGE=${RESTART_OUTAGE_SECS:-5}
BATCH=10

# unconverged: for a timed-out wait, what is not converged, and for the
# first Challenge that is not Running, the apiserver's view of its children
# (to tell an operator that missed their events from children that never
# became ready), what the operator logged of it, and its work queue.
unconverged() {
    check converged --expect "$WORK/want" 2>&1 | head -20
    local name ns
    name=$(kc get chal -o jsonpath='{range .items[?(@.status.currentStatus!="Running")]}{.metadata.name}{"\n"}{end}' | head -1)
    [ -n "$name" ] || return 0
    ns=$(kc get chal "$name" -o jsonpath='{.status.namespace}')
    echo "--- $name: $(kc get chal "$name" -o jsonpath='{.metadata.creationTimestamp} {.status.currentStatus} {.status.reason} {.status.message}')"
    if [ -n "$ns" ]; then
        k -n "$ns" get deploy,rs,pods,endpointslices,resourcequota -o wide 2>&1
        k -n "$ns" get events --sort-by=.lastTimestamp 2>&1 | tail -8
        k -n "$ns" get deploy -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.resourceVersion} {.status}{"\n"}{end}' 2>&1
        echo "--- the control plane on $ns"
        grep -F "$ns" "$DIR/devcluster.log" | tail -8
    fi
    echo "--- the nodes"
    k get nodes 2>&1
    echo "--- the operator on $name"
    grep -F "name=$name " "$WORK/restart.log" | head -4
    grep -F "name=$name " "$WORK/restart.log" | tail -6
    echo "--- its work queues and informers"
    local wanted='workqueue_depth|workqueue_unfinished|workqueue_longest|workqueue_retries_total'
    wanted+='|rest_client_requests_total|controller_runtime_reconcile_total'
    wanted+='|controller_runtime_active_workers'
    curl -sf "http://127.0.0.1:${OP_METRICS[restart]}/metrics" | grep -E "^($wanted)" | head -30
    grep -E 'informer: (watch|list) failed|relisting' "$WORK/restart.log" | tail -12
}

log "cluster (compaction every 5 s), the operator"
cluster_up --compaction-interval 5s
start_op restart

log "$COUNT Challenges in batches of $BATCH; the control plane restarts during them"
for b in $(seq 0 $((COUNT / BATCH - 1))); do
    challenges r $((b * BATCH + 1)) $(((b + 1) * BATCH)) >"$WORK/batch-$b.yaml"
done
(
    for b in $(seq 0 $((COUNT / BATCH - 1))); do
        apply_retrying "$WORK/batch-$b.yaml" || { echo "batch $b never accepted" >"$WORK/creator.failed"; exit 1; }
        echo "$b" >"$WORK/creator.progress"
    done
) &
creator=$!
wait_for 120 "a third of the Challenges sent" bash -c "[ \"\$(cat '$WORK/creator.progress' 2>/dev/null || echo 0)\" -ge $((COUNT / BATCH / 3)) ]"
restart_at=$(date -u +%Y-%m-%dT%H:%M:%S)
"$DEVCLUSTER" stop --dir "$DIR" >/dev/null || fail "devcluster stop"
ok "control plane stopped after $(($(cat "$WORK/creator.progress") + 1)) batches"
sleep "$OUTAGE"
op_alive restart || fail "the operator died when the apiserver went away"
"$DEVCLUSTER" start --dir "$DIR" --nodes 2 --compaction-interval 5s >/dev/null || fail "devcluster start"
ok "control plane started again on the same DIR"
wait "$creator" || fail "the creator failed: $(cat "$WORK/creator.failed" 2>/dev/null)"
ok "all $COUNT Challenges accepted"

log "convergence"
seq -f 'r-%03g' 1 "$COUNT" >"$WORK/want"
WAIT_FOR_WHY=unconverged wait_for 480 "$COUNT Running, one namespace each" check converged --expect "$WORK/want"
check converged --expect "$WORK/want" || fail "not converged"
op_alive restart || fail "the operator died"
[ "$(metric restart 'ctf_instances\{status="Running"\}')" = "$COUNT" ] || fail "ctf_instances{status=Running} != $COUNT"
# The informers saw the outage, and came back (relisting where the restarted
# apiserver no longer served their version: whether it does depends on how
# soon they reconnect, before or after its first compaction).
after=$(awk -v t="$restart_at" '$1 >= t' "$WORK/restart.log")
grep -q 'informer: watch failed' <<<"$after" || fail "no informer noticed the outage"
echo "    informers: $(grep -c 'informer: watch failed' <<<"$after") failed watches logged," \
    "$(grep -c 'resourceVersion expired; relisting' <<<"$after") relists after 410 Expired"
ok "$COUNT Running, no duplicate namespace, no orphan; the informers rode out the outage"

log "deleting 20 after the restart"
kc delete chal $(seq -f 'r-%03g' 1 20) --wait=false >/dev/null
seq -f 'r-%03g' 21 "$COUNT" >"$WORK/want"
seq -f 'r-%03g' 1 20 >"$WORK/deleted"
wait_for 240 "20 deleted with their namespaces" check converged --expect "$WORK/want" --absent "$WORK/deleted"
check converged --expect "$WORK/want" --absent "$WORK/deleted" || fail "not converged after deletions"
no_forbidden restart
stop_op_clean restart
ok "deleted instances leave nothing behind; the rest untouched; no Forbidden"

echo "$passed passed, 0 failed ($(elapsed) s)"
