#!/usr/bin/env bash
# fault_leader_test.sh - two replicas of the CTF operator with
# --leader-elect (Lease of 15 s, renewed every 2 s), as their service
# account, under load (60 Challenges created in batches meanwhile):
#   - exactly one leads; the other reconciles nothing (its
#     controller_runtime_reconcile_total stays 0 and it logs no status
#     change) while its caches stay warm;
#   - SIGKILL of the leader mid-load: the follower takes over within the
#     lease duration plus a margin (15 s + 20 s), and the restarted old
#     leader follows and reconciles nothing;
#   - SIGTERM of the new leader: it releases the Lease, exits 0, and the
#     follower takes over within the same bound;
#   - every Challenge ends Running with one namespace, deletions made after
#     the handovers are carried out; no Forbidden.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init fault-leader
BOUND=35 # lease duration 15 s + margin 20 s

reconciles() { metric "$1" '^controller_runtime_reconcile_total'; }
# quiet NAME: the replica reconciled nothing and logged no status change.
quiet() {
    [ "$(reconciles "$1")" = 0 ] || fail "follower $1 reconciled $(reconciles "$1") times"
    ! grep -q 'instance status\|reconcile failed' "$WORK/$1.log" || fail "follower $1 logged a reconcile"
}
# takeover FROM TO SIGNAL: signal FROM (the leader), time until TO leads.
takeover() {
    local t0=$SECONDS
    if [ "$3" = TERM ]; then stop_op_clean "$1"; else stop_op "$1" KILL; fi
    wait_for $((BOUND + 30)) "$2 takes the lease" is_leader "$2"
    local took=$((SECONDS - t0))
    echo "    $2 leads $took s after SIG$3 of $1"
    [ $took -le $BOUND ] || fail "takeover took $took s, more than $BOUND s"
}

log "cluster, two replicas"
cluster_up
start_op a "" --leader-elect
start_op b "" --leader-elect
wait_for 60 "one leader" leader_of a b
first=$(leader_of a b)
second=$([ "$first" = a ] && echo b || echo a)
ok "$first leads, $second follows"

log "load, and SIGKILL of the leader in the middle of it"
challenges l 1 60 >"$WORK/all.yaml"
for b in 0 1 2 3 4 5; do challenges l $((b * 10 + 1)) $((b * 10 + 10)) >"$WORK/b$b.yaml"; done
(for b in 0 1 2 3 4 5; do apply_retrying "$WORK/b$b.yaml" || exit 1; sleep 3; done) &
loader=$!
sleep 7
quiet "$second"
[ "$(reconciles "$first")" -gt 0 ] || fail "the leader $first reconciled nothing"
takeover "$first" "$second" KILL
mv "$WORK/$first.log" "$WORK/$first-first-life.log"
start_op "$first" "" --leader-elect # the old leader comes back, and follows
wait "$loader" || fail "the load was refused"
seq -f 'l-%03g' 1 60 >"$WORK/want"
wait_for 240 "60 Running under the new leader" check converged --expect "$WORK/want"
is_leader "$second" || fail "$second lost the lease"
quiet "$first"
ok "takeover after SIGKILL; the restarted replica follows and reconciles nothing"

log "SIGTERM of the leader releases the Lease"
takeover "$second" "$first" TERM
kc delete chal $(seq -f 'l-%03g' 1 10) --wait=false >/dev/null
seq -f 'l-%03g' 11 60 >"$WORK/want"
seq -f 'l-%03g' 1 10 >"$WORK/deleted"
wait_for 240 "deletions carried out by the new leader" check converged --expect "$WORK/want" --absent "$WORK/deleted"
check converged --expect "$WORK/want" --absent "$WORK/deleted" || fail "not converged"
no_forbidden a b "$first-first-life"
stop_op_clean "$first"
ok "released on SIGTERM, taken over, work carried on; no Forbidden"

echo "$passed passed, 0 failed ($(elapsed) s)"
