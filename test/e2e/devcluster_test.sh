#!/usr/bin/env bash
# devcluster_test.sh - the devcluster is a real cluster: nodes become Ready,
# deployments run their pods, the garbage collector and the namespace
# controller clean up, CRD schemas validate, service accounts get tokens,
# RBAC is enforced, it listens on loopback only, stop/start on the same
# DIR keeps the data, and --gateway-domain makes the Gateway API objects
# (CRDs, Gateway, a name-constrained wildcard certificate) and keeps them.
# Driven by real kubectl; nothing is mocked.
#
# Env: DEVCLUSTER, KUBECTL (binaries), KOP_TEST_TMP (scratch directory).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?path to devcluster}
KUBECTL=${KUBECTL:?path to kubectl}
mkdir -p "${KOP_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/devcluster.XXXXXX")
DIR=$WORK/cluster
OTHER=$WORK/other
NODES=2

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$DIR/devcluster.log" ] && { echo "--- tail of devcluster.log" >&2; tail -40 "$DIR/devcluster.log" >&2; }
    fail_summary "$*"
    exit 1
}
k() { "$KUBECTL" --kubeconfig "$DIR/kubeconfig" --request-timeout=30s "$@"; }

cleanup() {
    "$DEVCLUSTER" stop --dir "$OTHER" >/dev/null 2>&1 || true
    "$DEVCLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

log "start a cluster with $NODES nodes"
t0=$SECONDS
"$DEVCLUSTER" start --dir "$DIR" --nodes $NODES || fail "devcluster start failed"
echo "started in $((SECONDS - t0))s"
for f in kubeconfig ca.crt devcluster.pid; do
    [ -s "$DIR/$f" ] || fail "$DIR/$f missing after start"
done
"$DEVCLUSTER" status --dir "$DIR" >/dev/null || fail "status says not running"
ok "start leaves kubeconfig, ca.crt and a pid file"

if out=$("$DEVCLUSTER" start --dir "$DIR" 2>&1); then
    fail "a second start on a running DIR succeeded"
fi
grep -q "already running" <<<"$out" || fail "second start did not say so: $out"
ok "a second start on a running DIR is refused"

ready=$(k get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true)
[ "$ready" -eq $NODES ] || fail "want $NODES Ready nodes, got $ready: $(k get nodes 2>&1)"
ok "kubectl get nodes lists $NODES Ready nodes"

ver=$(k version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')
want=$(k version --client -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])')
[[ $ver =~ ^v1\.[0-9]+\.[0-9]+$ ]] || fail "/version reports $ver, not a release version"
[ "$ver" = "$want" ] || fail "server $ver differs from the kubectl built beside it ($want)"
ok "/version reports the real Kubernetes version ($ver)"

log "loopback only"
pid=$(cat "$DIR/devcluster.pid")
python3 - "$pid" <<'PY' || fail "devcluster listens beyond loopback"
import os, sys
pid = sys.argv[1]
inodes = set()
for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        continue
    if target.startswith("socket:["):
        inodes.add(target[8:-1])
bad, listening = [], 0
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    with open(table) as f:
        next(f)
        for line in f:
            cols = line.split()
            local, st, inode = cols[1], cols[3], cols[9]
            if st != "0A" or inode not in inodes:
                continue
            listening += 1
            addr = local.split(":")[0]
            # 127.0.0.0/8 (little-endian hex: ends in 7F; the apiserver's
            # private address is 127.0.0.2) or ::1.
            v4_loopback = len(addr) == 8 and addr.endswith("7F")
            if not v4_loopback and addr != "00000000000000000000000001000000":
                bad.append(local)
print(f"{listening} listening sockets, non-loopback: {bad}")
sys.exit(1 if bad or listening == 0 else 0)
PY
ok "every listening socket is on loopback"

log "a deployment of 3 replicas runs"
k create deployment web --image=registry.example/web:1 --replicas=3 >/dev/null
k rollout status deployment/web --timeout=120s >/dev/null || fail "rollout did not finish: $(k get pods 2>&1)"
running=$(k get pods -l app=web -o jsonpath='{range .items[*]}{.status.phase}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^Running/True$' || true)
[ "$running" -eq 3 ] || fail "want 3 pods Running and Ready, got $running: $(k get pods -o wide 2>&1)"
ok "3 pods Running and Ready"

pod=$(k get pods -l app=web -o jsonpath='{.items[0].metadata.name}')
vols=$(k get pod "$pod" -o jsonpath="{.spec.volumes[*].projected.sources[*].serviceAccountToken.path}")
grep -q token <<<"$vols" ||
    fail "pod $pod has no projected service-account token"
tok=$(k create token default --duration=10m)
who=$("$KUBECTL" --server "$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')" \
    --certificate-authority "$DIR/ca.crt" --token "$tok" auth whoami -o jsonpath='{.status.userInfo.username}')
[ "$who" = "system:serviceaccount:default:default" ] || fail "service-account token authenticated as '$who'"
ok "service-account tokens are signed and accepted"

[ "$(k auth can-i list secrets -n kube-system --as=system:serviceaccount:default:default || true)" = "no" ] ||
    fail "RBAC lets a plain service account list kube-system secrets"
admin_token=$(cat "$DIR/admin.token")
"$KUBECTL" --server "$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')" \
    --certificate-authority "$DIR/ca.crt" --token "$admin_token" get namespace kube-system >/dev/null ||
    fail "the admin token is refused"
ok "RBAC is enforced and the admin token works"

k delete deployment web --wait=true >/dev/null
wait_for 120 "replicaset and pods of web garbage-collected" \
    bash -c "[ -z \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get rs,pods -l app=web -o name)\" ]"
ok "deleting the deployment garbage-collects its replicaset and pods"

log "namespace deletion"
k create namespace doomed >/dev/null
k -n doomed create configmap c1 --from-literal=a=b >/dev/null
k -n doomed create deployment d1 --image=registry.example/x:1 --replicas=2 >/dev/null
k -n doomed rollout status deployment/d1 --timeout=120s >/dev/null
k delete namespace doomed --wait=false >/dev/null
wait_for 180 "namespace doomed to disappear" bash -c "! '$KUBECTL' --kubeconfig '$DIR/kubeconfig' get namespace doomed"
ok "deleting a namespace removes its content and then the namespace"

log "custom resources"
cat >"$WORK/crd.yaml" <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.kopc.io
spec:
  group: test.kopc.io
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10}
YAML
k apply -f "$WORK/crd.yaml" >/dev/null
k wait --for=condition=Established crd/widgets.test.kopc.io --timeout=60s >/dev/null || fail "CRD not Established"
wait_for 60 "widgets to be served" "$KUBECTL" --kubeconfig "$DIR/kubeconfig" get widgets
printf 'apiVersion: test.kopc.io/v1\nkind: Widget\nmetadata: {name: good}\nspec: {size: 3}\n' | k apply -f - >/dev/null ||
    fail "a valid Widget was refused"
if out=$(printf 'apiVersion: test.kopc.io/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {size: 42}\n' | k apply -f - 2>&1); then
    fail "a Widget with size 42 was accepted"
fi
grep -q "spec.size" <<<"$out" || fail "rejection does not name the field: $out"
k get widget bad >/dev/null 2>&1 && fail "the invalid Widget exists"
ok "a CRD becomes Established and its schema rejects an invalid field"

log "a failure to start says why"
port=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}' | sed 's/.*://')
if out=$("$DEVCLUSTER" start --dir "$OTHER" --port "$port" 2>&1); then
    fail "a second cluster started on a port already in use"
fi
grep -qi "address already in use" <<<"$out" || fail "start failure does not give the component's error: $out"
ok "a start on a busy port fails with the component's error"

log "stop and start keep the data"
k create configmap keepme --from-literal=answer=42 >/dev/null
"$DEVCLUSTER" stop --dir "$DIR" || fail "stop failed"
[ ! -e "$DIR/devcluster.pid" ] || fail "pid file left after stop"
if "$DEVCLUSTER" status --dir "$DIR" >/dev/null; then fail "status says running after stop"; fi
# Gone, or a zombie when the sandbox's init does not reap orphans.
state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
[ -z "$state" ] || [ "$state" = Z ] || fail "process $pid still alive after stop (state $state)"
ok "stop ends the cluster"
"$DEVCLUSTER" start --dir "$DIR" --nodes $NODES || fail "restart failed"
[ "$(k get configmap keepme -o jsonpath='{.data.answer}')" = 42 ] || fail "configmap lost across stop/start"
k get widget good >/dev/null || fail "custom object lost across stop/start"
ready=$(k get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true)
[ "$ready" -eq $NODES ] || fail "after restart want $NODES Ready nodes, got $ready"
ok "stop/start on the same DIR keeps objects"

log "the gateway's objects (--gateway-domain; fake nodes: nothing serves them)"
"$DEVCLUSTER" stop --dir "$DIR" >/dev/null || fail "stop before the gateway failed"
if out=$("$DEVCLUSTER" start --dir "$DIR" --gateway-domain Not_A_Domain 2>&1); then
    fail "a start with an invalid gateway domain succeeded"
fi
grep -q "RFC 1123" <<<"$out" || fail "an invalid gateway domain is refused without saying why: $out"
"$DEVCLUSTER" start --dir "$DIR" --gateway-domain gw.test || fail "start --gateway-domain gw.test failed"
for crd in gatewayclasses gateways httproutes tlsroutes referencegrants; do
    [ "$(k get crd "$crd.gateway.networking.k8s.io" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" = True ] ||
        fail "CRD $crd is not Established"
done
[ "$(k get gatewayclass traefik -o jsonpath='{.spec.controllerName}')" = traefik.io/gateway-controller ] ||
    fail "no GatewayClass traefik"
listeners=$(k -n kopc-gateway get gateway ctf -o jsonpath='{range .spec.listeners[*]}{.name}/{.protocol}/{.port}/{.hostname}/{.tls.mode}/{.tls.certificateRefs[0].name} {end}')
[ "$listeners" = "tls/TLS/443/*.gw.test/Terminate/wildcard-tls https/HTTPS/443/*.gw.test/Terminate/wildcard-tls " ] ||
    fail "the Gateway's listeners are: $listeners"
k -n kopc-gateway get secret wildcard-tls -o jsonpath='{.data.tls\.crt}' | base64 -d >"$WORK/gw.crt"
openssl verify -CAfile "$DIR/gateway/ca.crt" -verify_hostname x.gw.test "$WORK/gw.crt" >/dev/null ||
    fail "the Secret's certificate does not verify for x.gw.test against gateway/ca.crt"
! openssl verify -CAfile "$DIR/gateway/ca.crt" -verify_hostname x.other.test "$WORK/gw.crt" >/dev/null 2>&1 ||
    fail "the certificate verifies for a host outside the domain"
openssl x509 -in "$DIR/gateway/ca.crt" -noout -ext nameConstraints | grep -q "DNS:gw.test" ||
    fail "the gateway CA has no name constraint to gw.test"
ok "CRDs Established; GatewayClass traefik; Gateway kopc-gateway/ctf: TLS Terminate and HTTPS on 443 for *.gw.test; its certificate verifies against a CA constrained to gw.test"
k apply -f - >/dev/null <<'EOF' || fail "a v1 TLSRoute was refused"
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: r}
spec:
  parentRefs: [{name: ctf, namespace: kopc-gateway, sectionName: tls}]
  hostnames: [abc.gw.test]
  rules: [{backendRefs: [{name: s, port: 1337}]}]
EOF
[ "$(k get tlsroutes.v1alpha2.gateway.networking.k8s.io r -o jsonpath='{.spec.hostnames[0]}' 2>/dev/null)" = abc.gw.test ] ||
    fail "a v1 TLSRoute cannot be read as v1alpha2 (what Traefik v3.6 reads)"
"$DEVCLUSTER" stop --dir "$DIR" >/dev/null || fail "stop failed"
"$DEVCLUSTER" start --dir "$DIR" >/dev/null || fail "restart with the gateway failed"
grep -q '"gatewayDomain": "gw.test"' "$DIR/devcluster.json" || fail "a restart forgot the gateway: $(cat "$DIR/devcluster.json")"
cmp -s "$WORK/gw.crt" <(k -n kopc-gateway get secret wildcard-tls -o jsonpath='{.data.tls\.crt}' | base64 -d) ||
    fail "a restart made a new certificate"
ok "a v1 TLSRoute is stored and read as v1alpha2; a restart keeps the gateway and its certificate"

"$DEVCLUSTER" stop --dir "$DIR" >/dev/null
echo "$passed passed, 0 failed"
