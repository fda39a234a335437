#!/usr/bin/env bash
# install_helm_test.sh - the CTF operator installed with its Helm chart, on
# a devcluster with a real node, then upgraded. Checked:
#   - helm lint passes with the defaults and with every option, and the
#     chart renders the same RBAC, alert rules, dashboard, ServiceMonitor and
#     Ingress as config/ (no cluster needed for that part);
#   - `helm install` into its own release namespace (ctf-system) with the
#     image built here: the Deployment is as promised and both pods become
#     Ready (their probes pass) under restricted Pod Security; the chart's
#     token Secrets and values reach the operator; it runs with in-cluster
#     configuration and one pod leads;
#   - /metrics through its Service, and a team's instance through the API
#     Service that goes Running and answers on its NodePort;
#   - `helm upgrade` to a new image tag rolls the operator's pods and leaves
#     the running instance untouched: the same Challenge, namespace and pod,
#     no restart, still answering; the new pods take over and lead, and the
#     instance is compared only after the new leader has reconciled every
#     Challenge (its controller_runtime_reconcile_total). The new tag holds
#     the same build: an upgrade across builds is not tested here.
#
# Env: DEVCLUSTER, KUBECTL, HELM (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=install_lib.sh
source "$(dirname "$0")/install_lib.sh"
HELM=${HELM:?}
[ -x "$HELM" ] || { echo "FAIL: no $HELM: run make helm" >&2; exit 1; }
install_init install-helm
export HELM_CACHE_HOME=$WORK/helm/cache HELM_CONFIG_HOME=$WORK/helm/config HELM_DATA_HOME=$WORK/helm/data
CHART=$SRC/charts/kopc-ctf
OP_NS=ctf-system
h() { "$HELM" --kubeconfig "$DIR/kubeconfig" "$@"; }

log "helm lint and the chart's parts"
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

log "a devcluster with a real node and the operator's image"
real_cluster
ok "images built and pushed: $(cut -d@ -f1 "$WORK/images" | tr '\n' ' ')"

log "helm install"
k create namespace ctf-system >/dev/null
k label namespace ctf-system pod-security.kubernetes.io/enforce=restricted >/dev/null
ADMIN=$(openssl rand -hex 24)
TEAM_B=$(openssl rand -hex 24)
h install ctf "$CHART" -n ctf-system --set image.repository="$OP_IMAGE" --set-string image.tag="$VERSION" \
    --set-string tokens.admin="$ADMIN" --set-string tokens.teams.team-b="$TEAM_B" \
    --set operator.nodeAddress="$NODE_IP" --set operator.maxInstancesPerTeam=2 \
    --set operator.logFormat=text --wait --timeout 5m >"$WORK/install.log" 2>&1 ||
    { cat "$WORK/install.log"; fail "helm install"; }
k wait --for=condition=Established crd/challenges.ctf.kopc.io crd/challengedefinitions.ctf.kopc.io --timeout=60s >/dev/null ||
    fail "the chart's CRDs not Established"
k get namespace ctf >/dev/null || fail "the chart did not create the challenge namespace"
[ "$(k -n ctf-system get secret ctf-api-admin -o jsonpath='{.data.token}' | base64 -d)" = "$ADMIN" ] || fail "admin token Secret"
ok "helm install: CRDs, challenge namespace, token Secrets"
check_deployment ctf-system ctf-kopc-ctf ctf-kopc-ctf "$OP_IMAGE:$VERSION"
args=$(k -n ctf-system get deploy ctf-kopc-ctf -o jsonpath='{.spec.template.spec.containers[0].args}')
[[ $args == *'"--system-namespace","ctf-system"'* && $args == *'"--max-instances-per-team","2"'* && $args == *"\"--node-address\",\"$NODE_IP\""* ]] ||
    fail "the chart's values did not reach the args: $args"
ok "the Deployment is hardened, probed and sized, with the chart's values; 2 pods Ready under restricted PSS"
check_leader ctf-system
ok "the operator runs in the cluster with in-cluster configuration and one pod leads"

log "an instance through the chart's Services"
k apply -f "$SRC/config/samples/ctf_flag_key_secret.yaml" -f "$SRC/config/samples/ctf_v1alpha1_challengedefinition_nc.yaml" >/dev/null
port_forward ctf-system ctf-kopc-ctf-api
api_instance team-b "$TEAM_B" nc
wait_for 10 "$ENDPOINT to greet" greets "$ENDPOINT"
ok "team-b's instance is Running and answers at $ENDPOINT with its flag"
scrape ctf-system ctf-kopc-ctf-metrics "$WORK/metrics.txt"
ok "/metrics through its Service has every series the alert rules and the dashboard use"

log "helm upgrade to a new image tag keeps the running instance"
chal=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$WORK/instance.json")
ins_ns=$(k -n ctf get chal "$chal" -o jsonpath='{.status.namespace}')
snapshot() {
    {
        k -n ctf get chal "$chal" -o jsonpath='{.metadata.uid} {.metadata.generation} {.status.startedAt}{"\n"}'
        k get ns "$ins_ns" -o jsonpath='{.metadata.uid}{"\n"}'
        k -n "$ins_ns" get pods -o jsonpath='{range .items[*]}{.metadata.uid} {.status.containerStatuses[0].restartCount}{"\n"}{end}'
        k -n "$ins_ns" get svc,deploy,networkpolicy,secret -o jsonpath='{range .items[*]}{.kind}/{.metadata.name} {.metadata.uid}{"\n"}{end}'
    } | sort
}
snapshot >"$WORK/before"
old_pods=$(k -n ctf-system get pods -l app.kubernetes.io/component=operator -o jsonpath='{.items[*].metadata.name}')
old_holder=$(k -n ctf-system get lease kopc-ctf-operator -o jsonpath='{.spec.holderIdentity}')
[ -n "$old_holder" ] || fail "no Lease holder before the upgrade"
NEW_TAG=$VERSION-upgrade
TAG=$NEW_TAG "$SRC/tools/images.sh" "$DIR" operator >/dev/null || fail "tools/images.sh operator (new tag)"
h upgrade ctf "$CHART" -n ctf-system --reuse-values --set-string image.tag="$NEW_TAG" --wait --timeout 5m \
    >"$WORK/upgrade.log" 2>&1 || { cat "$WORK/upgrade.log"; fail "helm upgrade"; }
check_deployment ctf-system ctf-kopc-ctf ctf-kopc-ctf "$OP_IMAGE:$NEW_TAG"
for p in $old_pods; do
    old_gone() { ! k -n ctf-system get pod "$p" >/dev/null 2>&1; }
    wait_for 120 "old operator pod $p to go" old_gone
done
check_leader ctf-system
new_holder=$(k -n ctf-system get lease kopc-ctf-operator -o jsonpath='{.spec.holderIdentity}')
[ "$new_holder" != "$old_holder" ] || fail "the Lease still names the old holder $old_holder"
for p in $old_pods; do
    [ "${new_holder%%_*}" != "$p" ] || fail "the Lease holder $new_holder is an old pod"
done
ok "helm upgrade rolled the operator to $NEW_TAG; the Lease moved from $old_holder to a new pod, $new_holder"
# "Untouched" means something only once the new leader has acted: its
# informer lists every Challenge at start and reconciles each, so wait until
# its count of finished (not failed) reconciles reaches the number of
# Challenges, then compare.
nchal=$(k -n ctf get chal -o name | wc -l)
leader_reconciles() {
    k get --raw "/api/v1/namespaces/ctf-system/pods/http:${new_holder%%_*}:9090/proxy/metrics" 2>/dev/null |
        awk '/^controller_runtime_reconcile_total\{controller="challenge"/ && !/result="error"/ { s += $2 }
             END { print s + 0 }'
}
leader_acted() { [ "$(leader_reconciles)" -ge "$nchal" ]; }
wait_for 120 "the new leader to reconcile the $nchal Challenge(s)" leader_acted
wait_for 30 "$ENDPOINT to greet after the upgrade" greets "$ENDPOINT"
snapshot >"$WORK/after"
diff "$WORK/before" "$WORK/after" >"$WORK/diff" || fail "the upgrade touched the running instance: $(cat "$WORK/diff")"
[ "$(k -n ctf get chal "$chal" -o jsonpath='{.status.currentStatus}')" = Running ] || fail "$chal not Running after the upgrade"
ok "after the new leader's $(leader_reconciles) reconcile(s) of the $nchal Challenge(s), the running instance is untouched: same Challenge, namespace, pods (no restart) and objects, still answering"
no_forbidden ctf-system
ok "no Forbidden in the operator's logs with the chart's RBAC"
echo "PASS: $passed checks"
