#!/usr/bin/env bash
# fault_sigkill_test.sh - 500 create/delete operations on Challenges (300
# creations, 200 deletions of Challenges created before, in a random order
# from a printed seed, ten at a time), while the operator is killed with
# SIGKILL at random points (every 2 to 8 s) and restarted at once each time,
# from the first operation until 30 s after the last, so kills land in the
# middle of creations, finalizers, namespace deletions and start-ups. Then
# one last operator runs undisturbed, and the final state must match the
# requests exactly:
#   - the 100 Challenges created and not deleted exist, each Running with
#     exactly one namespace; no other Challenge exists;
#   - the 200 deleted ones are gone, and so are their namespaces: no orphan;
#   - no Forbidden in any of the operator's lives.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init fault-sigkill
SEED=${SEED:-$RANDOM}
CREATES=${SIGKILL_CREATES:-300}
DELETES=${SIGKILL_DELETES:-200}

log "cluster, the operator; the plan of $((CREATES + DELETES)) operations (seed $SEED)"
cluster_up
start_op kill
python3 - "$SEED" "$CREATES" "$DELETES" "$WORK" <<'PY'
import random, sys
seed, creates, deletes, work = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = random.Random(seed)
made, alive, deleted, ops = 0, [], [], []
while made < creates or len(deleted) < deletes:
    c_left, d_left = creates - made, deletes - len(deleted)
    if alive and d_left and rng.random() < d_left / (c_left + d_left):
        n = alive.pop(rng.randrange(len(alive)))
        deleted.append(n)
        ops.append(("delete", n))
    else:
        made += 1
        n = f"k-{made:03d}"
        alive.append(n)
        ops.append(("create", n))
# Rounds of ten operations: creations applied first, then deletions.
with open(f"{work}/plan", "w") as f:
    for i in range(0, len(ops), 10):
        rnd = ops[i:i + 10]
        f.write(" ".join(f"{o[0][0]}:{o[1]}" for o in rnd) + "\n")
open(f"{work}/want", "w").write("".join(n + "\n" for n in sorted(alive)))
open(f"{work}/deleted", "w").write("".join(n + "\n" for n in sorted(deleted)))
PY
[ "$(wc -l <"$WORK/want")" = $((CREATES - DELETES)) ] || fail "bad plan"

# run_plan: each round's creations in one apply, then its deletions.
run_plan() {
    local line op n creates deletes
    while read -r line; do
        creates=() deletes=()
        for op in $line; do
            n=${op#*:}
            if [ "${op%%:*}" = c ]; then creates+=("$n"); else deletes+=("$n"); fi
        done
        if [ ${#creates[@]} -gt 0 ]; then
            for n in "${creates[@]}"; do
                printf -- '---\napiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: %s, namespace: ctf}\nspec: {definition: web, team: %s}\n' "$n" "$n"
            done | k apply -f - >/dev/null || exit 1
        fi
        if [ ${#deletes[@]} -gt 0 ]; then
            kc delete chal "${deletes[@]}" --wait=false >/dev/null || exit 1
        fi
        sleep 0.5
    done <"$WORK/plan"
}

log "the operations, and SIGKILLs at random points"
run_plan &
planner=$!
kills=0
tail_end=
while :; do
    sleep "$(python3 -c "import random; print(round(random.uniform(2, 8), 2))")"
    kill -9 "${OP_PID[kill]}" 2>/dev/null || fail "the operator was not running when its turn to die came"
    wait "${OP_PID[kill]}" 2>/dev/null || true
    kills=$((kills + 1))
    echo "=== SIGKILL $kills" >>"$WORK/kill.log"
    spawn_op kill
    if [ -z "$tail_end" ] && ! kill -0 "$planner" 2>/dev/null; then
        wait "$planner" || fail "an operation was refused"
        tail_end=$((SECONDS + 30))
    fi
    [ -n "$tail_end" ] && [ $SECONDS -ge "$tail_end" ] && break
done
ok "$((CREATES + DELETES)) operations done; the operator was killed $kills times"
[ $kills -ge 8 ] || fail "only $kills kills"

log "the final state matches the requests"
wait_for 60 "the last operator ready" op_ready kill
wait_for 480 "convergence" check converged --expect "$WORK/want" --absent "$WORK/deleted"
check converged --expect "$WORK/want" --absent "$WORK/deleted" || fail "not converged (seed $SEED)"
no_forbidden kill
stop_op_clean kill
ok "$((CREATES - DELETES)) Running with one namespace each, $DELETES gone with their namespaces"

echo "$passed passed, 0 failed ($(elapsed) s)"
