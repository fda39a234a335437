#!/usr/bin/env bash
# install_test.sh - the CTF operator installed as users install it with
# kustomize: `kubectl apply -k` of an overlay that only points
# config/default at the image built here (and sets the address NodePort
# endpoints are shown on), on a devcluster with a real node. Checked:
#   - config/default creates the CRDs, namespaces, RBAC, Services and PDB;
#   - the Deployment is as promised (2 replicas, --leader-elect, non-root,
#     read-only root, no capabilities, seccomp, requests and limits, probes)
#     and both pods, running the image pulled from the cluster's registry,
#     pass the restricted Pod Security admission and become Ready: the
#     kubelet's probes of /healthz and /readyz pass;
#   - the operator runs with in-cluster configuration as its service
#     account: one pod holds the leader Lease, no Forbidden in the logs;
#   - /metrics, scraped through its Service, has every series the alert
#     rules and the dashboard use;
#   - through the API Service a team starts an instance, which goes Running
#     and answers on its NodePort with the team's flag, and stops it.
# install_helm_test.sh does the same with the Helm chart, and upgrades it.
#
# Env: DEVCLUSTER, KUBECTL (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=install_lib.sh
source "$(dirname "$0")/install_lib.sh"
install_init install-kustomize
OP_NS=kopc-system

log "a devcluster with a real node and the operator's image"
real_cluster
ok "images built and pushed: $(cut -d@ -f1 "$WORK/images" | tr '\n' ' ')"

log "kubectl apply -k: config/default with the image built here"
image_overlay "$WORK/overlay" "$SRC/config/default" "$VERSION"
k apply -k "$WORK/overlay" >"$WORK/apply.log" || { cat "$WORK/apply.log"; fail "kubectl apply -k"; }
k wait --for=condition=Established crd/challenges.ctf.kopc.io crd/challengedefinitions.ctf.kopc.io --timeout=60s >/dev/null ||
    fail "CRDs not Established"
for o in namespace/kopc-system namespace/ctf serviceaccount/kopc-ctf-operator clusterrole/kopc-ctf-operator \
         clusterrolebinding/kopc-ctf-operator role/kopc-ctf-operator-leader-election \
         service/kopc-ctf-operator-metrics service/kopc-ctf-operator-api poddisruptionbudget/kopc-ctf-operator; do
    k -n kopc-system get "$o" >/dev/null || fail "config/default did not create $o"
done
ok "config/default: CRDs, namespaces, service account, RBAC, Services, PDB"
check_deployment kopc-system kopc-ctf-operator kopc-ctf-operator "$OP_IMAGE:$VERSION"
ok "the Deployment is hardened, probed and sized; 2 pods Ready on the real node under restricted PSS"
check_leader kopc-system
ok "the operator runs in the cluster with in-cluster configuration and one pod leads"

ADMIN=$(openssl rand -hex 24)
TEAM_A=$(openssl rand -hex 24)
k -n kopc-system create secret generic ctf-api-admin --from-literal=token="$ADMIN" >/dev/null
k -n kopc-system create secret generic ctf-team-tokens --from-literal=team-a="$TEAM_A" >/dev/null
k apply -f "$SRC/config/samples/ctf_flag_key_secret.yaml" -f "$SRC/config/samples/ctf_v1alpha1_challengedefinition_nc.yaml" >/dev/null

log "the operator at work, seen through its Services"
port_forward kopc-system kopc-ctf-operator-api
api_instance team-a "$TEAM_A" nc
[[ $ENDPOINT == "$NODE_IP":* ]] || fail "endpoint $ENDPOINT is not on the node $NODE_IP"
wait_for 10 "$ENDPOINT to greet" greets "$ENDPOINT"
ok "through the API Service: team-a's instance is Running and answers at $ENDPOINT with its flag"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TEAM_A" -X DELETE "$API/api/v1/teams/team-a/instances/nc")
[ "$code" = 202 ] || fail "DELETE answered $code"
gone() { [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TEAM_A" "$API/api/v1/teams/team-a/instances/nc")" = 404 ]; }
wait_for 120 "team-a's instance to go" gone
ok "DELETE through the API Service stops it"
scrape kopc-system kopc-ctf-operator-metrics "$WORK/metrics.txt"
ok "/metrics through its Service has every series the alert rules and the dashboard use"
no_forbidden kopc-system
ok "no Forbidden in the operator's logs with the installed RBAC"
echo "PASS: $passed checks"
