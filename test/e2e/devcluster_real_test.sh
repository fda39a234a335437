#!/usr/bin/env bash
# devcluster_real_test.sh - real nodes run real containers: a Deployment of
# the sample TCP challenge becomes Ready on the real node (its readiness probe
# decides), a NodePort Service answers from this machine with the greeting,
# a default-deny NetworkPolicy cuts a second pod off while an allow rule lets
# it through, a missing image ends ImagePullBackOff and a crashing program
# CrashLoopBackOff, exec and logs reach the container, cluster DNS answers,
# the gateway (--gateway: Traefik's Gateway API provider) routes TLS by SNI
# to a TCP Service and HTTPS by Host to a web one, and refuses an unknown
# host, and after `stop` nothing the cluster made is left on the machine: no
# process, mount, link, route, firewall rule or cgroup.
#
# A node that cannot start fails the test with the kubelet's or containerd's
# own words (fail() prints their logs); nothing here is skipped.
#
# Env: DEVCLUSTER, KUBECTL (binaries), SRC (source tree), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?path to devcluster}
KUBECTL=${KUBECTL:?path to kubectl}
SRC=${SRC:?source tree}
mkdir -p "${KOP_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/devcluster-real.XXXXXX")
DIR=$WORK/cluster
IMG=registry.devcluster.test/kopc/ctf-greeter
BB=registry.devcluster.test/e2e/busybox:1

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    real_node_logs "$DIR" >&2
    fail_summary "$*"
    exit 1
}
k() { "$KUBECTL" --kubeconfig "$DIR/kubeconfig" --request-timeout=30s "$@"; }

cleanup() {
    "$DEVCLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# What the host looks like before: the leftover check compares against it.
host_state() {
    echo "## links"; ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
    echo "## routes"; ip -4 route show | sort
    echo "## nft"; { nft list tables 2>/dev/null || true; } | sort
    echo "## iptables"; { iptables-save 2>/dev/null || true; } | sed -e '/^#/d' -e 's/\[[0-9:]*\]//' | sort
    echo "## mounts"; awk '{print $2}' /proc/self/mounts | sort
}
host_state >"$WORK/before"

log "start a cluster with one real node, one fake node and the gateway"
t0=$SECONDS
"$DEVCLUSTER" start --dir "$DIR" --nodes 1 --real-nodes 1 --gateway || fail "devcluster start --real-nodes 1 --gateway failed"
echo "started in $((SECONDS - t0))s"
node_ip=$(k get node real-node-0 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
[ -n "$node_ip" ] || fail "real-node-0 has no InternalIP"
runtime=$(k get node real-node-0 -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')
[[ $runtime == containerd://* ]] || fail "real-node-0 runs '$runtime', not containerd"
kubelet=$(k get node real-node-0 -o jsonpath='{.status.nodeInfo.kubeletVersion}')
[ "$kubelet" = "$(k version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')" ] ||
    fail "the kubelet ($kubelet) is not the cluster's version"
ok "real-node-0 is Ready at $node_ip: kubelet $kubelet, $runtime"
k get node kwok-node-0 -o jsonpath='{.spec.taints[*].key}' | grep -q kwok.x-k8s.io/node ||
    fail "the fake node is not tainted in a cluster with real nodes"
ok "the fake node is tainted, so pods go to the real node unless they tolerate it"

log "images built here, pulled from the cluster's registry"
"$SRC/tools/images.sh" "$DIR" greeter >"$WORK/refs" || fail "tools/images.sh failed"
"$SRC/tools/images.sh" "$DIR" webflag >/dev/null || fail "tools/images.sh webflag failed"
"$DEVCLUSTER" image --dir "$DIR" --name e2e/busybox:1 --entrypoint /bin/sh >/dev/null ||
    fail "devcluster image (busybox base) failed"
again=$("$SRC/tools/images.sh" "$DIR" greeter)
[ "$again" = "$(cat "$WORK/refs")" ] || fail "a rebuild changed the digest: $(cat "$WORK/refs") vs $again"
ok "images pushed; a rebuild gives the same digest ($(cut -d@ -f2 "$WORK/refs" | cut -c1-19))"

log "a Deployment of the TCP challenge on the real node"
version=$(sed -n 's/^project(kopc VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
k apply -f - >/dev/null <<EOF || fail "apply greeter"
apiVersion: apps/v1
kind: Deployment
metadata: {name: greeter, labels: {app: greeter}}
spec:
  selector: {matchLabels: {app: greeter}}
  template:
    metadata: {labels: {app: greeter}}
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: greeter
        image: $IMG:$version
        env: [{name: FLAG, value: "flag{e2e-real-node}"}, {name: CHALLENGE, value: e2e}]
        ports: [{containerPort: 1337}]
        readinessProbe: {tcpSocket: {port: 1337}, periodSeconds: 1}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
---
apiVersion: v1
kind: Service
metadata: {name: greeter}
spec:
  type: NodePort
  selector: {app: greeter}
  ports: [{port: 1337, targetPort: 1337}]
EOF
k rollout status deploy/greeter --timeout=180s >/dev/null || fail "greeter not Ready: $(k get pods -o wide 2>&1)"
pod_node=$(k get pods -l app=greeter -o jsonpath='{.items[0].spec.nodeName}')
[ "$pod_node" = real-node-0 ] || fail "greeter runs on $pod_node"
ok "the Deployment is Ready on real-node-0"

greet() { # greet HOST PORT: the first line the challenge sends
    python3 - "$1" "$2" <<'PY'
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
s.settimeout(5)
data = b""
while not data.endswith(b"\n"):
    chunk = s.recv(256)
    if not chunk:
        break
    data += chunk
print(data.decode().strip())
PY
}
np=$(k get svc greeter -o jsonpath='{.spec.ports[0].nodePort}')
wait_for 60 "NodePort $node_ip:$np to answer" greet "$node_ip" "$np"
line=$(greet "$node_ip" "$np")
[ "$line" = "Welcome to e2e. Your flag: flag{e2e-real-node}" ] || fail "NodePort answered '$line'"
ok "the NodePort answers from this machine: $line"

grep -q "listening on port 1337" <<<"$(k logs deploy/greeter)" || fail "kubectl logs lacks the program's output"
uid=$(k exec deploy/greeter -- id -u) || fail "kubectl exec failed"
[ "$uid" != 0 ] || fail "the container runs as root"
ok "kubectl logs and exec reach the container (uid $uid)"

log "a readiness probe decides Ready"
k apply -f - >/dev/null <<EOF || fail "apply unready"
apiVersion: v1
kind: Pod
metadata: {name: unready}
spec:
  containers:
  - name: c
    image: $IMG:$version
    readinessProbe: {tcpSocket: {port: 9999}, periodSeconds: 1}
EOF
unready_probe_failed() {
    k get events --field-selector involvedObject.name=unready,reason=Unhealthy -o name | grep -q .
}
wait_for 120 "the readiness probe of 'unready' to fail" unready_probe_failed
[ "$(k get pod unready -o jsonpath='{.status.phase}/{.status.conditions[?(@.type=="Ready")].status}')" = Running/False ] ||
    fail "unready: $(k get pod unready -o wide)"
ok "a running container whose probe fails stays not Ready"

log "NetworkPolicy is enforced (kube-router)"
k run client --image=$BB --labels=role=client --restart=Never -- -c 'sleep 3600' >/dev/null
k run other --image=$BB --labels=role=other --restart=Never -- -c 'sleep 3600' >/dev/null
k wait --for=condition=Ready pod/client pod/other --timeout=120s >/dev/null || fail "client pods not Ready"
pod_ip=$(k get pods -l app=greeter -o jsonpath='{.items[0].status.podIP}')
reach() { # reach POD: POD's connection to the greeter gets the greeting
    k exec "$1" -- sh -c "nc -w 3 $pod_ip 1337 </dev/null" 2>/dev/null | grep -q "Your flag"
}
reach client || fail "client cannot reach the greeter before any policy"
reach other || fail "other cannot reach the greeter before any policy"
ok "with no policy, both pods reach the greeter"
k apply -f - >/dev/null <<'EOF'
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny}
spec:
  podSelector: {}
  policyTypes: [Ingress]
EOF
not_reach() { ! reach "$1"; }
wait_for 60 "default-deny to cut 'client' off" not_reach client
not_reach other || fail "other still reaches the greeter under default-deny"
ok "default-deny: no pod reaches the greeter"
k apply -f - >/dev/null <<'EOF'
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-client}
spec:
  podSelector: {matchLabels: {app: greeter}}
  ingress: [{from: [{podSelector: {matchLabels: {role: client}}}], ports: [{port: 1337}]}]
EOF
wait_for 60 "allow-client to let 'client' through" reach client
not_reach other || fail "other reaches the greeter though only role=client is allowed"
ok "an allow rule lets role=client through and nobody else"
k delete networkpolicy default-deny allow-client >/dev/null
wait_for 60 "'other' to reach the greeter again once the policies are gone" reach other
ok "removing the policies opens the way again"

log "cluster DNS and Services by name"
k exec client -- nslookup greeter.default.svc.cluster.local >"$WORK/dns" 2>&1 || fail "nslookup: $(cat "$WORK/dns")"
grep -q "$(k get svc greeter -o jsonpath='{.spec.clusterIP}')" "$WORK/dns" || fail "DNS gave: $(cat "$WORK/dns")"
k exec client -- sh -c 'nc -w 3 greeter 1337 </dev/null' | grep -q "Your flag" || fail "greeter:1337 by name failed"
ok "CoreDNS resolves Services; a pod reaches one by name through kube-proxy"

log "the gateway: TLS by SNI to a TCP Service, HTTPS by Host to a web one"
DOMAIN=ctf.localhost
gw_port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gatewayPort"])' "$DIR/devcluster.json")
[ "$(k -n kopc-gateway get gateway ctf -o jsonpath='{.status.conditions[?(@.type=="Programmed")].status}')" = True ] ||
    fail "the Gateway is not Programmed: $(k -n kopc-gateway get gateway ctf -o yaml)"
ok "the Gateway kopc-gateway/ctf is Programmed; the host reaches it on 127.0.0.1:$gw_port"
k apply -f - >/dev/null <<EOF || fail "apply the routes"
apiVersion: v1
kind: Service
metadata: {name: greeter-gw}
spec:
  selector: {app: greeter}
  ports: [{port: 1337, targetPort: 1337}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: greeter}
spec:
  parentRefs: [{name: ctf, namespace: kopc-gateway, sectionName: tls}]
  hostnames: [x.$DOMAIN]
  rules: [{backendRefs: [{name: greeter-gw, port: 1337}]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: web
        image: registry.devcluster.test/kopc/ctf-webflag:$version
        env: [{name: FLAG, value: "flag{e2e-gateway-web}"}]
        ports: [{containerPort: 8080}]
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: ctf, namespace: kopc-gateway, sectionName: https}]
  hostnames: [w.$DOMAIN]
  rules: [{backendRefs: [{name: web, port: 80}]}]
EOF
k rollout status deploy/web --timeout=180s >/dev/null || fail "web not Ready: $(k get pods -o wide 2>&1)"
# route_status KIND NAME TYPE: the status of condition TYPE that Traefik wrote.
route_status() {
    k get "$1" "$2" -o jsonpath="{.status.parents[?(@.controllerName==\"traefik.io/gateway-controller\")].conditions[?(@.type==\"$3\")].status}"
}
accepted() { [ "$(route_status "$1" "$2" Accepted)" = True ] && [ "$(route_status "$1" "$2" ResolvedRefs)" = True ]; }
wait_for 60 "Traefik to accept the TLSRoute" accepted tlsroute greeter
wait_for 60 "Traefik to accept the HTTPRoute" accepted httproute web
echo "TLSRoute status: $(k get tlsroute greeter -o jsonpath='{.status}')"
ok "Traefik accepts the TLSRoute (TLS listener, Terminate) and the HTTPRoute: Accepted and ResolvedRefs True"

# sni HOST: what a participant's openssl sees through the gateway for HOST,
# the gateway's certificate checked against DIR/gateway/ca.crt.
sni() {
    printf 'quit\n' | timeout 20 openssl s_client -quiet -connect "127.0.0.1:$gw_port" -servername "$1" \
        -verify_hostname "$1" -CAfile "$DIR/gateway/ca.crt" -verify_return_error 2>&1
}
greets() { sni "x.$DOMAIN" | grep -q "Your flag: flag{e2e-real-node}"; }
wait_for 60 "x.$DOMAIN to answer through the gateway" greets
line=$(sni "x.$DOMAIN" | grep "Your flag")
ok "openssl s_client -servername x.$DOMAIN reaches the TCP pod, certificate verified: $line"
other=$(sni "nobody.$DOMAIN" || true)
! grep -q "Your flag" <<<"$other" || fail "an unknown SNI reached the greeter: $other"
echo "an unknown SNI got: $(tr '\n' ' ' <<<"$other" | cut -c1-300)"
ok "an unknown SNI does not reach the TCP pod"
# Traefik writes a route's status when it builds its configuration and applies that
# configuration a moment later (its providers' throttle): Accepted is not yet serving.
# The first run met a 404 right after Accepted; wait for the answer instead.
web() { curl -sS --max-time 20 --cacert "$DIR/gateway/ca.crt" --resolve "w.$DOMAIN:$gw_port:127.0.0.1" \
    "https://w.$DOMAIN:$gw_port/flag"; }
serves_web() { [ "$(web 2>/dev/null)" = "flag{e2e-gateway-web}" ]; }
wait_for 60 "https://w.$DOMAIN/flag to answer through the gateway" serves_web
web_flag=$(web) || fail "https://w.$DOMAIN/flag failed"
[ "$web_flag" = "flag{e2e-gateway-web}" ] || fail "https://w.$DOMAIN/flag answered '$web_flag'"
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 20 --cacert "$DIR/gateway/ca.crt" \
    --resolve "nobody.$DOMAIN:$gw_port:127.0.0.1" "https://nobody.$DOMAIN:$gw_port/flag") || true
[ "$code" = 404 ] || fail "an unknown Host answered $code, not 404"
ok "https with Host w.$DOMAIN reaches the web pod ($web_flag); an unknown Host gets 404"

log "the gateway: a pod that turns ready after its route was built (Traefik v3.6 and EndpointSlices)"
# The first real-node run of the CTF operator's gateway mode met "503 no
# available server" for 20 s from a web instance just Accepted. Reading Traefik
# v3.6's source suggested it drops EndpointSlice updates that only flip
# readiness (traefik/traefik#13405); this checks that a route built while its
# pod starts serves once the pod is ready, with Traefik tracking the endpoints
# and with traefik.io/service.nativelb (the ClusterIP). It does, both: that
# hypothesis is not what happened (docs/devcluster.md).
k apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: late, labels: {app: late}}
spec:
  selector: {matchLabels: {app: late}}
  template:
    metadata: {labels: {app: late}}
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: web
        image: registry.devcluster.test/kopc/ctf-webflag:$version
        env: [{name: FLAG, value: "flag{e2e-gateway-late}"}]
        ports: [{containerPort: 8080}]
        readinessProbe: {tcpSocket: {port: 8080}, initialDelaySeconds: 12, periodSeconds: 1}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
---
apiVersion: v1
kind: Service
metadata: {name: late}
spec:
  selector: {app: late}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: late-native, annotations: {traefik.io/service.nativelb: "true"}}
spec:
  selector: {app: late}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: late}
spec:
  parentRefs: [{name: ctf, namespace: kopc-gateway, sectionName: https}]
  hostnames: [l.$DOMAIN]
  rules: [{backendRefs: [{name: late, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: late-native}
spec:
  parentRefs: [{name: ctf, namespace: kopc-gateway, sectionName: https}]
  hostnames: [ln.$DOMAIN]
  rules: [{backendRefs: [{name: late-native, port: 80}]}]
EOF
wait_for 60 "Traefik to accept the HTTPRoute late" accepted httproute late
wait_for 60 "Traefik to accept the HTTPRoute late-native" accepted httproute late-native
# code_of HOST: the status code of https://HOST/flag through the gateway.
code_of() { curl -sS -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$DIR/gateway/ca.crt" \
    --resolve "$1:$gw_port:127.0.0.1" "https://$1:$gw_port/flag" 2>/dev/null || true; }
before=$(code_of "l.$DOMAIN")
k wait --for=condition=Ready pod -l app=late --timeout=120s >/dev/null || fail "the late pod never turned Ready"
t_ready=$SECONDS
plain_serves() { [ "$(code_of "l.$DOMAIN")" = 200 ]; }
native_serves() { [ "$(code_of "ln.$DOMAIN")" = 200 ]; }
wait_for 30 "l.$DOMAIN to serve once the pod is ready" plain_serves
t_plain=$((SECONDS - t_ready))
wait_for 30 "ln.$DOMAIN (nativelb) to serve once the pod is ready" native_serves
echo "late: $before while the pod started; 200 ${t_plain} s after it was Ready (nativelb: $((SECONDS - t_ready)) s)"
ok "a route built before its pod was ready serves once the pod is ready: Traefik v3.6 saw the readiness change (${t_plain} s), as with nativelb"
k delete deploy/late svc/late svc/late-native httproute/late httproute/late-native --wait=false >/dev/null

log "real failure modes"
k run missing --image=registry.devcluster.test/kopc/not-there:1 >/dev/null
k run crash --image=$BB -- -c 'echo bye; exit 3' >/dev/null
reason() { k get pod "$1" -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}'; }
is_reason() { [ "$(reason "$1")" = "$2" ]; }
wait_for 120 "missing to be ImagePullBackOff" is_reason missing ImagePullBackOff
ok "an image the registry lacks ends ImagePullBackOff"
wait_for 180 "crash to be CrashLoopBackOff" is_reason crash CrashLoopBackOff
[ "$(k get pod crash -o jsonpath='{.status.containerStatuses[0].lastState.terminated.exitCode}')" = 3 ] ||
    fail "crash's last exit code is not 3"
ok "a program that exits ends CrashLoopBackOff (exit code 3 recorded)"

log "stop leaves nothing behind"
net_index=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("netIndex", 0))' "$DIR/devcluster.json")
"$DEVCLUSTER" stop --dir "$DIR" || fail "stop failed"
host_state >"$WORK/after"
diff "$WORK/before" "$WORK/after" >"$WORK/diff" || fail "the host changed: $(cat "$WORK/diff")"
! pgrep -af "$DIR" >"$WORK/procs" || fail "processes left: $(cat "$WORK/procs")"
# Containers do not name DIR, but they live in the node's cgroups.
in_cgroups=$(grep -l "devcluster-$net_index-" /proc/[0-9]*/cgroup 2>/dev/null || true)
[ -z "$in_cgroups" ] || fail "processes left in the node's cgroups: $in_cgroups"
left=$(find /sys/fs/cgroup -maxdepth 2 -name "devcluster-$net_index-*" 2>/dev/null || true)
[ -z "$left" ] || fail "cgroups left: $left"
! grep -q "$DIR" /proc/self/mountinfo || fail "mounts left under $DIR"
ok "no process, mount, link, route, nftables/iptables rule or cgroup is left"

log "restart on the same DIR"
t0=$SECONDS
"$DEVCLUSTER" start --dir "$DIR" || fail "restart failed"
echo "restarted in $((SECONDS - t0))s"
k rollout status deploy/greeter --timeout=180s >/dev/null || fail "greeter not Ready after restart"
np=$(k get svc greeter -o jsonpath='{.spec.ports[0].nodePort}')
wait_for 60 "NodePort to answer after restart" greet "$node_ip" "$np"
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gatewayPort"])' "$DIR/devcluster.json")" = "$gw_port" ] ||
    fail "the gateway moved to another port on restart"
wait_for 60 "x.$DOMAIN to answer through the gateway after restart" greets
ok "after a restart the same workload runs again and answers, on its NodePort and through the gateway"
"$DEVCLUSTER" stop --dir "$DIR" >/dev/null || fail "second stop failed"

echo "PASS: $passed checks"
