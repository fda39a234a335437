#!/usr/bin/env bash
# bench/gateway_ready_flip.sh - does Traefik (the devcluster's gateway) notice
# a pod turning ready after the route to it was built? A real node, the
# gateway, Traefik at DEBUG; one web pod whose readiness comes READY_DELAY s
# (default 15) after it starts, behind two Services: `late` (Traefik sends to
# the endpoints it tracks) and `late-native` (traefik.io/service.nativelb:
# Traefik sends to the ClusterIP). Polls both hosts every 0.5 s and prints
# each change of answer with its time from the pod's Ready; after WATCH s
# (default 60) touches the Service `late` (an annotation: any change Traefik
# watches) and times its answer again. Then Traefik's own words about the
# events it got in that window.
#
# Usage (under /work/cluster-lock --real): bench/gateway_ready_flip.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
DEVCLUSTER=$SRC/build/bin/devcluster
KUBECTL=$SRC/build/bin/kubectl
READY_DELAY=${READY_DELAY:-15}
WATCH=${WATCH:-60}
export KOP_TEST_TMP=${KOP_TEST_TMP:-$SRC/build/bench-tmp}
# shellcheck source=../test/e2e/lib.sh
source "$SRC/test/e2e/lib.sh"
passed=0
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
e2e_init gateway-ready-flip
DOMAIN=ctf.localhost

"$DEVCLUSTER" start --dir "$DIR" --nodes 1 --real-nodes 1 --gateway >/dev/null || fail "devcluster start"
"$SRC/tools/images.sh" "$DIR" webflag >/dev/null || fail "images"
version=$(sed -n 's/^project(kopc VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
gw_port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gatewayPort"])' "$DIR/devcluster.json")
# Traefik at DEBUG: it then says which events it skipped or dropped.
k -n kopc-gateway get deploy traefik -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
c = d["spec"]["template"]["spec"]["containers"][0]
c["args"] = [a for a in c["args"] if not a.startswith("--log.level=")] + ["--log.level=DEBUG"]
json.dump(d, sys.stdout)' | k apply -f - >/dev/null
k -n kopc-gateway rollout status deploy/traefik --timeout=120s >/dev/null || fail "Traefik at DEBUG"
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
        env: [{name: FLAG, value: "flag{late}"}]
        ports: [{containerPort: 8080}]
        readinessProbe: {tcpSocket: {port: 8080}, initialDelaySeconds: $READY_DELAY, periodSeconds: 1}
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
t_applied=$(date -u +%Y-%m-%dT%H:%M:%SZ)
code_of() { curl -sS -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$DIR/gateway/ca.crt" \
    --resolve "$1:$gw_port:127.0.0.1" "https://$1:$gw_port/flag" 2>/dev/null || true; }
ready() { [ "$(k get pod -l app=late -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}')" = True ]; }
start=$(date +%s.%N)
el() { python3 -c "import sys; print(f'{float(sys.argv[1]) - float(sys.argv[2]):+.1f}')" "$(date +%s.%N)" "$1"; }
last_l= last_n= t_ready=
end=$(( $(date +%s) + READY_DELAY + 30 + WATCH ))
while [ "$(date +%s)" -lt "$end" ]; do
    l=$(code_of "l.$DOMAIN"); n=$(code_of "ln.$DOMAIN")
    if [ -z "$t_ready" ] && ready; then t_ready=$(date +%s.%N); echo "pod Ready at $(el "$start") s from the apply"; fi
    ref=${t_ready:-$start}
    [ "$l" != "$last_l" ] && echo "$(el "$ref") s: late        answers $l" && last_l=$l
    [ "$n" != "$last_n" ] && echo "$(el "$ref") s: late-native answers $n" && last_n=$n
    if [ -n "$t_ready" ] && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) - float(sys.argv[2]) > $WATCH else 1)" "$(date +%s.%N)" "$t_ready"; then
        break
    fi
    sleep 0.5
done
echo "late answers $(code_of "l.$DOMAIN") ${WATCH} s after the pod was Ready; touching Service late"
t_touch=$(date +%s.%N)
k annotate svc late kopc.test/touch=1 --overwrite >/dev/null
until [ "$(code_of "l.$DOMAIN")" = 200 ]; do sleep 0.2; done
echo "late answers 200 $(el "$t_touch") s after the touch"
echo "--- Traefik's debug lines about events since the apply (kinds, counts):"
k -n kopc-gateway logs deploy/traefik --since-time="$t_applied" |
    grep -oE '(Skipping|Dropping) (Kubernetes )?event kind [^ ]+' | sort | uniq -c
