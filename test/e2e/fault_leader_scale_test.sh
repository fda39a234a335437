#!/usr/bin/env bash
# fault_leader_scale_test.sh - a leader killed in the middle of a claim
# burst, at scale, on fake nodes (KWOK): two --leader-elect replicas, a
# warm pool of N (LEADER_SCALE_TEAMS, 150 in make test; 1,000 for the figure
# in docs/reliability.md), N teams asking within 10 s (ten batches), and
# SIGKILL of the leader after the third batch. Asserted:
#   - the follower's caches were synced before it led (its log says "caches
#     synced" before "became leader"), so a takeover starts from a warm cache;
#   - no claim is lost or doubled: every team's Challenge ends Running in a
#     namespace labelled for it alone, every team was served from the pool
#     (the first leader's claims start a refill, so the new leader may serve
#     from refilled instances too), and the pool refills to N;
#   - a quiet takeover (SIGTERM of the leader once all is Running) re-applies
#     nothing already right: the new leader's first pass over N teams and N
#     warm instances makes fewer than N/2 PATCHes, where applying every
#     instance again would take ten per instance (the applied digest stamped
#     on the server, operators/ctf/core/applied.c);
#   - no Forbidden with the least-privilege RBAC.
# Printed (not asserted: timing is a benchmark's business): from the kill
# to the follower leading (bounded by the Lease, 15 s), from leading to its
# first reconcile, from leading to every team Running, and the writes
# (PATCH, PUT, POST) the new leader made until then.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init fault-leader-scale
N=${LEADER_SCALE_TEAMS:-150}
MAX=$((N * 3)) # warm + claimed + the refill, with room to spare

pool_field() { kc get chaldef "${2:-warmweb}" -o "jsonpath={.status.pool.$1}"; }
claimed_count() {
    k get ns -l 'ctf.kopc.io/definition=warmweb,ctf.kopc.io/challenge' -o name | grep -c . || true
}
writes() { metric "$1" '^rest_client_requests_total\{.*method="(PATCH|PUT|POST)"'; }
now_ms() { date +%s%3N; }
export -f pool_field claimed_count k kc
export KUBECTL DIR

log "a devcluster, two replicas, a warm pool of $N"
cluster_up
start_op a "" --leader-elect --max-instances "$MAX" --max-instances-per-team 2
start_op b "" --leader-elect --max-instances "$MAX" --max-instances-per-team 2
wait_for 60 "one leader" leader_of a b
first=$(leader_of a b)
second=$([ "$first" = a ] && echo b || echo a)
kc get chaldef web -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': 'warmweb', 'namespace': 'ctf'}
o.pop('status', None)
o['spec']['pool'] = {'min': $N}
print(json.dumps(o))" | k apply -f - >/dev/null
wait_for $((120 + N / 2)) "$N warm instances Ready" bash -c "[ \"\$(pool_field ready)\" = $N ]"
k get ns -l 'ctf.kopc.io/definition=warmweb,ctf.kopc.io/pool,!ctf.kopc.io/challenge' \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort >"$WORK/warm-before"
[ "$(wc -l <"$WORK/warm-before")" = "$N" ] || fail "not $N warm namespaces"
ok "$first leads, $second follows; a pool of $N is Ready"

log "$N teams within 10 s (ten batches); SIGKILL of the leader $first after the third"
seq -f 'burst-%03g' 1 "$N" >"$WORK/want"
for b in $(seq 0 9); do
    challenges burst $((b * N / 10 + 1)) $(((b + 1) * N / 10)) warmweb >"$WORK/b$b.yaml"
done
(for b in $(seq 0 9); do
    apply_retrying "$WORK/b$b.yaml" || exit 1
    touch "$WORK/b$b.sent"
    sleep 1
done) &
loader=$!
wait_for 120 "three batches sent" test -e "$WORK/b2.sent"
writes_before=$(writes "$second")
t_kill=$(now_ms)
stop_op "$first" KILL
at_kill=$(claimed_count)
[ "$at_kill" -lt "$N" ] || fail "all $N were claimed before the kill: the kill fell outside the burst"
t_lead=""
t_first=""
end=$((SECONDS + 120))
while [ -z "$t_first" ]; do
    [ $SECONDS -lt $end ] || fail "$second did not lead and reconcile within 120 s of the kill"
    if [ -z "$t_lead" ] && is_leader "$second"; then t_lead=$(now_ms); fi
    if [ -n "$t_lead" ] && [ "$(metric "$second" '^controller_runtime_reconcile_total')" -gt 0 ]; then
        t_first=$(now_ms)
    fi
    sleep 0.1
done
wait "$loader" || fail "the load was refused"
ok "killed with $at_kill of $N claimed; $second leads"
wait_for 600 "every team Running under $second" check converged --expect "$WORK/want" --pool warmweb="$N"
t_done=$(now_ms)
new_writes=$(($(writes "$second") - writes_before))
printf '    kill -> %s leads: %d ms (Lease 15 s + retry 2 s at most)\n' "$second" $((t_lead - t_kill))
printf '    leading -> first reconcile: %d ms\n' $((t_first - t_lead))
printf '    leading -> all %d teams Running, pool refilled: %d ms, %d writes by the new leader\n' \
    "$N" $((t_done - t_lead)) "$new_writes"

claims_logged() { grep -c 'claimed a warm instance' "$WORK/$1.log" || true; }
by_second=$(claims_logged "$second")
[ "$by_second" -gt 0 ] || fail "$second claimed nothing: the kill fell after the burst"
ok "the new leader $second made $by_second of the claims, $at_kill were made before the kill"

log "warm: the follower's caches were synced before it led"
synced=$(grep -n -m1 'caches synced' "$WORK/$second.log" | cut -d: -f1)
became=$(grep -n -m1 'became leader' "$WORK/$second.log" | cut -d: -f1)
[ -n "$synced" ] && [ -n "$became" ] || fail "$second's log lacks 'caches synced' or 'became leader'"
[ "$synced" -lt "$became" ] || fail "$second synced its caches after it became leader (cold takeover)"
ok "$second synced its caches (log line $synced) before it led (line $became)"

log "no claim lost or doubled"
check converged --expect "$WORK/want" --pool warmweb="$N" || fail "not converged"
python3 - "$N" <<'PY' || fail "a claim was lost or doubled"
import json, os, subprocess, sys
def get(*a):
    out = subprocess.run([os.environ["KUBECTL"], "--kubeconfig", os.environ["DIR"] + "/kubeconfig",
                          *a, "-o", "json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["items"]
want = int(sys.argv[1])
chals = {c["metadata"]["name"]: c["status"].get("namespace") for c in get("-n", "ctf", "get", "chal")}
claimed = get("get", "ns", "-l", "ctf.kopc.io/challenge")
bad, per_owner = [], {}
for n in claimed:
    per_owner.setdefault(n["metadata"]["labels"]["ctf.kopc.io/challenge"], []).append(n)
for owner, spaces in sorted(per_owner.items()):
    if len(spaces) != 1:
        bad.append(f"{owner} holds {len(spaces)} namespaces: {[s['metadata']['name'] for s in spaces]}")
pooled = [n for n in claimed if "ctf.kopc.io/pool" in n["metadata"]["labels"]]
for n in pooled:
    owner = n["metadata"]["labels"]["ctf.kopc.io/challenge"]
    if chals.get(owner) != n["metadata"]["name"]:
        bad.append(f"warm {n['metadata']['name']} is claimed by {owner}, whose status names {chals.get(owner)}")
print(f"served from the pool: {len(pooled)} of {len(chals)}")
if len(pooled) != want:
    bad.append(f"{want - len(pooled)} teams were built fresh beside a Ready pool of {want}")
for b in bad[:20]:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok "all $N served from the pool; each claimed warm instance names its one live Challenge; none holds two"
log "a quiet takeover re-applies nothing that is already right"
start_op "$first" "" --leader-elect --max-instances "$MAX" --max-instances-per-team 2
patches() { metric "$1" '^rest_client_requests_total\{.*method="PATCH"'; }
settled() {
    [ "$(metric "$1" '^controller_runtime_reconcile_total\{.*controller="challenge"')" -ge "$N" ] &&
        [ "$(metric "$1" '^controller_runtime_reconcile_total\{.*controller="pool"')" -ge 1 ] &&
        [ "$(metric "$1" '^workqueue_depth')" = 0 ]
}
before=$(patches "$first")
stop_op_clean "$second"
wait_for 60 "$first leads after the SIGTERM of $second" is_leader "$first"
wait_for 300 "$first's first pass over every Challenge and the pool" settled "$first"
quiet_patches=$(($(patches "$first") - before))
echo "    the new leader's first pass over $N teams and $N warm instances: $quiet_patches PATCHes"
[ "$quiet_patches" -lt $((N / 2)) ] ||
    fail "the new leader re-applied what was right: $quiet_patches PATCHes for $N unchanged teams"
check converged --expect "$WORK/want" --pool warmweb="$N" || fail "not converged after the takeover"
ok "a takeover over $N Running teams and $N warm instances: $quiet_patches PATCHes (each instance is 10 children)"
no_forbidden a b
stop_op_clean "$first"
echo "$passed passed, 0 failed ($(elapsed) s)"
