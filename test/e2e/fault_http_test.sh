#!/usr/bin/env bash
# fault_http_test.sh - the CTF operator behind faultproxy.py in http mode: the
# proxy terminates TLS with a certificate signed by the cluster's CA (so the
# operator keeps verifying) and forwards to the apiserver, answering with
# faults when told to. The operator runs as its service account.
#   - TLS: behind a proxy whose certificate another CA signed, the operator
#     refuses the connection: not one HTTP request passes, it never gets
#     ready, it says why, and it does not crash; its start-up steps
#     (--install-crds, the gateway mode's host key) are tried again with
#     backoff, and SIGTERM meanwhile exits 0.
#   - least privilege: a full lifecycle (leader election, --install-crds,
#     Ingress exposure, the instance API's create, renew and delete, expiry,
#     a dynamic flag) goes through the proxy, which records every request;
#     every (resource, verb) used is granted by config/rbac, every one
#     granted is used (or listed below with its reason), no Forbidden.
#   - 500 on every request for 40 s, then 429 with Retry-After for 20 s,
#     while Challenges are created and deleted (their events still arrive,
#     so reconciles meet the fault), every connection cut half-way (so the
#     informers meet it too): the request rate stays bounded by the
#     backoffs (no hot loop; the bound, 25/s, is derived in
#     docs/reliability.md), the operator stays alive and healthy, counts
#     the failures in rest_client_requests_total, and everything converges
#     once the faults stop.
#   - watches answered with 410 Expired (a compacted resourceVersion): every
#     informer relists, relists are bounded by the backoff, and Challenges
#     created meanwhile converge through the relists while the fault lasts.
#   - watches that end empty at once: bounded rewatching, convergence after.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init fault-http

# jq_py EXPR: EXPR of the JSON document d read from stdin.
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# chal_field TEAM DEFINITION FIELD: a status field of the team's Challenge of
# DEFINITION ("absent" when there is none).
chal_field() {
    "$KUBECTL" --kubeconfig "$DIR/kubeconfig" -n ctf get chal -o json | python3 -c "
import json, sys
for c in json.load(sys.stdin)['items']:
    if c['spec']['team'] == '$1' and c['spec']['definition'] == '$2':
        print((c.get('status') or {}).get('$3', ''))
        break
else:
    print('absent')"
}
export -f chal_field
export KUBECTL DIR

log "cluster; proxies with a certificate of the cluster's CA and of another CA"
cluster_up
serving_cert "$WORK" "$DIR/pki/ca.crt" "$DIR/pki/ca.key"
mkdir -p "$WORK/evil"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=evil-ca \
    -keyout "$WORK/evil/ca.key" -out "$WORK/evil/ca.crt" 2>/dev/null || fail "openssl evil CA"
serving_cert "$WORK/evil" "$WORK/evil/ca.crt" "$WORK/evil/ca.key"
start_proxy evil --cert "$WORK/evil/proxy.crt" --key "$WORK/evil/proxy.key" --upstream-ca "$DIR/ca.crt"
EVIL_PORT=$PROXY_PORT
start_proxy http --cert "$WORK/proxy.crt" --key "$WORK/proxy.key" --upstream-ca "$DIR/ca.crt"
sa_kubeconfig "$WORK/evil.kubeconfig" "https://127.0.0.1:$EVIL_PORT" "$DIR/ca.crt"
sa_kubeconfig "$WORK/proxied.kubeconfig" "https://127.0.0.1:$PROXY_PORT" "$DIR/ca.crt"
ok "proxies up"

log "TLS: a certificate from another CA is refused"
OP_METRICS[mitm]=$(free_port)
OP_API[mitm]=$(free_port)
"$OPERATOR" --kubeconfig "$WORK/evil.kubeconfig" --metrics-bind "127.0.0.1:${OP_METRICS[mitm]}" \
    --api-bind "127.0.0.1:${OP_API[mitm]}" --install-crds -v 1 >>"$WORK/mitm.log" 2>&1 &
OP_PID[mitm]=$!
# Refused, said why, then tried again after the refusal (its backoff), and
# still refused: a condition, not a fixed wait (it was 15 s).
evil_connections() { proxy evil /stats | jq_py 'd["connections"]'; }
said_why() { grep -qiE 'certificate|SSL|TLS' "$WORK/mitm.log"; }
wait_for 60 "the operator refused the wrong certificate and said why" said_why
c1=$(evil_connections)
tried_again() { [ "$(evil_connections)" -gt "$c1" ]; }
wait_for 60 "the operator tried the evil proxy again after the refusal" tried_again
op_alive mitm || fail "the operator died facing a wrong certificate"
op_ready mitm && fail "the operator got ready through a proxy with a wrong certificate"
stats=$(proxy evil /stats)
[ "$(jq_py 'd["connections"]' <<<"$stats")" -gt 0 ] || fail "the operator never tried the evil proxy"
[ "$(jq_py 'd["requests"]' <<<"$stats")" = 0 ] || fail "HTTP requests passed a wrong certificate: $stats"
grep -qiE 'certificate|SSL|TLS' "$WORK/mitm.log" || fail "the operator does not say why it cannot connect"
grep -q 'Forbidden\|panic\|Assertion' "$WORK/mitm.log" && fail "unexpected failure in mitm.log"
# Its first step, --install-crds, is what it retries (kop_manager_retry), and
# SIGTERM in the middle of a backoff is a clean stop.
grep -q 'start-up step failed, retrying step="installing the CRDs"' "$WORK/mitm.log" ||
    fail "the operator did not retry installing its CRDs"
stop_op_clean mitm
ok "a proxy whose certificate another CA signed gets a TLS refusal and no request; --install-crds retried, SIGTERM exits 0"

log "TLS: the gateway mode's host key is retried as well"
"$OPERATOR" --kubeconfig "$WORK/evil.kubeconfig" --metrics-bind "127.0.0.1:${OP_METRICS[mitm]}" \
    --api-bind "127.0.0.1:${OP_API[mitm]}" --gateway-domain ctf.test -v 1 >"$WORK/mitm-gw.log" 2>&1 &
OP_PID[mitm]=$!
key_retried() { [ "$(grep -c 'start-up step failed, retrying step="loading the gateway.s host key"' "$WORK/mitm-gw.log")" -ge 2 ]; }
wait_for 90 "the operator tried to load the gateway's host key twice" key_retried
op_alive mitm || fail "the operator died loading the host key through a wrong certificate"
stop_op_clean mitm
ok "the host key's load is tried again with backoff, and SIGTERM exits 0"

log "least privilege: a full lifecycle through the recording proxy"
ADMIN_TOKEN=$(openssl rand -hex 24)
k -n kopc-system create secret generic ctf-api-admin --from-literal=token="$ADMIN_TOKEN" >/dev/null
k apply -f "$SRC/config/rbac/crd_installer_role.yaml" >/dev/null
rbac_in_force patch customresourcedefinitions.apiextensions.k8s.io
# A definition that expires quickly, so the operator deletes a Challenge itself
# (10 s: the other four go Running and are renewed and deleted meanwhile; it
# is deleted at expiry whether or not it was Running by then).
kc get chaldef web -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': 'brief', 'namespace': 'ctf'}
o.pop('status', None)
o['spec']['lifetime'] = {'default': '10s', 'max': '20s', 'renewBy': '10s'}
print(json.dumps(o))" | k apply -f - >/dev/null
# A warm pool of one with a dynamic flag: the claim, the flag refresh of its
# pods and the definition's status.pool go through the proxy too.
kc get chaldef nc -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': 'warmnc', 'namespace': 'ctf'}
o.pop('status', None)
o['spec']['pool'] = {'min': 1}
print(json.dumps(o))" | k apply -f - >/dev/null
start_op life "$WORK/proxied.kubeconfig" --leader-elect --install-crds --ingress-domain ctf.test
wait_for 60 "leader" bash -c "[ \"\$(curl -s http://127.0.0.1:${OP_METRICS[life]}/metrics | awk '/^leader_election_master_status/ {print \$2}')\" = 1 ]"
api() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ADMIN_TOKEN" -X "$1" "http://127.0.0.1:${OP_API[life]}/api/v1/$2"; }
wait_for 30 "API ready" bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $ADMIN_TOKEN' http://127.0.0.1:${OP_API[life]}/api/v1/challenges)\" = 200 ]"
wait_for 120 "warmnc's pool Ready" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n ctf get chaldef warmnc -o jsonpath='{.status.pool.ready}')\" = 1 ]"
for tc in life-a/web life-a/nc life-a/brief life-b/twopod life-b/warmnc; do
    code=$(api PUT "teams/${tc%/*}/instances/${tc#*/}")
    [ "$code" = 201 ] || fail "PUT $tc: $code"
done
for tc in life-a/web life-a/nc life-b/twopod life-b/warmnc; do
    wait_for 120 "$tc Running" bash -c "[ \"\$(chal_field '${tc%/*}' '${tc#*/}' currentStatus)\" = Running ]"
done
code=$(api POST teams/life-a/instances/web/renew)
[ "$code" = 200 ] || fail "renew: $code"
code=$(api DELETE teams/life-a/instances/nc)
[ "$code" = 202 ] || fail "DELETE: $code"
for tc in life-a/nc life-a/brief; do
    wait_for 120 "$tc gone (deleted, expired)" bash -c "[ \"\$(chal_field '${tc%/*}' '${tc#*/}' currentStatus)\" = absent ]"
done
# Left: web, twopod, warmnc's claimed instance and the warm one that refilled its pool.
wait_for 120 "their namespaces gone" bash -c "[ \$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get ns -l app.kubernetes.io/managed-by=kopc-ctf -o name | wc -l) = 4 ]"
[ "$(k get ns -l ctf.kopc.io/pool,ctf.kopc.io/team=life-b -o name | wc -l)" = 1 ] ||
    fail "life-b's warmnc was not served from the pool"
# The web and twopod instances live on, each with an Ingress (--ingress-domain).
# Seen missing once (2026-11-26, not reproduced since): on failure, show what exists.
ingresses() { k get ingress -A -o name | wc -l; }
for _ in $(seq 60); do [ "$(ingresses)" -ge 2 ] && break; sleep 0.5; done
if [ "$(ingresses)" -lt 2 ]; then
    k get ingress,svc,ns -A -l app.kubernetes.io/managed-by=kopc-ctf || true
    echo "Ingress applies seen by the proxy: $(proxy http /requests | grep -c '/ingresses/' || true)"
    fail "no Ingress made with --ingress-domain (want one per live instance, 2)"
fi
stop_op_clean life
no_forbidden life
proxy http /requests >"$WORK/requests.jsonl"
check rbac --requests "$WORK/requests.jsonl" \
    --role "$SRC/config/rbac/role.yaml" --role "$SRC/config/rbac/leader_election_role.yaml" \
    --role "$SRC/config/rbac/crd_installer_role.yaml" \
    --allow "events:patch:raises the count of an Event repeated within the dedup window" \
    --allow "tlsroutes:list:gateway mode only" --allow "tlsroutes:watch:gateway mode only" \
    --allow "tlsroutes:create:gateway mode only" --allow "tlsroutes:patch:gateway mode only" \
    --allow "httproutes:list:gateway mode only" --allow "httproutes:watch:gateway mode only" \
    --allow "httproutes:create:gateway mode only" --allow "httproutes:patch:gateway mode only" ||
    fail "config/rbac does not match what the operator uses (see above)"
ok "every request the operator made is granted, every grant is used, no Forbidden"

log "apiserver answering 500, then 429"
start_op storm "$WORK/proxied.kubeconfig"
kc delete chal --all --wait=false >/dev/null
kc delete chaldef warmnc --wait=false >/dev/null # its warm instance goes with it
wait_for 180 "lifecycle cleaned up" bash -c "[ -z \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get ns -l app.kubernetes.io/managed-by=kopc-ctf -o name)\" ]"
challenges s 1 10 >"$WORK/s1.yaml"
k apply -f "$WORK/s1.yaml" >/dev/null
check converged >/dev/null 2>&1 || wait_for 120 "first ten Running" check converged

# storm CODE SECONDS [RETRY_AFTER]: the fault on every request for SECONDS;
# open watches keep delivering events for the first half (so reconciles
# meet the fault), then every connection is cut (so the informers do too).
# Prints the window's stats at its end.
storm() {
    local t0
    t0=$(date +%s.%N)
    proxy http "/mode?set=error&code=$1${3:+&retry_after=$3}" >/dev/null
    sleep $(($2 / 2))
    proxy http /kill >/dev/null
    sleep $(($2 - $2 / 2))
    proxy http "/stats?since=$t0"
    proxy http "/mode?set=pass" >/dev/null
}
# bounded STATS SECONDS PER_SECOND WHAT: the injected requests of the window
# averaged less than PER_SECOND a second.
bounded() {
    local n
    n=$(jq_py 'd["since"]["injected"]' <<<"$1")
    echo "    $4: $n requests refused in $2 s: $(jq_py 'd["since"]["by_kind"]' <<<"$1")"
    [ "$n" -gt 0 ] || fail "$4: the operator made no request at all"
    [ "$n" -lt $(($2 * $3)) ] || fail "$4: $n requests in $2 s, over the bound of $3/s: a hot loop"
}
challenges s 11 18 >"$WORK/s2.yaml"
(sleep 2 && k apply -f "$WORK/s2.yaml" >/dev/null && kc delete chal s-001 s-002 --wait=false >/dev/null) &
maker=$!
s500=$(storm 500 40)
wait "$maker"
bounded "$s500" 40 25 "500"
op_alive storm || fail "the operator died under 500s"
curl -sf "http://127.0.0.1:${OP_METRICS[storm]}/healthz" >/dev/null || fail "unhealthy under 500s"
[ "$(metric storm 'rest_client_requests_total.*code="500"')" -gt 0 ] || fail "500s not counted in rest_client_requests_total"
# 429 carries Retry-After: 1, which the client honours.
challenges s 19 22 >"$WORK/s3.yaml"
(sleep 2 && k apply -f "$WORK/s3.yaml" >/dev/null && kc delete chal s-003 --wait=false >/dev/null) &
maker=$!
# 20 s (it was 30): under 429 the bound is Retry-After's one request a
# second per worker, informer and recorder, whatever the window's length;
# each half (events delivered, then connections cut) still spans ten
# Retry-After periods.
s429=$(storm 429 20 1)
wait "$maker"
bounded "$s429" 20 25 "429"
op_alive storm || fail "the operator died under 429s"
[ "$(metric storm 'rest_client_requests_total.*code="429"')" -gt 0 ] || fail "429s not counted"
seq -f 's-%03g' 4 22 >"$WORK/want"
wait_for 180 "convergence after the storms" check converged --expect "$WORK/want"
check converged --expect "$WORK/want" || fail "not converged"
ok "500 and 429 storms: bounded retries, alive and healthy, converged once they stopped"

log "watches answered with 410 Expired"
t0=$(date +%s.%N)
proxy http "/mode?set=gone" >/dev/null
proxy http /kill >/dev/null
sleep 3
challenges g 1 5 >"$WORK/g.yaml"
k apply -f "$WORK/g.yaml" >/dev/null
kc delete chal s-004 --wait=false >/dev/null
{ seq -f 's-%03g' 5 22; seq -f 'g-%03g' 1 5; } >"$WORK/want"
wait_for 150 "convergence through relists while every watch is Gone" check converged --expect "$WORK/want"
gone=$(proxy http "/stats?since=$t0")
proxy http "/mode?set=pass" >/dev/null
secs=$(python3 -c "import time; print(max(1, int(time.time() - $t0)))")
lists=$(jq_py 'd["since"]["by_kind"].get("GET 200", 0)' <<<"$gone")
watches=$(jq_py 'd["since"]["by_kind"].get("watch 200 injected", 0)' <<<"$gone")
echo "    gone: $watches watches answered 410, $lists GETs (relists and reads) in $secs s"
[ "$watches" -ge 6 ] || fail "only $watches watches met the 410: not every informer was tested"
[ "$lists" -lt $((secs * 5)) ] || fail "$lists GETs in $secs s: relisting in a loop"
check converged --expect "$WORK/want" || fail "not converged"
ok "410 on every watch: the informers relist with backoff and the Challenges converge meanwhile"

log "watches that end at once"
# 40 s: an informer may begin this with the 30 s backoff the 410s left it
# (it resets only after a watch that brings events or lasts a minute, and a
# quiet operator's watches bring none), so each rewatches at least once.
t0=$(date +%s.%N)
proxy http "/mode?set=eof" >/dev/null
proxy http /kill >/dev/null
sleep 40
eof=$(proxy http "/stats?since=$t0")
proxy http "/mode?set=pass" >/dev/null
n=$(jq_py 'd["since"]["by_kind"].get("watch 200 injected", 0)' <<<"$eof")
echo "    eof: $n empty watches in 40 s"
[ "$n" -ge 6 ] && [ "$n" -lt 100 ] || fail "$n empty watches in 40 s (want 6 to 100)"
kc delete chal s-005 --wait=false >/dev/null
seq -f 's-%03g' 6 22 >"$WORK/want"
seq -f 'g-%03g' 1 5 >>"$WORK/want"
wait_for 120 "convergence after empty watches" check converged --expect "$WORK/want"
op_alive storm || fail "the operator died"
stop_op_clean storm
no_forbidden storm
ok "empty watch streams: bounded rewatching, then convergence"

echo "$passed passed, 0 failed ($(elapsed) s)"
