#!/usr/bin/env bash
# ctf_pool_race_test.sh - a warm pool under a crowd and a crashing operator,
# on fake nodes (KWOK), where what is checked is bookkeeping, not traffic:
#   - a pool of 10 becomes Ready and the definition's status and printer
#     columns say so;
#   - 50 Challenges of the pooled definition arrive at once while the
#     operator is SIGKILLed twice (right after they arrive, and once claims
#     are being written) and restarted: all 50 end Running, each in a
#     namespace of its own labelled for it alone, every one of the 10 warm
#     instances is claimed by exactly one Challenge (none lost, none
#     doubled), and the pool refills to 10;
#   - autoscale: a pool of min 1, max 4 grows by the requests it sees (an
#     Event PoolScaled, ctf_pool_target, status.pool.target);
#   - a warm instance Ready for longer than its start timeout loses its pod:
#     it waits for the new pod (its start timeout runs from that pod), is
#     not deleted as failed, and is Ready again;
#   - deleting the Challenges deletes their claimed instances (never back
#     into the pool); lowering min deletes the extra warm instances;
#     deleting the definition deletes the rest.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init ctf-pool-race
N=${POOL_RACE_CHALLENGES:-50}

# pool_field FIELD [DEFINITION]: status.pool.FIELD of DEFINITION (default warmweb).
pool_field() { kc get chaldef "${2:-warmweb}" -o "jsonpath={.status.pool.$1}"; }
# warm_ns: the unclaimed warm namespaces of warmweb, sorted.
warm_ns() {
    k get ns -l 'ctf.kopc.io/definition=warmweb,ctf.kopc.io/pool,!ctf.kopc.io/challenge' -o json |
        python3 -c "import json, sys
for n in json.load(sys.stdin)['items']:
    if not n['metadata'].get('deletionTimestamp'):
        print(n['metadata']['name'])" | sort
}
# claimed_count: Challenges that show a namespace in their status.
claimed_count() { kc get chal -o jsonpath='{range .items[*]}{.status.namespace}{"\n"}{end}' | grep -c . || true; }
export -f pool_field warm_ns claimed_count k kc
export KUBECTL DIR

log "a devcluster, the operator, a definition with a pool of 10"
cluster_up
start_op race
kc get chaldef web -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': 'warmweb', 'namespace': 'ctf'}
o.pop('status', None)
o['spec']['pool'] = {'min': 10}
print(json.dumps(o))" | k apply -f - >/dev/null
wait_for 180 "10 warm instances Ready" bash -c '[ "$(pool_field ready)" = 10 ]'
[ "$(pool_field size)" = 10 ] && [ "$(pool_field claimed)" = 0 ] && [ "$(pool_field target)" = 10 ] ||
    fail "status.pool: $(kc get chaldef warmweb -o jsonpath='{.status.pool}')"
header=$(kc get chaldef warmweb)
header=${header%%$'\n'*} # the first line (no head: it may end the pipe early)
for col in POOL READY CLAIMED; do grep -qw "$col" <<<"$header" || fail "kubectl get chaldef lacks $col: $header"; done
warm_ns >"$WORK/warm-before"
[ "$(wc -l <"$WORK/warm-before")" = 10 ] || fail "not 10 warm namespaces: $(cat "$WORK/warm-before")"
ok "a pool of 10 is Ready: status.pool and kubectl get chaldef (POOL, READY, CLAIMED) say so"

log "$N Challenges at once, the operator SIGKILLed twice"
challenges race 1 "$N" warmweb >"$WORK/race.yaml"
seq -f 'race-%03g' 1 "$N" >"$WORK/want"
k apply -f "$WORK/race.yaml" >/dev/null || fail "the Challenges were refused"
stop_op race KILL
spawn_op race
wait_for 60 "the operator ready again" op_ready race
wait_for 120 "claims being written" bash -c '[ "$(claimed_count)" -ge 5 ]'
stop_op race KILL
spawn_op race
wait_for 60 "the operator ready again" op_ready race
ok "killed once with the claims queued, once with them being written"

log "the outcome: every Challenge Running, every warm instance claimed once"
wait_for 480 "convergence" check converged --expect "$WORK/want" --pool warmweb=10
check converged --expect "$WORK/want" --pool warmweb=10 || fail "not converged"
ok "$N Running, each in a namespace labelled for it alone; the pool refilled to 10"
python3 - "$WORK/warm-before" <<'PY' || fail "a warm instance was lost or doubled"
import json, os, subprocess, sys
def get(*a):
    return json.loads(subprocess.run([os.environ["KUBECTL"], "--kubeconfig", os.environ["DIR"] + "/kubeconfig",
                                      *a, "-o", "json"], check=True, capture_output=True, text=True).stdout)["items"]
before = open(sys.argv[1]).read().split()
chals = {c["status"]["namespace"]: c["metadata"]["name"] for c in get("-n", "ctf", "get", "chal")}
nss = {n["metadata"]["name"]: n for n in get("get", "ns", "-l", "ctf.kopc.io/pool")}
bad = []
for ns in before:
    n = nss.get(ns)
    owner = (n or {}).get("metadata", {}).get("labels", {}).get("ctf.kopc.io/challenge")
    if not n or not owner or chals.get(ns) != owner:
        bad.append(f"{ns}: claimed by {owner}, Challenge with it: {chals.get(ns)}")
pooled = sum(1 for ns in chals if ns in nss)
print(f"served from the pool: {pooled} of {len(chals)} (the first 10 warm, then refills)")
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad or pooled < len(before) else 0)
PY
ok "each of the 10 warm instances is claimed by exactly one live Challenge, which names it"
no_forbidden race

log "autoscale: demand grows the pool"
kc get chaldef web -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': 'autoweb', 'namespace': 'ctf'}
o.pop('status', None)
o['spec']['pool'] = {'min': 1, 'max': 4, 'autoscale': True}
print(json.dumps(o))" | k apply -f - >/dev/null
wait_for 120 "autoweb's pool of 1 Ready" bash -c '[ "$(pool_field ready autoweb)" = 1 ]'
challenges auto 1 2 autoweb | k apply -f - >/dev/null
wait_for 120 "autoweb's target raised to 3 (min 1 + 2 requests)" bash -c '[ "$(pool_field target autoweb)" = 3 ]'
wait_for 120 "3 warm instances of autoweb Ready" bash -c '[ "$(pool_field ready autoweb)" = 3 ]'
[ "$(metric race 'ctf_pool_target\{.*definition="autoweb"')" = 3 ] || fail "ctf_pool_target of autoweb is not 3"
wait_for 30 "the PoolScaled Event" bash -c \
    "kc get events --field-selector involvedObject.name=autoweb,reason=PoolScaled -o name | grep -q ."
kc get events --field-selector involvedObject.name=autoweb,reason=PoolScaled \
    -o jsonpath='{.items[*].message}' | grep -q -- '-> 3:' || fail "no PoolScaled says -> 3"
ok "autoscale: 2 requests raise autoweb's target from 1 to 3 (status, metric, Event PoolScaled)"

log "a warm instance Ready past its start timeout loses its pod: it waits for the new one"
# The image's pods turn Ready 6 s after they are scheduled (the devcluster's kwok-slow-start);
# startTimeout 10s. The timeout used to run from the namespace's creation, so a pod lost
# later (an eviction, a restart) had the warm instance deleted as "failed to start".
kc get chaldef web -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': 'steady', 'namespace': 'ctf'}
o.pop('status', None)
o['spec']['pool'] = {'min': 1}
o['spec']['startTimeout'] = '10s'
o['spec']['pods'][0]['template']['containers'][0]['image'] = 'example.test/kwok-slow-start:1'
print(json.dumps(o))" | k apply -f - >/dev/null
wait_for 120 "steady's warm instance Ready" bash -c '[ "$(pool_field ready steady)" = 1 ]'
steady_ns=$(k get ns -l 'ctf.kopc.io/definition=steady,ctf.kopc.io/pool' -o jsonpath='{.items[0].metadata.name}')
# older_than NS SECONDS: the namespace was created more than SECONDS ago.
older_than() {
    python3 - "$(k get ns "$1" -o jsonpath='{.metadata.creationTimestamp}')" "$2" <<'PY'
import datetime, sys
made = datetime.datetime.strptime(sys.argv[1], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
sys.exit(0 if (datetime.datetime.now(datetime.timezone.utc) - made).total_seconds() > float(sys.argv[2]) else 1)
PY
}
export -f older_than
wait_for 60 "$steady_ns older than its start timeout" older_than "$steady_ns" 12
old_pods=$(k -n "$steady_ns" get pods -o jsonpath='{.items[*].metadata.uid}')
k -n "$steady_ns" delete pod --all --wait=false >/dev/null
# new_pod_ready NS OLD-UIDS: a pod of NS that is not one of OLD-UIDS is Ready (6 s after it
# was scheduled: the pool's passes met the instance not Ready all that while).
new_pod_ready() {
    k -n "$1" get pods -o json | python3 -c "
import json, sys
old = set(sys.argv[1].split())
sys.exit(0 if any(p['metadata']['uid'] not in old and any(
    c['type'] == 'Ready' and c['status'] == 'True' for c in p.get('status', {}).get('conditions', []))
    for p in json.load(sys.stdin)['items']) else 1)" "$2"
}
export -f new_pod_ready
wait_for 120 "a new pod Ready in $steady_ns" new_pod_ready "$steady_ns" "$old_pods"
wait_for 60 "steady's pool Ready again" bash -c '[ "$(pool_field ready steady)" = 1 ]'
going=$(k get ns "$steady_ns" -o jsonpath='{.metadata.deletionTimestamp}') ||
    fail "the warm instance $steady_ns is gone: deleted for its new pod's start"
[ -z "$going" ] || fail "the warm instance $steady_ns is being deleted for its new pod's start"
[ "$(k get ns -l 'ctf.kopc.io/definition=steady,ctf.kopc.io/pool' -o name)" = "namespace/$steady_ns" ] ||
    fail "steady's pool replaced its warm instance"
[ -z "$(kc get events --field-selector involvedObject.name=steady,reason=WarmInstanceFailed -o name)" ] ||
    fail "a WarmInstanceFailed Event for a warm instance that only lost its pod"
ok "a warm instance Ready for longer than its start timeout waits for its lost pod's replacement"

log "claimed instances go with their Challenges; min lowered; definition deleted"
claimed=$(k get ns -l 'ctf.kopc.io/definition=warmweb,ctf.kopc.io/pool,ctf.kopc.io/challenge' -o name | wc -l)
kc delete chal --all --wait=false >/dev/null
wait_for 300 "the Challenges and their namespaces gone" bash -c \
    "[ -z \"\$(kc get chal -o name)\" ] && [ -z \"\$(k get ns -l ctf.kopc.io/challenge -o name)\" ]"
[ "$(warm_ns | wc -l)" = 10 ] || fail "claimed instances came back into the pool: $(warm_ns | wc -l) warm"
ok "the $claimed claimed instances were deleted with their Challenges, none returned to the pool"
kc patch chaldef warmweb --type merge -p '{"spec":{"pool":{"min":2}}}' >/dev/null
wait_for 120 "the pool lowered to 2" bash -c '[ "$(warm_ns | wc -l)" = 2 ] && [ "$(pool_field size)" = 2 ]'
ok "lowering min to 2 deletes 8 unclaimed warm instances"
kc delete chaldef warmweb autoweb steady >/dev/null
wait_for 120 "the pools gone with their definitions" bash -c \
    '[ -z "$(k get ns -l ctf.kopc.io/pool -o name)" ]'
ok "deleting the definitions deletes their warm instances"
stop_op_clean race
echo "$passed passed, 0 failed ($(elapsed) s)"
