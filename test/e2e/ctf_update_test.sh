#!/usr/bin/env bash
# ctf_update_test.sh - a definition changed under running instances
# (spec.update, issue 30), on fake nodes, where what is checked is the
# bookkeeping of the replacements:
#   - Rolling, maxUnavailable 5, over 50 running instances, the operator
#     SIGKILLed in the middle and restarted: sampled all along, never more
#     than 5 instances in the middle of a replacement (Deployments rolling,
#     Challenges Updating); at the end all 50 Running on the new generation
#     (status.definitionGeneration, the Deployments' template), each with the
#     namespace, endpoints, expiry and flag it had; an Event Updated per
#     instance; the definition's status.update and kubectl get chaldef
#     (CURRENT, UPDATING, BEHIND) say 50 current;
#   - OnNextStart (the default): the running instances keep their version
#     (the definition's status counts them behind, their pods are not
#     replaced), a flag change still reaches their Secret without a restart,
#     a NetworkPolicy deleted by hand comes back, and a new start gets the
#     new version;
#   - Recreate: both instances replaced, and the team's event stream
#     (GET /api/v1/teams/T/events) tells of Updating, then "updated to the
#     new version";
#   - a Rolling update called off (the image reverted, OnNextStart) while
#     one instance is in the middle of its replacement: it goes on to the
#     definition as it is now and comes back Running; none stays Updating;
#   - the instance holding the one slot of a Rolling update (its new image
#     never pulled) deleted with its finalizer stripped by hand: its
#     orphaned namespace goes and the next instance gets the slot;
#   - a warm pool of 10: the definition changes and 50 Challenges arrive at
#     once; not one is served an instance of the old version, the warm
#     instances of the old version are replaced in place (not deleted), and
#     the pool ends with 10 of the new version.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init ctf-update
N=${UPDATE_CHALLENGES:-50}
MAX_UNAVAILABLE=5

# gen DEFINITION: its metadata.generation.
gen() { kc get chaldef "$1" -o jsonpath='{.metadata.generation}'; }
# on_gen DEFINITION GENERATION COUNT: COUNT Challenges of DEFINITION are Running on GENERATION.
on_gen() {
    [ "$(kc get chal -o json | python3 -c "
import json, sys
d, g = sys.argv[1], int(sys.argv[2])
print(sum(1 for c in json.load(sys.stdin)['items'] if c['spec']['definition'] == d
          and c.get('status', {}).get('currentStatus') == 'Running'
          and c.get('status', {}).get('definitionGeneration') == g))" "$1" "$2")" = "$3" ]
}
# at_least_on_gen DEFINITION GENERATION COUNT: COUNT or more Challenges of DEFINITION on GENERATION.
at_least_on_gen() {
    [ "$(kc get chal -o json | python3 -c "
import json, sys
d, g = sys.argv[1], int(sys.argv[2])
print(sum(1 for c in json.load(sys.stdin)['items'] if c['spec']['definition'] == d
          and c.get('status', {}).get('definitionGeneration') == g))" "$1" "$2")" -ge "$3" ]
}
# running DEFINITION COUNT: COUNT Challenges of DEFINITION are Running.
running() {
    [ "$(kc get chal -o json | python3 -c "
import json, sys
print(sum(1 for c in json.load(sys.stdin)['items'] if c['spec']['definition'] == sys.argv[1]
          and c.get('status', {}).get('currentStatus') == 'Running'))" "$1")" = "$2" ]
}
# update_field DEFINITION FIELD: status.update.FIELD of DEFINITION.
update_field() { kc get chaldef "$1" -o "jsonpath={.status.update.$2}"; }
# define NAME [PYTHON-EXPR-ON-SPEC]: a definition NAME copied from the sample web, spec changed.
define() {
    kc get chaldef web -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': sys.argv[1], 'namespace': 'ctf'}
o.pop('status', None)
spec = o['spec']
exec(sys.argv[2] if len(sys.argv) > 2 else '')
print(json.dumps(o))" "$@" | k apply -f - >/dev/null
}
# set_version DEFINITION V: the container's env VERSION=V (a new version of the pods).
set_version() {
    kc patch chaldef "$1" --type json -p \
        "[{\"op\":\"add\",\"path\":\"/spec/pods/0/template/containers/0/env\",\"value\":[{\"name\":\"VERSION\",\"value\":\"$2\"}]}]" >/dev/null
}
# snapshot DEFINITION FILE: each Challenge's namespace, endpoints, expiry and flag Secret.
snapshot() {
    python3 - "$1" >"$2" <<'PY'
import json, os, subprocess, sys
def get(*a):
    return json.loads(subprocess.run([os.environ["KUBECTL"], "--kubeconfig", os.environ["DIR"] + "/kubeconfig",
                                      *a, "-o", "json"], check=True, capture_output=True, text=True).stdout)
out = {}
for c in get("-n", "ctf", "get", "chal")["items"]:
    if c["spec"]["definition"] != sys.argv[1]:
        continue
    s = c["status"]
    flag = get("-n", s["namespace"], "get", "secret", "flag")["data"]
    out[c["metadata"]["name"]] = {"ns": s["namespace"], "endpoints": s["endpoints"],
                                  "expiresAt": s["expiresAt"], "flag": flag}
print(json.dumps(out, sort_keys=True))
PY
}
export -f gen on_gen at_least_on_gen running update_field k kc
export KUBECTL DIR N

log "a devcluster, the operator, $N instances of a definition with Rolling, maxUnavailable $MAX_UNAVAILABLE"
cluster_up
ctf_token_secrets fix-001
start_op upd
define roll "spec['update'] = {'strategy': 'Rolling', 'maxUnavailable': $MAX_UNAVAILABLE}"
challenges roll 1 "$N" roll | k apply -f - >/dev/null
wait_for 480 "$N instances Running" running roll "$N"
g1=$(gen roll)
wait_for 120 "status.definitionGeneration on all" on_gen roll "$g1" "$N"
wait_for 60 "status.update: $N current" bash -c "[ \"\$(update_field roll current)\" = $N ]"
snapshot roll "$WORK/before.json"
ok "$N Running on generation $g1; the definition counts $N current"

log "the pods change: a rolling update, sampled, the operator SIGKILLed in the middle"
rm -f "$WORK/stop-sampling"
python3 - "$WORK" roll >"$WORK/samples.log" 2>&1 <<'PY' &
import json, os, subprocess, sys, time
work, d = sys.argv[1], sys.argv[2]
def get(*a):
    r = subprocess.run([os.environ["KUBECTL"], "--kubeconfig", os.environ["DIR"] + "/kubeconfig",
                        "--request-timeout=30s", *a, "-o", "json"], capture_output=True, text=True)
    return json.loads(r.stdout)["items"] if r.returncode == 0 else None
def rolling(dep):
    spec, st = dep.get("spec", {}), dep.get("status", {})
    want, updated = spec.get("replicas", 1), st.get("updatedReplicas", 0)
    return (st.get("observedGeneration", 0) < dep["metadata"].get("generation", 0)
            or updated < want or st.get("replicas", 0) > updated)
most_rolling = most_updating = samples = 0
while not os.path.exists(f"{work}/stop-sampling"):
    deps = get("get", "deploy", "-A", "-l", f"ctf.kopc.io/definition={d}")
    chals = get("-n", "ctf", "get", "chal")
    if deps is None or chals is None:
        continue
    # Warm pools are another definition's; Challenges' Deployments here only.
    nss = {x["metadata"]["namespace"] for x in deps if rolling(x)}
    updating = sum(1 for c in chals if c["spec"]["definition"] == d
                   and c.get("status", {}).get("currentStatus") == "Updating")
    samples += 1
    most_rolling, most_updating = max(most_rolling, len(nss)), max(most_updating, updating)
    print(f"{time.time():.1f} rolling={len(nss)} updating={updating}", flush=True)
print(f"RESULT samples={samples} rolling={most_rolling} updating={most_updating}", flush=True)
PY
sampler=$!
set_version roll 2
g2=$(gen roll)
[ "$g2" -gt "$g1" ] || fail "the definition's generation did not move ($g1 -> $g2)"
wait_for 300 "10 instances on generation $g2" at_least_on_gen roll "$g2" 10
at_least_on_gen roll "$g2" "$N" && fail "the rolling update was over before the SIGKILL could land in it"
stop_op upd KILL
spawn_op upd
wait_for 60 "the operator ready again" op_ready upd
ok "killed in the middle of the rolling update, restarted"
wait_for 600 "all $N on generation $g2" on_gen roll "$g2" "$N"
wait_for 60 "status.update: $N current, none updating or behind" bash -c \
    "[ \"\$(update_field roll current)/\$(update_field roll updating)/\$(update_field roll behind)\" = $N/0/0 ]"
touch "$WORK/stop-sampling"
wait "$sampler" || true
result=$(grep '^RESULT' "$WORK/samples.log") || fail "the sampler gave no result: $(tail -5 "$WORK/samples.log")"
echo "$result"
read -r samples most_rolling most_updating < <(sed -E 's/.*samples=([0-9]+) rolling=([0-9]+) updating=([0-9]+)/\1 \2 \3/' <<<"$result")
[ "$samples" -ge 10 ] || fail "only $samples samples"
[ "$most_rolling" -le "$MAX_UNAVAILABLE" ] || fail "$most_rolling instances rolling at once (maxUnavailable $MAX_UNAVAILABLE)"
[ "$most_updating" -le "$MAX_UNAVAILABLE" ] || fail "$most_updating Challenges Updating at once (maxUnavailable $MAX_UNAVAILABLE)"
[ "$most_rolling" -ge 1 ] || fail "no replacement was ever sampled: the sampling saw nothing"
ok "sampled $samples times: at most $most_rolling rolling and $most_updating Updating at once (<= $MAX_UNAVAILABLE)"
snapshot roll "$WORK/after.json"
cmp -s "$WORK/before.json" "$WORK/after.json" || fail "namespace, endpoints, expiry or flag changed: $(diff "$WORK/before.json" "$WORK/after.json" | head -5)"
python3 - <<'PY' || fail "a Deployment of roll does not run VERSION=2"
import json, os, subprocess, sys
deps = json.loads(subprocess.run([os.environ["KUBECTL"], "--kubeconfig", os.environ["DIR"] + "/kubeconfig", "get", "deploy",
                                  "-A", "-l", "ctf.kopc.io/definition=roll", "-o", "json"],
                                 check=True, capture_output=True, text=True).stdout)["items"]
bad = [d["metadata"]["namespace"] for d in deps
       if {"name": "VERSION", "value": "2"} not in d["spec"]["template"]["spec"]["containers"][0].get("env", [])]
print(f"{len(deps)} Deployments, {len(bad)} without VERSION=2 {bad[:3]}")
sys.exit(1 if bad or len(deps) != int(os.environ.get("N", "50")) else 0)
PY
ok "all $N on generation $g2, each with the namespace, endpoints, expiry and flag it had"
# Each instance says so in the pass after its replacement is ready; that pass can meet a
# conflict (its status write raced the cache) and come back a second later.
noticed() {
    kc get chal -o json | python3 -c "
import json, sys
print(sum(1 for c in json.load(sys.stdin)['items'] if c['spec']['definition'] == 'roll'
          and c['status'].get('message', '').startswith('updated to the new version')
          and c['status'].get('updatedAt')))"
}
all_noticed() { [ "$(noticed)" = "$N" ]; }
# unnoticed: the status of each instance without the notice, and what the operator logged of it.
unnoticed() {
    kc get chal -o json | python3 -c "
import json, sys
for c in json.load(sys.stdin)['items']:
    s = c.get('status', {})
    if c['spec']['definition'] == 'roll' and not (s.get('message', '').startswith('updated to the new version') and s.get('updatedAt')):
        print(c['metadata']['name'], json.dumps({k: s.get(k) for k in ('currentStatus', 'message', 'definitionGeneration', 'updatedAt')}))" |
        while read -r name st; do
            echo "$name $st"
            grep -F "name=$name " "$WORK/upd.log" | tail -6
        done
}
WAIT_FOR_WHY=unnoticed wait_for 60 "all $N saying 'updated to the new version' (with updatedAt)" all_noticed
updated=$(kc get events --field-selector reason=Updated -o json | python3 -c "
import json, sys
print(len({e['involvedObject']['name'] for e in json.load(sys.stdin)['items'] if e['involvedObject']['name'].startswith('roll-')}))")
# One SIGKILL may fall between a status write and its Event: at most a few are lost with it.
[ "$updated" -ge $((N - MAX_UNAVAILABLE)) ] || fail "only $updated instances have an Event Updated"
header=$(kc get chaldef roll)
for col in CURRENT UPDATING BEHIND; do grep -qw "$col" <<<"${header%%$'\n'*}" || fail "kubectl get chaldef lacks $col: $header"; done
ok "all $N say 'updated to the new version', an Event Updated for $updated of $N; kubectl get chaldef shows CURRENT, UPDATING, BEHIND"
no_forbidden upd

log "OnNextStart: running instances keep their version, a new start gets the new one"
define keep
challenges keep 1 3 keep | k apply -f - >/dev/null
wait_for 180 "3 instances of keep Running" running keep 3
k1=$(gen keep)
wait_for 60 "keep's instances on generation $k1" on_gen keep "$k1" 3
pods_before=$(k get pods -A -l ctf.kopc.io/definition=keep -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort)
set_version keep 2
k2=$(gen keep)
wait_for 60 "status.update: 3 behind" bash -c "[ \"\$(update_field keep behind)\" = 3 ] && [ \"\$(update_field keep generation)\" = $k2 ]"
on_gen keep "$k1" 3 || fail "a running instance of keep left generation $k1"
kc patch chaldef keep --type merge -p '{"spec":{"flag":{"static":"flag{n3w_fl4g}"}}}' >/dev/null
want_flag=$(printf 'flag{n3w_fl4g}' | base64)
flags_new() {
    local ns
    for ns in $(kc get chal -o jsonpath='{range .items[*]}{.spec.definition}={.status.namespace}{"\n"}{end}' | sed -n 's/^keep=//p'); do
        [ "$(k -n "$ns" get secret flag -o jsonpath='{.data.flag}')" = "$want_flag" ] || return 1
    done
}
export want_flag
export -f flags_new
wait_for 60 "the new flag in the kept instances' Secrets" flags_new
kept_ns=$(kc get chal keep-001 -o jsonpath='{.status.namespace}')
k -n "$kept_ns" delete networkpolicy default-deny >/dev/null
wait_for 60 "default-deny back in a kept instance" k -n "$kept_ns" get networkpolicy default-deny
challenges keep 4 4 keep | k apply -f - >/dev/null
k3=$(gen keep)
wait_for 180 "the new start Running on generation $k3" bash -c \
    "[ \"\$(kc get chal keep-004 -o jsonpath='{.status.currentStatus}/{.status.definitionGeneration}')\" = Running/$k3 ]"
k -n "$(kc get chal keep-004 -o jsonpath='{.status.namespace}')" get deploy web -o json |
    grep -q '"VERSION"' || fail "the new start does not run VERSION=2"
on_gen keep "$k1" 3 || fail "a running instance of keep left generation $k1"
pods_after=$(k get pods -A -l ctf.kopc.io/definition=keep -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort)
[ -z "$(comm -23 <(echo "$pods_before") <(echo "$pods_after"))" ] || fail "a pod of a kept instance was replaced"
[ "$(update_field keep behind)" = 3 ] || fail "keep's status.update.behind is not 3"
ok "3 kept on generation $k1 (pods untouched, new flag in their Secrets, a deleted default-deny put back), the new start on $k3"

log "Recreate: both instances replaced; the team's event stream tells"
define fix "spec['update'] = {'strategy': 'Recreate'}"
challenges fix 1 2 fix | k apply -f - >/dev/null
wait_for 180 "2 instances of fix Running" running fix 2
API="http://127.0.0.1:${OP_API[upd]}"
curl -sN --max-time 600 -H @- "$API/api/v1/teams/fix-001/events" >"$WORK/stream.txt" 2>/dev/null \
    <<<"Authorization: Bearer ${TOKENS[fix-001]}" &
stream=$!
wait_for 30 "the stream's snapshot" grep -q '^event: snapshot' "$WORK/stream.txt"
set_version fix 2
f2=$(gen fix)
wait_for 180 "both of fix on generation $f2" on_gen fix "$f2" 2
wait_for 30 "the notice in the stream" grep -q 'updated to the new version' "$WORK/stream.txt"
kill "$stream" 2>/dev/null || true
grep -q '"status":"Updating"' "$WORK/stream.txt" || fail "the stream never said Updating"
ok "Recreate replaced both; the stream said Updating, then 'updated to the new version'"

log "a rolling update called off: the image reverted and OnNextStart, one instance mid-replacement"
define swap "spec['update'] = {'strategy': 'Rolling', 'maxUnavailable': 1}"
challenges swap 1 3 swap | k apply -f - >/dev/null
wait_for 180 "3 instances of swap Running" running swap 3
s1=$(gen swap)
wait_for 60 "swap's instances on generation $s1" on_gen swap "$s1" 3
image=$(kc get chaldef swap -o jsonpath='{.spec.pods[0].template.containers[0].image}')
# A new pod of this image turns Ready 6 s after it is scheduled (the devcluster's stage):
# one instance at a time is in the middle of its replacement for that long.
kc patch chaldef swap --type json -p \
    '[{"op":"replace","path":"/spec/pods/0/template/containers/0/image","value":"example.test/kwok-slow-start:2"}]' >/dev/null
updating_now() { [ "$(kc get chal -o jsonpath='{range .items[*]}{.spec.definition}={.status.currentStatus}{"\n"}{end}' | grep -c '^swap=Updating$')" -ge 1 ]; }
export -f updating_now
wait_for 60 "an instance of swap Updating" updating_now
kc patch chaldef swap --type json -p "[{\"op\":\"replace\",\"path\":\"/spec/pods/0/template/containers/0/image\",\"value\":\"$image\"},
    {\"op\":\"replace\",\"path\":\"/spec/update\",\"value\":{\"strategy\":\"OnNextStart\"}}]" >/dev/null
# The one caught in its replacement goes on to the definition as it is now (its pods were
# being replaced anyway) and comes back Running; it used to stay Updating for good.
swap_settled() {
    [ "$(kc get chal -o jsonpath='{range .items[*]}{.spec.definition}={.status.currentStatus}{"\n"}{end}' | grep -c '^swap=Running$')" = 3 ] &&
        [ "$(update_field swap updating)" = 0 ]
}
swap_states() { kc get chal -o jsonpath='{range .items[*]}{.metadata.name} {.status.currentStatus} {.status.definitionGeneration} {.status.message}{"\n"}{end}' | grep '^swap-'; }
export -f swap_settled swap_states
WAIT_FOR_WHY=swap_states wait_for 120 "the 3 of swap Running, none Updating" swap_settled
slow=$(k get deploy -A -l ctf.kopc.io/definition=swap -o jsonpath='{range .items[*]}{.spec.template.spec.containers[0].image}{"\n"}{end}' | grep -c kwok-slow-start || true)
[ "$slow" = 0 ] || fail "$slow Deployments of swap still run the image called off"
ok "called off mid-replacement: the 3 of swap Running, on the image they had, none left Updating"

log "a slot holder deleted with its finalizer stripped by hand: its slot goes to the next"
define strip "spec['update'] = {'strategy': 'Rolling', 'maxUnavailable': 1}"
challenges strip 1 2 strip | k apply -f - >/dev/null
wait_for 180 "2 instances of strip Running" running strip 2
# The new pods never pull their image: the first instance replaced stays in Error holding
# the one slot, and the other waits for it.
kc patch chaldef strip --type json -p \
    '[{"op":"replace","path":"/spec/pods/0/template/containers/0/image","value":"example.test/kwok-image-pull-fails:2"}]' >/dev/null
# new_image NS: the instance namespace NS's Deployment runs the image that cannot be pulled.
new_image() { k -n "$1" get deploy -o jsonpath='{.items[*].spec.template.spec.containers[0].image}' | grep -q kwok-image-pull-fails; }
# holder: the name of the instance of strip whose Deployment has the new image (one at most).
holder() {
    local d name ns
    kc get chal -o jsonpath='{range .items[*]}{.spec.definition} {.metadata.name} {.status.namespace}{"\n"}{end}' |
        while read -r d name ns; do
            if [ "$d" = strip ] && new_image "$ns"; then echo "$name"; fi
        done
}
export -f new_image holder
wait_for 60 "one instance of strip given the new image" bash -c '[ -n "$(holder)" ]'
x=$(holder)
[ -n "$x" ] && [ "$(grep -c . <<<"$x")" = 1 ] || fail "not one instance of strip replaced (maxUnavailable 1): '$x'"
y=$( [ "$x" = strip-001 ] && echo strip-002 || echo strip-001)
x_ns=$(kc get chal "$x" -o jsonpath='{.status.namespace}')
y_ns=$(kc get chal "$y" -o jsonpath='{.status.namespace}')
new_image "$y_ns" && fail "$y was given the new image beside $x (maxUnavailable 1)"
# The operator stopped meanwhile, so no pass of it puts the finalizer back before the delete.
kill -STOP "${OP_PID[upd]}"
kc patch chal "$x" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null
kc delete chal "$x" --wait=false >/dev/null
kill -CONT "${OP_PID[upd]}"
kc get chal "$x" >/dev/null 2>&1 && fail "$x still exists after its delete without a finalizer"
# Its finalize never runs; the orphaned namespace's event brings its key back, and what
# was kept of it (the slot) goes with the namespace.
wait_for 120 "$y given the freed slot (its Deployment on the new image)" new_image "$y_ns"
wait_for 120 "$x's orphaned namespace gone" bash -c "! k get ns '$x_ns' >/dev/null 2>&1"
ok "$x deleted with its finalizer stripped: its namespace went and $y took its slot"

log "a warm pool of 10: the definition changes as $N Challenges arrive"
define warm "spec['pool'] = {'min': 10}"
pool_ready() { [ "$(kc get chaldef warm -o jsonpath='{.status.pool.ready}')" = 10 ]; }
export -f pool_ready
wait_for 240 "10 warm instances Ready" pool_ready
warm_before=$(k get ns -l 'ctf.kopc.io/definition=warm,ctf.kopc.io/pool,!ctf.kopc.io/challenge' -o name | sort)
challenges race 1 "$N" warm >"$WORK/race.yaml"
set_version warm 2
w2=$(gen warm)
k apply -f "$WORK/race.yaml" >/dev/null || fail "the Challenges were refused"
wait_for 480 "$N Challenges of warm Running" running warm "$N"
python3 - "$w2" <<'PY' || fail "a Challenge was served an instance of the old version"
import json, os, subprocess, sys
def get(*a):
    return json.loads(subprocess.run([os.environ["KUBECTL"], "--kubeconfig", os.environ["DIR"] + "/kubeconfig",
                                      *a, "-o", "json"], check=True, capture_output=True, text=True).stdout)["items"]
g2 = int(sys.argv[1])
chals = [c for c in get("-n", "ctf", "get", "chal") if c["spec"]["definition"] == "warm"]
pooled = {n["metadata"]["name"] for n in get("get", "ns", "-l", "ctf.kopc.io/pool,ctf.kopc.io/definition=warm")}
bad, served = [], 0
for c in chals:
    ns = c["status"]["namespace"]
    served += ns in pooled
    for d in get("-n", ns, "get", "deploy"):
        env = d["spec"]["template"]["spec"]["containers"][0].get("env", [])
        if {"name": "VERSION", "value": "2"} not in env or int(d["metadata"]["annotations"]["ctf.kopc.io/definition-generation"]) < g2:
            bad.append(f'{c["metadata"]["name"]} in {ns}')
print(f"{len(chals)} Challenges, {served} served from the pool, {len(bad)} on the old version {bad[:5]}")
sys.exit(1 if bad or len(chals) != 50 else 0)
PY
ok "none of $N Challenges was served an instance of the old version"
warm_new() {
    python3 - "$1" <<'PY'
import json, os, subprocess, sys
def get(*a):
    return json.loads(subprocess.run([os.environ["KUBECTL"], "--kubeconfig", os.environ["DIR"] + "/kubeconfig",
                                      *a, "-o", "json"], check=True, capture_output=True, text=True).stdout)["items"]
warm = [n["metadata"]["name"] for n in get("get", "ns", "-l", "ctf.kopc.io/pool,!ctf.kopc.io/challenge,ctf.kopc.io/definition=warm")
        if not n["metadata"].get("deletionTimestamp")]
ok = len(warm) == 10 and all(
    int(d["metadata"]["annotations"]["ctf.kopc.io/definition-generation"]) >= int(sys.argv[1])
    for ns in warm for d in get("-n", ns, "get", "deploy"))
sys.exit(0 if ok else 1)
PY
}
export -f warm_new
wait_for 300 "the pool at 10, all of generation $w2" bash -c "warm_new $w2 && pool_ready"
warm_after=$(k get ns -l 'ctf.kopc.io/definition=warm,ctf.kopc.io/pool' -o name | sort)
kept=$(comm -12 <(echo "$warm_before") <(echo "$warm_after") | grep -c . || true)
echo "of the 10 warm namespaces of the old version, $kept are still there (claimed, or replaced in place)"
[ "$kept" -ge 1 ] || fail "every old warm namespace was deleted rather than replaced or claimed"
ok "the pool refilled with 10 of generation $w2"
no_forbidden upd
stop_op_clean upd
echo "$passed passed, 0 failed ($(elapsed) s)"
