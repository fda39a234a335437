#!/usr/bin/env bash
# install_test.sh - the CTF operator installed the two ways people install
# operators, each on a fresh devcluster, then one challenge's whole life:
#
#   kustomize: kubectl apply -k config/default (CRDs, namespaces, service
#     account, least-privilege RBAC, Deployment, Services, PDB);
#   Helm: helm lint, then helm template charts/kopc-ctf applied to a release
#     namespace of its own (ctf-system), with the chart's token Secrets.
#
# For each: the Deployment is as promised (2 replicas, --leader-elect,
# non-root, read-only root, no capabilities, seccomp, requests and limits,
# /healthz and /readyz probes) and its simulated pods pass the restricted Pod
# Security admission of their namespace and become ready. The devcluster runs
# no containers, so the operator then runs here, outside the cluster, as the
# installed service account (a token kubeconfig) with the Deployment's own
# arguments (bind addresses moved to free loopback ports): it takes the
# leader Lease, a team PUTs an instance through the API, it goes Running with
# an endpoint, the team DELETEs it and its namespace goes away. No Forbidden
# may appear in the log. The scrape of /metrics is the reference for the
# alert rules and the dashboard (test/packaging/check_monitoring.py). Without
# a cluster: the chart's ClusterRole is config/rbac's, and its optional
# monitoring objects carry config/monitoring's rules and dashboard.
# (Whether the RBAC is least privilege is test/e2e/fault_http_test.sh's job:
# here it only has to be enough.)
#
# Env: DEVCLUSTER, KUBECTL, HELM, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
HELM=${HELM:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
[ -x "$HELM" ] || { echo "FAIL: no $HELM: run make helm" >&2; exit 1; }
mkdir -p "${KOP_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/install.XXXXXX")
DIR=
op_pid=
export HELM_CACHE_HOME=$WORK/helm/cache HELM_CONFIG_HOME=$WORK/helm/config HELM_DATA_HOME=$WORK/helm/data

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/op.log" ] && { echo "--- operator log (tail)" >&2; tail -30 "$WORK/op.log" >&2; }
    exit 1
}
k() { "$KUBECTL" --kubeconfig "$DIR/kubeconfig" --request-timeout=30s "$@"; }
stop_operator() {
    [ -n "$op_pid" ] || return 0
    kill -TERM "$op_pid" 2>/dev/null || true
    wait "$op_pid" || fail "operator exit code $? after SIGTERM"
    op_pid=
}
cleanup() {
    [ -n "$op_pid" ] && kill -9 "$op_pid" 2>/dev/null || true
    [ -n "$DIR" ] && "$DEVCLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# new_cluster NAME: a fresh devcluster in $WORK/NAME (the previous one stopped).
new_cluster() {
    [ -n "$DIR" ] && "$DEVCLUSTER" stop --dir "$DIR" >/dev/null 2>&1
    DIR=$WORK/$1
    "$DEVCLUSTER" start --dir "$DIR" --nodes 2 >/dev/null || fail "devcluster start"
}

# check_deployment NS NAME SA: the Deployment as promised, its pods admitted and ready.
check_deployment() {
    local ns=$1 name=$2 sa=$3
    k -n "$ns" get deployment "$name" -o json >"$WORK/deploy.json" || fail "no Deployment $ns/$name"
    python3 - "$WORK/deploy.json" "$sa" <<'PY' || fail "Deployment $ns/$name is not as promised"
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
assert "--leader-elect" in c["args"], "no --leader-elect"
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
    k -n "$ns" rollout status "deployment/$name" --timeout=120s >/dev/null ||
        fail "the pods of $ns/$name did not become ready (restricted Pod Security?)"
    [ "$(k get ns "$ns" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = restricted ] ||
        fail "namespace $ns does not enforce the restricted Pod Security level"
}

# service_port NS SERVICE PORT-NAME: that Service port's number, selecting the operator's pods.
service_port() {
    k -n "$1" get service "$2" -o jsonpath="{.spec.ports[?(@.name==\"$3\")].port}"
}

# run_operator NS SA DEPLOYMENT: the operator here, as NS/SA, with the Deployment's
# arguments (left in OP_ARGS); MPORT and APORT are its metrics and API ports.
run_operator() {
    local ns=$1 sa=$2 deploy=$3 token server
    token=$(k -n "$ns" create token "$sa" --duration=1h)
    server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
    cat >"$WORK/operator.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: dev, cluster: {server: "$server", certificate-authority: "$DIR/ca.crt"}}]
users: [{name: operator, user: {token: "$token"}}]
contexts: [{name: operator, context: {cluster: dev, user: operator, namespace: $ns}}]
current-context: operator
EOF
    MPORT=$(free_port)
    APORT=$(free_port)
    mapfile -t args < <(k -n "$ns" get deployment "$deploy" -o json | python3 -c "
import json, sys
c = json.load(sys.stdin)['spec']['template']['spec']['containers'][0]
for a in c['args']:
    print({'0.0.0.0:9090': '127.0.0.1:$MPORT', '0.0.0.0:8080': '127.0.0.1:$APORT'}.get(a, a))")
    printf '%s\n' "${args[@]}" | grep -qx "127.0.0.1:$MPORT" && printf '%s\n' "${args[@]}" | grep -qx "127.0.0.1:$APORT" ||
        fail "the Deployment's binds are not 0.0.0.0:9090 and 0.0.0.0:8080: ${args[*]}"
    : >"$WORK/op.log"
    POD_NAMESPACE=$ns "$OPERATOR" --kubeconfig "$WORK/operator.kubeconfig" "${args[@]}" >>"$WORK/op.log" 2>&1 &
    op_pid=$!
    wait_for 60 "operator ready" curl -sf "http://127.0.0.1:$MPORT/readyz"
    curl -sf "http://127.0.0.1:$MPORT/healthz" >/dev/null || fail "/healthz"
    wait_for 60 "the operator leads" bash -c "curl -s http://127.0.0.1:$MPORT/metrics | grep -q '^leader_election_master_status{name=\"kopc-ctf-operator\"} 1'"
    OP_ARGS="${args[*]}"
}

# lifecycle NS TEAM TOKEN: a team's instance of web through the API, from PUT to gone.
lifecycle() {
    local cns=$1 team=$2 token=$3 api body state ins_ns
    api=http://127.0.0.1:$APORT/api/v1
    api_get() { curl -s -H "Authorization: Bearer $token" "$@"; }
    wait_for 30 "the API lists web" bash -c "curl -sf -H 'Authorization: Bearer $token' $api/challenges | grep -q '\"name\": *\"web\"'"
    code=$(api_get -o "$WORK/put.json" -w '%{http_code}' -X PUT "$api/teams/$team/instances/web")
    [ "$code" = 201 ] || fail "PUT answered $code: $(cat "$WORK/put.json")"
    state_is() {
        api_get "$api/teams/$team/instances/web" | python3 -c "
import json, sys
i = json.load(sys.stdin)
sys.exit(0 if i.get('state') == '$1' and (('$1' != 'Running') or i['endpoints'] and i['endpoints'][0]['address']) else 1)"
    }
    wait_for 90 "$team's web Running with an endpoint" state_is Running
    body=$(api_get "$api/teams/$team/instances/web")
    chal=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["name"])' "$body")
    [ "$(k -n "$cns" get chal "$chal" -o jsonpath='{.status.currentStatus}')" = Running ] || fail "Challenge $chal not Running"
    ins_ns=$(k -n "$cns" get chal "$chal" -o jsonpath='{.status.namespace}')
    k get ns "$ins_ns" >/dev/null || fail "no instance namespace $ins_ns"
    code=$(api_get -o /dev/null -w '%{http_code}' -X DELETE "$api/teams/$team/instances/web")
    [ "$code" = 202 ] || fail "DELETE answered $code"
    wait_for 90 "Challenge $chal gone" bash -c "! '$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n '$cns' get chal '$chal' >/dev/null 2>&1"
    wait_for 90 "namespace $ins_ns gone" bash -c "! '$KUBECTL' --kubeconfig '$DIR/kubeconfig' get ns '$ins_ns' >/dev/null 2>&1"
    code=$(api_get -o /dev/null -w '%{http_code}' "$api/teams/$team/instances/web")
    [ "$code" = 404 ] || fail "GET after the instance went away answered $code"
}

# no_forbidden: the installed RBAC was enough for everything the operator did.
no_forbidden() {
    local n
    n=$(grep -c 'Forbidden' "$WORK/op.log" || true)
    [ "$n" = 0 ] || fail "the operator met $n Forbidden answers with the installed RBAC"
}

# ---- kustomize ----------------------------------------------------------------
log "kustomize: kubectl apply -k config/default"
new_cluster kustomize
k apply -k "$SRC/config/default" >"$WORK/apply.log" || { cat "$WORK/apply.log"; fail "kubectl apply -k config/default"; }
k wait --for=condition=Established crd/challenges.ctf.kopc.io crd/challengedefinitions.ctf.kopc.io --timeout=60s >/dev/null ||
    fail "CRDs not Established"
for o in namespace/kopc-system namespace/ctf serviceaccount/kopc-ctf-operator clusterrole/kopc-ctf-operator \
         clusterrolebinding/kopc-ctf-operator role/kopc-ctf-operator-leader-election \
         service/kopc-ctf-operator-metrics service/kopc-ctf-operator-api poddisruptionbudget/kopc-ctf-operator; do
    k -n kopc-system get "$o" >/dev/null || fail "config/default did not create $o"
done
image=$(k -n kopc-system get deploy kopc-ctf-operator -o jsonpath='{.spec.template.spec.containers[0].image}')
want=$(python3 -c "
import yaml
i = yaml.safe_load(open('$SRC/config/default/kustomization.yaml'))['images'][0]
print(i['newName'] + ':' + i['newTag'])")
[ "$image" = "$want" ] || fail "image $image, config/default says $want"
check_deployment kopc-system kopc-ctf-operator kopc-ctf-operator
[ "$(service_port kopc-system kopc-ctf-operator-metrics metrics)" = 9090 ] || fail "metrics Service port"
[ "$(service_port kopc-system kopc-ctf-operator-api http)" = 80 ] || fail "API Service port"
ok "CRDs, namespaces, RBAC, Services, PDB; Deployment ($image) hardened, probed, sized, 2 replicas ready under restricted PSS"

ADMIN=$(openssl rand -hex 24)
TEAM_A=$(openssl rand -hex 24)
k -n kopc-system create secret generic ctf-api-admin --from-literal=token="$ADMIN" >/dev/null
k -n kopc-system create secret generic ctf-team-tokens --from-literal=team-a="$TEAM_A" >/dev/null
k apply -f "$SRC/config/samples/ctf_v1alpha1_challengedefinition_web.yaml" >/dev/null
run_operator kopc-system kopc-ctf-operator kopc-ctf-operator
holder=$(k -n kopc-system get lease kopc-ctf-operator -o jsonpath='{.spec.holderIdentity}')
[ -n "$holder" ] || fail "no leader Lease in kopc-system"
ok "the operator runs as kopc-system/kopc-ctf-operator with the Deployment's args ($OP_ARGS) and leads"

lifecycle ctf team-a "$TEAM_A"
ok "team-a's instance through the API: PUT, Running with an endpoint, DELETE, namespace gone"

curl -s "http://127.0.0.1:$MPORT/metrics" >"$WORK/metrics.txt"
python3 "$SRC/test/packaging/check_monitoring.py" --metrics "$WORK/metrics.txt" >"$WORK/monitoring.log" 2>&1 ||
    { cat "$WORK/monitoring.log"; fail "the alert rules or the dashboard ask for series the operator does not export"; }
ok "every metric, label and value the alert rules and the dashboard use is in the live scrape"
stop_operator
no_forbidden
ok "SIGTERM: clean exit; no Forbidden with the kustomize RBAC"

# ---- Helm -----------------------------------------------------------------------
log "helm lint and the chart's parts"
CHART=$SRC/charts/kopc-ctf
"$HELM" lint --strict "$CHART" >"$WORK/lint.log" 2>&1 || { cat "$WORK/lint.log"; fail "helm lint"; }
"$HELM" lint --strict "$CHART" --set replicaCount=1 --set tokens.create=false --set api.enabled=false \
    --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true \
    --set metrics.dashboard.enabled=true --set api.ingress.enabled=true --set api.ingress.host=ctf.example.org \
    --set operator.ingressDomain=ctf.example.org --set operator.watchNamespace=ctf >"$WORK/lint.log" 2>&1 ||
    { cat "$WORK/lint.log"; fail "helm lint with every option"; }
"$HELM" template ctf "$CHART" -n ctf-system --set metrics.serviceMonitor.enabled=true \
    --set metrics.prometheusRule.enabled=true --set metrics.dashboard.enabled=true \
    --set api.ingress.enabled=true --set api.ingress.host=ctf.example.org >"$WORK/all.yaml" || fail "helm template with every option"
python3 - "$WORK/all.yaml" "$SRC" <<'PY' || fail "the chart's rendering differs from config/"
import json, pathlib, sys, yaml
docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
src = pathlib.Path(sys.argv[2])
role = yaml.safe_load(open(src / "config/rbac/role.yaml"))
assert docs[("ClusterRole", "ctf-kopc-ctf")]["rules"] == role["rules"], "ClusterRole rules differ from config/rbac/role.yaml"
le = yaml.safe_load(open(src / "config/rbac/leader_election_role.yaml"))
assert docs[("Role", "ctf-kopc-ctf-leader-election")]["rules"] == le["rules"], "leader-election Role differs"
alerts = yaml.safe_load(open(src / "config/monitoring/alerts.yaml"))
assert docs[("PrometheusRule", "ctf-kopc-ctf")]["spec"] == alerts, "PrometheusRule differs from alerts.yaml"
dash = json.load(open(src / "config/monitoring/grafana-dashboard.json"))
cm = docs[("ConfigMap", "ctf-kopc-ctf-dashboard")]["data"]["kopc-ctf-operator.json"]
assert json.loads(cm) == dash, "dashboard ConfigMap differs"
sm = docs[("ServiceMonitor", "ctf-kopc-ctf")]["spec"]
svc = docs[("Service", "ctf-kopc-ctf-metrics")]["metadata"]["labels"]
assert all(svc.get(k) == v for k, v in sm["selector"]["matchLabels"].items()), "ServiceMonitor selects no Service"
ing = docs[("Ingress", "ctf-kopc-ctf-api")]["spec"]["rules"][0]
assert ing["host"] == "ctf.example.org" and ing["http"]["paths"][0]["backend"]["service"]["name"] == "ctf-kopc-ctf-api"
PY
ok "helm lint passes (defaults and every option); ClusterRole = config/rbac; PrometheusRule, dashboard, ServiceMonitor, Ingress match config/"

log "Helm: helm template charts/kopc-ctf applied to release namespace ctf-system"
new_cluster helm
k create namespace ctf-system >/dev/null
k label namespace ctf-system pod-security.kubernetes.io/enforce=restricted >/dev/null
ADMIN=$(openssl rand -hex 24)
TEAM_B=$(openssl rand -hex 24)
"$HELM" template ctf "$CHART" -n ctf-system --include-crds --set-string tokens.admin="$ADMIN" \
    --set-string tokens.teams.team-b="$TEAM_B" --set operator.maxInstancesPerTeam=2 \
    --set operator.logFormat=text >"$WORK/helm.yaml" || fail "helm template"
k apply -f "$WORK/helm.yaml" >"$WORK/apply.log" || { cat "$WORK/apply.log"; fail "kubectl apply of the helm template"; }
k wait --for=condition=Established crd/challenges.ctf.kopc.io crd/challengedefinitions.ctf.kopc.io --timeout=60s >/dev/null ||
    fail "the chart's CRDs not Established"
k get namespace ctf >/dev/null || fail "the chart did not create the challenge namespace"
check_deployment ctf-system ctf-kopc-ctf ctf-kopc-ctf
[ "$(service_port ctf-system ctf-kopc-ctf-api http)" = 80 ] || fail "API Service port"
[ "$(k -n ctf-system get secret ctf-api-admin -o jsonpath='{.data.token}' | base64 -d)" = "$ADMIN" ] || fail "admin token Secret"
ok "chart CRDs, challenge namespace, token Secrets; Deployment hardened, probed, sized, 2 replicas ready under restricted PSS"

k apply -f "$SRC/config/samples/ctf_v1alpha1_challengedefinition_web.yaml" >/dev/null
run_operator ctf-system ctf-kopc-ctf ctf-kopc-ctf
[[ " $OP_ARGS " == *" --system-namespace ctf-system "* && " $OP_ARGS " == *" --max-instances-per-team 2 "* ]] ||
    fail "the chart's values did not reach the args: $OP_ARGS"
k -n ctf-system get lease kopc-ctf-operator >/dev/null || fail "no leader Lease in the release namespace"
ok "the operator runs as ctf-system/ctf-kopc-ctf with the chart's args ($OP_ARGS) and leads"

lifecycle ctf team-b "$TEAM_B"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ADMIN" "http://127.0.0.1:$APORT/api/v1/teams/team-b/instances")
[ "$code" = 200 ] || fail "the chart's admin token was refused: $code"
ok "team-b's instance through the API with the chart's tokens: PUT, Running, DELETE, namespace gone"
stop_operator
no_forbidden
ok "SIGTERM: clean exit; no Forbidden with the chart's RBAC"

echo "$passed passed, 0 failed"
