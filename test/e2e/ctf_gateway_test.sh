#!/usr/bin/env bash
# ctf_gateway_test.sh - the CTF operator's gateway mode (issue 29) on a
# devcluster with fake nodes and `--gateway-domain`: the Gateway API CRDs, the
# Gateway kopc-gateway/ctf and its wildcard Secret exist, but no gateway
# implementation runs, so nobody answers a route. The operator runs as its
# service account with config/rbac, --gateway-domain ctf.test:
#   - each TCP exposure has a TLSRoute (v1) on the Gateway's `tls` listener,
#     each HTTP one an HTTPRoute on `https`, with the host the Challenge's
#     status.endpoints and the API's Instance view show (host, port 443);
#     no Service of type NodePort exists, the quota allows none, and the
#     exposed ports admit the gateway's namespace only;
#   - with every pod Ready but no gateway answering, the Challenge is not
#     Running: Pending, its message and Ready condition (GatewayPending) name
#     the Gateway and the route;
#   - the route's status is the gateway's word: written here as a gateway
#     would (Accepted and ResolvedRefs True for kopc-gateway/ctf), it wakes
#     the Challenge through the route watch and it goes Running; a refusal
#     (Accepted=False NotAllowedByListeners) shows as RouteNotAccepted with
#     the gateway's reason, never Running;
#   - the host is stable: the same after Stop and Start, the same after an
#     operator restart (the key is in Secret kopc-system/ctf-gateway-host-key),
#     another for another team;
#   - a warm instance has no route; claimed, it gains its team's route and
#     its pod is not restarted;
#   - in headless Chromium (test/e2e/page/gateway_page_test.mjs), the team's
#     page shows for its TCP instance `ncat --ssl`, `openssl s_client` and the
#     pwntools line with its own host, each Copy putting exactly that in the
#     clipboard, and for its HTTP instance the link https://<host>; the CTFd
#     plugin's player view shows the same (screenshots in $KOP_ARTIFACTS,
#     default build/test-artifacts/gateway-page).
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP;
# optional CHROMIUM (default /usr/bin/chromium), NODE, KOP_ARTIFACTS. Needs
# Chromium and test/e2e/page/node_modules (make test runs npm ci there).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
NODE=${NODE:-node}
ARTIFACTS=${KOP_ARTIFACTS:-$SRC/build/test-artifacts/gateway-page}
e2e_init ctf-gateway stop_processes
op_pid=
DOMAIN=ctf.test

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    k get chal -A -o wide >&2 2>/dev/null || true
    [ -f "$WORK/op.log" ] && { echo "--- operator log (tail)" >&2; tail -40 "$WORK/op.log" >&2; }
    fail_summary "$*"
    exit 1
}
stop_processes() {
    [ -n "$op_pid" ] && kill -9 "$op_pid" 2>/dev/null || true
}

field() { kc get chal "$1" -o jsonpath="{$2}" 2>/dev/null; }
status_is() { [ "$(field "$1" .status.currentStatus)" = "$2" ]; }
message_has() { [[ "$(field "$1" .status.message)" == *"$2"* ]]; }
ready_reason_is() { [ "$(field "$1" '.status.conditions[?(@.type=="Ready")].reason')" = "$2" ]; }
gone() { ! kc get chal "$1" >/dev/null 2>&1; }
ns_gone() { ! k get namespace "$1" >/dev/null 2>&1; }
challenge() {
    printf 'apiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: %s, namespace: ctf}\nspec: {definition: %s, team: %s}\n' \
        "$1" "$2" "$3" | k apply -f - >/dev/null
}
# deployments_available NS: NS has Deployments, each with its replicas available.
deployments_available() {
    k -n "$1" get deploy -o json | python3 -c "
import json, sys
d = json.load(sys.stdin)['items']
sys.exit(0 if d and all((x.get('status', {}).get('availableReplicas') or 0) >= x['spec']['replicas'] for x in d) else 1)"
}
has_host() { [ -n "$(field "$1" '.status.endpoints[0].host')" ]; }
host_is() { [ "$(field "$1" '.status.endpoints[0].host')" = "$2" ]; }
namespace_is() { [ "$(field "$1" .status.namespace)" = "$2" ]; }
pool_ready_is() { [ "$(kc get chaldef "$1" -o jsonpath='{.status.pool.ready}')" = "$2" ]; }
# route_host NS KIND NAME: the route's first hostname.
route_host() { k -n "$1" get "$2.gateway.networking.k8s.io" "$3" -o jsonpath='{.spec.hostnames[0]}' 2>/dev/null; }
# gateway_says NS KIND NAME ACCEPTED [REASON]: write the route's status as the gateway would.
gateway_says() {
    local gen reason=${5:-Accepted}
    gen=$(k -n "$1" get "$2.gateway.networking.k8s.io" "$3" -o jsonpath='{.metadata.generation}')
    local now
    now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    k -n "$1" patch "$2.gateway.networking.k8s.io" "$3" --subresource=status --type=merge -p "{
      \"status\": {\"parents\": [{
        \"parentRef\": {\"group\": \"gateway.networking.k8s.io\", \"kind\": \"Gateway\",
                       \"namespace\": \"kopc-gateway\", \"name\": \"ctf\"},
        \"controllerName\": \"example.test/fake-gateway\",
        \"conditions\": [
          {\"type\": \"Accepted\", \"status\": \"$4\", \"reason\": \"$reason\",
           \"message\": \"said by the test\", \"observedGeneration\": $gen, \"lastTransitionTime\": \"$now\"},
          {\"type\": \"ResolvedRefs\", \"status\": \"True\", \"reason\": \"ResolvedRefs\",
           \"message\": \"\", \"observedGeneration\": $gen, \"lastTransitionTime\": \"$now\"}]}]}}" >/dev/null
}

start_operator() {
    "$OPERATOR" --kubeconfig "$WORK/operator.kubeconfig" --metrics-bind "127.0.0.1:$PORT" \
        --api-bind "127.0.0.1:$API_PORT" --gateway-domain "$DOMAIN" -v 1 >>"$WORK/op.log" 2>&1 &
    op_pid=$!
    wait_for 60 "operator ready" curl -sf "http://127.0.0.1:$PORT/readyz"
}
stop_operator() {
    kill "$op_pid" 2>/dev/null || true
    wait "$op_pid" 2>/dev/null || true
    op_pid=
}
api() { curl -sf -H "Authorization: Bearer $ADMIN_TOKEN" "http://127.0.0.1:$API_PORT$1"; }

log "cluster with --gateway-domain $DOMAIN (fake nodes: the Gateway exists, nothing serves it)"
"$DEVCLUSTER" start --dir "$DIR" --nodes 1 --gateway-domain "$DOMAIN" >/dev/null || fail "devcluster start"
k get gateway.gateway.networking.k8s.io -n kopc-gateway ctf >/dev/null || fail "no Gateway kopc-gateway/ctf"
ctf_rbac_and_samples
ctf_token_secrets team-a team-b
rbac_in_force create tlsroutes.gateway.networking.k8s.io
sa_kubeconfig "$WORK/operator.kubeconfig"
PORT=$(free_port)
API_PORT=$(free_port)
start_operator
k -n kopc-system get secret ctf-gateway-host-key >/dev/null || fail "the operator made no host key Secret"
ok "the operator starts in the gateway mode and keeps its host key in kopc-system/ctf-gateway-host-key"

log "routes, hosts, no NodePort"
challenge nc-team-a nc team-a
challenge web-team-a web team-a
challenge nc-team-b nc team-b
for c in nc-team-a web-team-a nc-team-b; do
    wait_for 90 "$c has its host in status.endpoints" has_host "$c"
done
NS_A=$(field nc-team-a .status.namespace)
NS_W=$(field web-team-a .status.namespace)
HOST_A=$(field nc-team-a '.status.endpoints[0].host')
HOST_W=$(field web-team-a '.status.endpoints[0].host')
HOST_B=$(field nc-team-b '.status.endpoints[0].host')
[[ $HOST_A =~ ^[a-z2-7]{16}\.ctf\.test$ ]] || fail "nc-team-a's host '$HOST_A' is not <16 base32>.$DOMAIN"
[ "$(field nc-team-a '.status.endpoints[0].port')" = 443 ] || fail "nc-team-a's endpoint port is not 443"
[ "$(field nc-team-a '.status.endpoints[0].address')" = "$HOST_A:443" ] || fail "nc-team-a's address is not host:443"
[ "$(field web-team-a '.status.endpoints[0].address')" = "https://$HOST_W" ] || fail "web-team-a's address is not https://host"
[ "$HOST_A" != "$HOST_B" ] || fail "team-a and team-b share the host $HOST_A"
wait_for 60 "TLSRoute tcp in $NS_A" route_host "$NS_A" tlsroute tcp
[ "$(route_host "$NS_A" tlsroute tcp)" = "$HOST_A" ] || fail "TLSRoute tcp's hostname is not $HOST_A"
wait_for 60 "HTTPRoute in $NS_W" route_host "$NS_W" httproute "$(field web-team-a '.status.endpoints[0].name')"
[ "$(route_host "$NS_W" httproute "$(field web-team-a '.status.endpoints[0].name')")" = "$HOST_W" ] ||
    fail "the HTTPRoute's hostname is not $HOST_W"
parent=$(k -n "$NS_A" get tlsroute.gateway.networking.k8s.io tcp -o jsonpath='{.spec.parentRefs[0].namespace}/{.spec.parentRefs[0].name}/{.spec.parentRefs[0].sectionName}')
[ "$parent" = kopc-gateway/ctf/tls ] || fail "the TLSRoute's parent is '$parent', not kopc-gateway/ctf/tls"
backend=$(k -n "$NS_A" get tlsroute.gateway.networking.k8s.io tcp -o jsonpath='{.spec.rules[0].backendRefs[0].name}:{.spec.rules[0].backendRefs[0].port}')
[ "$backend" = tcp:1337 ] || fail "the TLSRoute's backend is '$backend', not the Service tcp:1337"
ok "a TLSRoute (tcp) and an HTTPRoute (web) with the hosts the status shows; another team, another host"

nodeports=$(k get svc -A -l app.kubernetes.io/managed-by=kopc-ctf -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}={.spec.type} {end}')
[ -n "$nodeports" ] || fail "no instance Service at all"
grep -q NodePort <<<"$nodeports" && fail "NodePort Services exist in the gateway mode: $nodeports"
[ "$(k -n "$NS_A" get resourcequota instance -o jsonpath='{.spec.hard.services\.nodeports}')" = 0 ] ||
    fail "the quota of $NS_A allows NodePorts"
# The quota enforces it: a NodePort Service in the instance's namespace is refused.
if k -n "$NS_A" create service nodeport sneaky --tcp=1337:1337 >/dev/null 2>&1; then
    fail "a NodePort Service could be made in $NS_A"
fi
from=$(k -n "$NS_A" get networkpolicy allow-exposed-echo -o jsonpath='{.spec.ingress[0].from[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name}')
[ "$from" = kopc-gateway ] || fail "allow-exposed-echo admits '$from', not the gateway's namespace"
ok "no NodePort Service (the quota refuses one); the exposed port admits the gateway's namespace only"

log "no gateway answers: not Running, and the reason names the gateway"
wait_for 120 "nc-team-a's pods available" deployments_available "$NS_A"
wait_for 60 "nc-team-a says it waits for the gateway" message_has nc-team-a "waiting for gateway kopc-gateway/ctf to accept TLSRoute $NS_A/tcp"
status_is nc-team-a Pending || fail "nc-team-a is $(field nc-team-a .status.currentStatus) without a gateway"
ready_reason_is nc-team-a GatewayPending || fail "nc-team-a's Ready reason is not GatewayPending"
view=$(api /api/v1/teams/team-a/instances/nc) || fail "API GET instance"
python3 -c "
import json, sys
v = json.loads(sys.argv[1]); e = v['endpoints'][0]
assert v['status'] == 'Pending', v
assert e['host'] == '$HOST_A' and e['port'] == 443 and e['address'] == '$HOST_A:443', e
assert 'waiting for gateway kopc-gateway/ctf' in v['message'], v['message']
" "$view" || fail "the API's Instance view lacks the host and port or the gateway's reason: $view"
ok "pods Ready, no gateway: Pending, GatewayPending, and the API shows host, port 443 and why"

log "the gateway's word, in the route's status, wakes the Challenge"
gateway_says "$NS_A" tlsroute tcp True
wait_for 60 "nc-team-a Running once the gateway accepts its route" status_is nc-team-a Running
ok "accepted by kopc-gateway/ctf: Running (the route watch woke it)"
web_route=$(field web-team-a '.status.endpoints[0].name')
wait_for 120 "web-team-a's pods available" deployments_available "$NS_W"
gateway_says "$NS_W" httproute "$web_route" False NotAllowedByListeners
wait_for 60 "web-team-a shows the refusal" ready_reason_is web-team-a RouteNotAccepted
message_has web-team-a "Accepted=False NotAllowedByListeners" || fail "web-team-a's message lacks the gateway's reason: $(field web-team-a .status.message)"
status_is web-team-a Running && fail "web-team-a is Running behind a refused route"
ok "refused (NotAllowedByListeners): RouteNotAccepted with the gateway's reason, never Running"

log "the host is stable across stop and start, and across an operator restart"
kc delete chal nc-team-a --wait=false >/dev/null
wait_for 120 "nc-team-a gone" gone nc-team-a
wait_for 120 "$NS_A gone" ns_gone "$NS_A"
challenge nc-team-a nc team-a
wait_for 90 "nc-team-a's route again" route_host "$NS_A" tlsroute tcp
[ "$(route_host "$NS_A" tlsroute tcp)" = "$HOST_A" ] || fail "after stop and start the host changed: $(route_host "$NS_A" tlsroute tcp) != $HOST_A"
stop_operator
start_operator
wait_for 60 "nc-team-a's host after a restart" host_is nc-team-a "$HOST_A"
[ "$(field nc-team-b '.status.endpoints[0].host')" = "$HOST_B" ] || fail "team-b's host changed over a restart"
ok "the same host after Stop+Start ($HOST_A) and after an operator restart"

log "warm pools: no route while warm, the team's route at the claim, no pod restart"
kc get chaldef nc -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': 'warmnc', 'namespace': 'ctf'}
o.pop('status', None)
o['spec']['pool'] = {'min': 1}
print(json.dumps(o))" | k apply -f - >/dev/null
warm_ns() { k get ns -l 'ctf.kopc.io/definition=warmnc,ctf.kopc.io/pool' -o jsonpath='{.items[0].metadata.name}'; }
wait_for 120 "warmnc's pool of 1 Ready" pool_ready_is warmnc 1
WARM=$(warm_ns)
[ -n "$WARM" ] || fail "no warm namespace"
[ -z "$(k -n "$WARM" get tlsroute.gateway.networking.k8s.io -o name)" ] || fail "the unclaimed warm instance $WARM has a route"
pod_uid=$(k -n "$WARM" get pod -o jsonpath='{.items[0].metadata.uid}')
challenge warmnc-team-a warmnc team-a
wait_for 60 "warmnc-team-a claimed the warm instance" namespace_is warmnc-team-a "$WARM"
wait_for 60 "the claimed instance's route" route_host "$WARM" tlsroute tcp
HOST_C=$(route_host "$WARM" tlsroute tcp)
[ "$HOST_C" = "$(field warmnc-team-a '.status.endpoints[0].host')" ] || fail "the claimed route's host is not the status's"
[ "$(k -n "$WARM" get tlsroute.gateway.networking.k8s.io tcp -o jsonpath='{.metadata.labels.ctf\.kopc\.io/team}')" = team-a ] ||
    fail "the claimed route is not labelled with its team"
[ "$(k -n "$WARM" get pod -o jsonpath='{.items[0].metadata.uid}')" = "$pod_uid" ] || fail "the claim restarted the warm pod"
wait_for 60 "warmnc-team-a waits for the gateway" message_has warmnc-team-a "waiting for gateway kopc-gateway/ctf"
gateway_says "$WARM" tlsroute tcp True
wait_for 60 "warmnc-team-a Running once accepted" status_is warmnc-team-a Running
ok "the warm instance had no route; claimed, it has team-a's ($HOST_C), the same pod, and runs once accepted"

log "the participant page and the CTFd plugin's view in Chromium (test/e2e/page/gateway_page_test.mjs)"
[ -x "$CHROMIUM" ] || fail "no Chromium at $CHROMIUM: tools/install-deps.sh installs the Debian package chromium"
[ -f "$SRC/test/e2e/page/node_modules/playwright-core/package.json" ] ||
    fail "test/e2e/page/node_modules is missing: run npm ci --prefix test/e2e/page (make test does)"
gateway_says "$NS_A" tlsroute tcp True
gateway_says "$NS_W" httproute "$web_route" True
wait_for 60 "nc-team-a Running (its new route accepted)" status_is nc-team-a Running
wait_for 60 "web-team-a Running once its route is accepted" status_is web-team-a Running
# What the CTFd plugin's route answers for these instances: the API's view
# through the plugin's mapping.player_view (the rest of CTFd is e2e_ctfd's).
for c in nc web; do
    api "/api/v1/teams/team-a/instances/$c" | PYTHONPATH="$SRC/integrations/ctfd/kopc_ctfd" python3 -c '
import json, sys
from mapping import player_view
print(json.dumps({"success": True, "data": player_view(json.load(sys.stdin), sys.argv[1])}))' "$c" >"$WORK/ctfd-$c.json" ||
        fail "the plugin's view of $c"
done
PAGE_URL="http://127.0.0.1:$API_PORT/" PAGE_TEAM=team-a PAGE_TOKEN="${TOKENS[team-a]}" \
    PAGE_TCP=nc PAGE_TCP_HOST="$HOST_A" PAGE_HTTP=web PAGE_HTTP_HOST="$HOST_W" PAGE_OTHER_HOST="$HOST_B" \
    PAGE_CTFD_TCP="$WORK/ctfd-nc.json" PAGE_CTFD_HTTP="$WORK/ctfd-web.json" PAGE_SRC="$SRC" \
    PAGE_ARTIFACTS="$ARTIFACTS" CHROMIUM="$CHROMIUM" "$NODE" "$SRC/test/e2e/page/gateway_page_test.mjs" ||
    fail "the page in the gateway mode (screenshots in $ARTIFACTS)"
ok "the page and the CTFd view show ncat/openssl/pwntools with team-a's host (Copy exact) and https://$HOST_W"

stop_operator
forbidden=$(grep -c 'Forbidden' "$WORK/op.log" || true)
[ "$forbidden" = 0 ] || fail "the operator met $forbidden Forbidden answers with its RBAC"
ok "no Forbidden in the operator's log"
echo "PASS ($passed checks)"
