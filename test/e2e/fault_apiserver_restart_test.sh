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
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init fault-restart
COUNT=${RESTART_COUNT:-200}
BATCH=10

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
sleep 5
op_alive restart || fail "the operator died when the apiserver went away"
"$DEVCLUSTER" start --dir "$DIR" --nodes 2 --compaction-interval 5s >/dev/null || fail "devcluster start"
ok "control plane started again on the same DIR"
wait "$creator" || fail "the creator failed: $(cat "$WORK/creator.failed" 2>/dev/null)"
ok "all $COUNT Challenges accepted"

log "convergence"
seq -f 'r-%03g' 1 "$COUNT" >"$WORK/want"
wait_for 480 "$COUNT Running, one namespace each" check converged --expect "$WORK/want"
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
