# install_lib.sh - what the two install scenarios share (install_test.sh:
# kubectl apply -k config/default; install_helm_test.sh: helm install and
# upgrade); sourced, not run.
#
# Both install the operator the way users do, into a devcluster with a real
# node, from its image built here with no daemon (tools/images.sh operator)
# and pulled from the cluster's registry. The operator then runs in the
# cluster as its service account with in-cluster configuration, and each
# scenario checks the Deployment, the probes, the leader Lease, /metrics
# scraped through its Service (the apiserver's service proxy), the API
# through its Service (kubectl port-forward), and one instance that goes
# Running and answers on its NodePort.
#
# Env: DEVCLUSTER, KUBECTL, HELM (binaries), SRC (repo root), KOP_TEST_TMP.

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
SRC=${SRC:?}
VERSION=$(sed -n 's/^project(kopc VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
OP_IMAGE=registry.devcluster.test/kopc/ctf-operator
OP_DOCKERFILE_DIGEST=
PF_PID=
OP_NS=

install_init() { e2e_init "$1" install_stop_forward; }

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    if [ -n "$OP_NS" ] && [ -f "$DIR/kubeconfig" ]; then
        echo "--- the operator's pods" >&2
        k -n "$OP_NS" get pods -o wide >&2 2>&1 || true
        k -n "$OP_NS" logs -l app.kubernetes.io/component=operator --tail=30 --prefix >&2 2>&1 || true
    fi
    real_node_logs "$DIR" >&2
    fail_summary "$*"
    exit 1
}

install_stop_forward() {
    [ -n "$PF_PID" ] && kill "$PF_PID" 2>/dev/null || true
}

# real_cluster [DEVCLUSTER-FLAGS...]: a devcluster with one real node and
# the images the operator and the samples run. The operator's image is the
# one tools/images.sh assembles from this build, or, with
# OPERATOR_IMAGE_FROM=dockerfile (make image-e2e), the Dockerfile's, built
# with buildah (tools/image-build.sh) and pushed under the same name.
real_cluster() {
    "$DEVCLUSTER" start --dir "$DIR" --nodes 0 --real-nodes 1 "$@" >/dev/null || fail "devcluster start --real-nodes 1 $*"
    NODE_IP=$(k get node real-node-0 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    if [ "${OPERATOR_IMAGE_FROM:-}" = dockerfile ]; then
        "$SRC/tools/images.sh" "$DIR" greeter webflag >"$WORK/images" || fail "tools/images.sh"
        "$SRC/tools/image-build.sh" operator "ghcr.io/kopc/ctf-operator:$VERSION" 2>"$WORK/image-build.log" ||
            { cat "$WORK/image-build.log"; fail "tools/image-build.sh operator: the Dockerfile did not build"; }
        "$SRC/tools/image-build.sh" push "ghcr.io/kopc/ctf-operator:$VERSION" "$DIR" "kopc/ctf-operator:$VERSION" \
            >>"$WORK/images" 2>>"$WORK/image-build.log" ||
            { cat "$WORK/image-build.log"; fail "tools/image-build.sh push: the Dockerfile's image to the cluster's registry"; }
        OP_DOCKERFILE_DIGEST=$(sed -n 's|.*/kopc/ctf-operator@||p' "$WORK/images")
        [ -n "$OP_DOCKERFILE_DIGEST" ] || fail "tools/image-build.sh push printed no digest"
    else
        "$SRC/tools/images.sh" "$DIR" operator greeter webflag >"$WORK/images" || fail "tools/images.sh"
    fi
}

# check_deployment NS NAME SA IMAGE: the Deployment as promised, its pods
# admitted under restricted Pod Security, Ready (their probes pass), running
# IMAGE with in-cluster configuration (no --kubeconfig).
check_deployment() {
    local ns=$1 name=$2 sa=$3 image=$4
    k -n "$ns" get deployment "$name" -o json >"$WORK/deploy.json" || fail "no Deployment $ns/$name"
    python3 - "$WORK/deploy.json" "$sa" "$image" <<'PY' || fail "Deployment $ns/$name is not as promised"
import json, sys
d = json.load(open(sys.argv[1]))
spec = d["spec"]
assert spec["replicas"] == 2, f"replicas {spec['replicas']}"
p = spec["template"]["spec"]
assert p["serviceAccountName"] == sys.argv[2], f"serviceAccountName {p['serviceAccountName']}"
psc = p["securityContext"]
assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0, "pod not non-root"
assert psc["seccompProfile"]["type"] == "RuntimeDefault", "seccomp"
[c] = p["containers"]
assert c["image"] == sys.argv[3], f"image {c['image']}, want {sys.argv[3]}"
assert "--leader-elect" in c["args"], "no --leader-elect"
assert "--kubeconfig" not in c["args"], "a --kubeconfig: the operator must use in-cluster configuration"
sc = c["securityContext"]
assert sc["readOnlyRootFilesystem"] is True, "root filesystem writable"
assert sc["allowPrivilegeEscalation"] is False, "privilege escalation"
assert sc["capabilities"]["drop"] == ["ALL"], "capabilities"
for kind in ("requests", "limits"):
    for r in ("cpu", "memory"):
        assert c["resources"][kind].get(r), f"no {kind}.{r}"
ports = {pt["name"]: pt["containerPort"] for pt in c["ports"]}
assert c["livenessProbe"]["httpGet"]["path"] == "/healthz", "liveness probe"
assert c["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness probe"
for probe in ("livenessProbe", "readinessProbe"):
    port = c[probe]["httpGet"]["port"]
    assert port == "metrics" or port == ports["metrics"], f"{probe} not on the metrics port"
args = c["args"]
binds = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i] in ("--metrics-bind", "--api-bind")}
assert binds["--metrics-bind"] == f"0.0.0.0:{ports['metrics']}", f"metrics bind {binds}"
assert binds["--api-bind"] == f"0.0.0.0:{ports['api']}", f"api bind {binds}"
PY
    k -n "$ns" rollout status "deployment/$name" --timeout=180s >/dev/null ||
        fail "the pods of $ns/$name did not become Ready"
    [ "$(k get ns "$ns" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = restricted ] ||
        fail "namespace $ns does not enforce the restricted Pod Security level"
    local ready
    ready=$(k -n "$ns" get pods -l app.kubernetes.io/component=operator \
        -o jsonpath='{range .items[*]}{.spec.nodeName}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^real-node-0/True$' || true)
    [ "$ready" = 2 ] || fail "want 2 Ready operator pods on real-node-0, got $ready"
    # OPERATOR_IMAGE_FROM=dockerfile: the pods run the very image buildah built and pushed.
    if [ -n "${OP_DOCKERFILE_DIGEST:-}" ] && [ "$image" = "$OP_IMAGE:$VERSION" ]; then
        local ids
        ids=$(k -n "$ns" get pods -l app.kubernetes.io/component=operator \
            -o jsonpath='{range .items[*]}{.status.containerStatuses[0].imageID}{"\n"}{end}')
        [ "$(grep -c "@$OP_DOCKERFILE_DIGEST\$" <<<"$ids")" = 2 ] ||
            fail "the operator's pods do not run the Dockerfile's image $OP_DOCKERFILE_DIGEST: $ids"
    fi
}

# check_leader NS: one of the operator's pods holds the Lease and says so.
check_leader() {
    local ns=$1 holder
    leads() { holder=$(k -n "$ns" get lease kopc-ctf-operator -o jsonpath='{.spec.holderIdentity}' 2>/dev/null) && [ -n "$holder" ]; }
    wait_for 120 "a leader Lease in $ns" leads
    k -n "$ns" get pod "${holder%%_*}" >/dev/null 2>&1 || fail "the Lease holder $holder is not one of the pods"
    says_leads() { grep -q 'became leader' <<<"$(k -n "$ns" logs "${holder%%_*}")"; }
    wait_for 30 "the leader's log to say it leads" says_leads
}

# scrape NS SERVICE OUT: /metrics through the Service (the apiserver's
# service proxy, which picks one of the pods) until the leader answers, then
# every pod's, as Prometheus scrapes each endpoint of the Service: together
# they must have every series the alert rules and the dashboard use (the
# API's counters live in whichever pod served the request).
scrape() {
    local ns=$1 svc=$2 out=$3 pod
    leader_metric() {
        k get --raw "/api/v1/namespaces/$ns/services/http:$svc:metrics/proxy/metrics" >"$out" 2>/dev/null &&
            grep -q '^leader_election_master_status{.*} 1$' "$out"
    }
    wait_for 60 "/metrics of the leader through Service $ns/$svc" leader_metric
    for pod in $(k -n "$ns" get endpointslices -l "kubernetes.io/service-name=$svc" \
        -o jsonpath='{range .items[*].endpoints[*]}{.targetRef.name}{"\n"}{end}'); do
        k get --raw "/api/v1/namespaces/$ns/pods/http:$pod:9090/proxy/metrics" >>"$out" ||
            fail "no /metrics from endpoint $pod of Service $svc"
    done
    python3 "$SRC/test/packaging/check_monitoring.py" --metrics "$out" >"$WORK/monitoring.log" 2>&1 ||
        { cat "$WORK/monitoring.log"; fail "the alert rules or the dashboard ask for series the operator does not export"; }
}

# port_forward NS SERVICE: the API Service on a local port (API).
port_forward() {
    local ns=$1 svc=$2 port
    [ -n "$PF_PID" ] && kill "$PF_PID" 2>/dev/null
    port=$(free_port)
    k -n "$ns" port-forward "svc/$svc" "$port:80" >"$WORK/port-forward.log" 2>&1 &
    PF_PID=$!
    API=http://127.0.0.1:$port
    wait_for 60 "the API through a port-forward to $ns/$svc" curl -sf "$API/api/openapi.json"
}

# image_overlay DIR BASE TAG: a kustomization in DIR over BASE (a config/
# directory) with the operator's image at $OP_IMAGE:TAG and --node-address
# $NODE_IP (the real node's address, for the instances' endpoints).
image_overlay() {
    local dir=$1 base=$2 tag=$3 rel
    mkdir -p "$dir"
    rel=$(python3 -c 'import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$base" "$dir")
    cat >"$dir/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $rel
images:
- name: ghcr.io/kopc/ctf-operator
  newName: $OP_IMAGE
  newTag: "$tag"
patches:
- target: {kind: Deployment, name: kopc-ctf-operator}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --node-address}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "$NODE_IP"}
YAML
}

# api_instance TEAM TOKEN CHALLENGE: PUT the instance and wait until it is
# Running; leaves its JSON in $WORK/instance.json and its endpoint in ENDPOINT.
api_instance() {
    local team=$1 token=$2 chal=$3 code i
    # A definition applied a moment ago may not have reached the caches of the
    # replica the Service picked: 404 "no challenge named" is asked again (30 s).
    for i in $(seq 60); do
        code=$(curl -s -o "$WORK/put.json" -w '%{http_code}' -H "Authorization: Bearer $token" \
            -X PUT "$API/api/v1/teams/$team/instances/$chal")
        [ "$code" = 404 ] && grep -q 'no challenge named' "$WORK/put.json" || break
        sleep 0.5
    done
    [ "$code" = 201 ] || [ "$code" = 200 ] || fail "PUT $team/$chal answered $code: $(cat "$WORK/put.json")"
    is_running() {
        curl -sf -H "Authorization: Bearer $token" "$API/api/v1/teams/$team/instances/$chal" >"$WORK/instance.json" &&
            python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); sys.exit(0 if i["state"]=="Running" else 1)' "$WORK/instance.json"
    }
    wait_for 180 "$team's $chal Running" is_running
    ENDPOINT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["endpoints"][0]["address"])' "$WORK/instance.json")
}

# greets ADDR: the greeter at host:port answers with a flag.
greets() {
    python3 - "$1" <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
with socket.create_connection((host, int(port)), timeout=3) as s:
    s.settimeout(3)
    data = s.recv(512).decode()
sys.exit(0 if "Your flag: flag{" in data else 1)
PY
}

# no_forbidden NS: no operator pod met a Forbidden with the installed RBAC.
no_forbidden() {
    local n
    n=$(k -n "$1" logs -l app.kubernetes.io/component=operator --tail=-1 | grep -c Forbidden || true)
    [ "$n" = 0 ] || fail "the operator met $n Forbidden answers with the installed RBAC"
}
