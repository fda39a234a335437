#!/usr/bin/env bash
# install_helm_conversion_test.sh - the Helm chart with
# webhook.conversion.enabled on a devcluster with a real node (the operator
# in the cluster, from its image; the chart's own self-signed CA, no
# cert-manager). Checked:
#   - `helm install` without --skip-crds stops with the chart's message
#     (crds/ made the CRDs first, not the release's) and says how to go on;
#   - `helm install --skip-crds`: the chart's CRDs serve v1alpha1 and
#     v1beta1, store v1beta1, carry helm.sh/resource-policy keep; the
#     operator's pods are Ready and one leads;
#   - the apiserver calls the conversion webhook through the release's
#     Service with the chart's CA: a definition applied at v1alpha1 reads at
#     v1beta1 with update.rolling.maxUnavailable, and back;
#   - the validating webhook refuses a Challenge naming a missing
#     definition; a Challenge created at v1beta1 goes Running;
#   - `helm upgrade` (a changed value, so the operator's pods roll) keeps
#     the chart's CA: the Secret, the webhook configuration's and the CRDs'
#     caBundle unchanged; conversion and validation still answer; the
#     instance's pod is the same;
#   - `helm uninstall` keeps the CRDs and the objects (read at v1beta1, the
#     stored version: v1alpha1 reads need the webhook, gone with the release);
#   - adoption: with the CRDs no release's (Helm's marks removed, as a plain
#     install leaves them), `helm install` stops with the commands that let
#     the release adopt them; running exactly those, a second install adopts
#     both CRDs, and the objects kept from before are served again at both
#     versions and reconciled (the Challenge Running).
# The apiserver reaches the webhook's pods directly
# (--enable-aggregator-routing: the devcluster's apiserver runs on the host,
# which has no route to Service IPs).
#
# Env: DEVCLUSTER, KUBECTL, HELM (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=install_lib.sh
source "$(dirname "$0")/install_lib.sh"
HELM=${HELM:?}
[ -x "$HELM" ] || { echo "FAIL: no $HELM: run make helm" >&2; exit 1; }
install_init install-helm-conversion
export HELM_CACHE_HOME=$WORK/helm/cache HELM_CONFIG_HOME=$WORK/helm/config HELM_DATA_HOME=$WORK/helm/data
CHART=$SRC/charts/kopc-ctf
OP_NS=ctf-system
DEFS=challengedefinitions.ctf.kopc.io
CHALS=challenges.ctf.kopc.io
h() { "$HELM" --kubeconfig "$DIR/kubeconfig" "$@"; }

log "a devcluster with a real node and the operator's image"
real_cluster --apiserver-arg=--enable-aggregator-routing=true
ok "images built and pushed: $(cut -d@ -f1 "$WORK/images" | tr '\n' ' ')"

k create namespace ctf-system >/dev/null
k label namespace ctf-system pod-security.kubernetes.io/enforce=restricted >/dev/null
set_args=(--set image.repository="$OP_IMAGE" --set-string image.tag="$VERSION" --set operator.nodeAddress="$NODE_IP"
    --set webhook.enabled=true --set webhook.conversion.enabled=true --set operator.logFormat=text)

log "helm install with conversion, without --skip-crds: stopped, with what to do"
if h install ctf "$CHART" -n ctf-system "${set_args[@]}" --timeout 2m >"$WORK/install1.log" 2>&1; then
    fail "helm install with conversion and crds/ succeeded: the release cannot own the CRDs crds/ made"
fi
grep -q "install with --skip-crds, or let the release adopt it" "$WORK/install1.log" ||
    fail "not the chart's message: $(cat "$WORK/install1.log")"
ok "refused: $(grep -o 'webhook.conversion.enabled renders the CRD [^,]*' "$WORK/install1.log" | head -1)"
k delete crd $DEFS $CHALS >/dev/null
h uninstall ctf -n ctf-system >/dev/null 2>&1 || true

log "helm install --skip-crds with conversion"
h install ctf "$CHART" -n ctf-system "${set_args[@]}" --skip-crds --wait --timeout 5m >"$WORK/install.log" 2>&1 ||
    { cat "$WORK/install.log"; fail "helm install --skip-crds"; }
k wait --for=condition=Established crd/$DEFS crd/$CHALS --timeout=60s >/dev/null || fail "CRDs not Established"
for crd in $DEFS $CHALS; do
    [ "$(k get crd $crd -o jsonpath='{.spec.versions[?(@.served==true)].name}/{.spec.versions[?(@.storage==true)].name}')" = "v1alpha1 v1beta1/v1beta1" ] ||
        fail "$crd versions: $(k get crd $crd -o jsonpath='{.spec.versions[*].name} storage {.spec.versions[?(@.storage==true)].name}')"
    [ "$(k get crd $crd -o jsonpath='{.metadata.annotations.helm\.sh/resource-policy}')" = keep ] || fail "$crd is not kept"
done
check_deployment ctf-system ctf-kopc-ctf ctf-kopc-ctf "$OP_IMAGE:$VERSION"
check_leader ctf-system
ok "the chart's CRDs serve v1alpha1 and v1beta1, store v1beta1, are kept on uninstall; 2 operator pods Ready, one leads"

log "conversion and validation through the chart's webhook Service"
k apply -f "$SRC/config/samples/ctf_flag_key_secret.yaml" -f "$SRC/config/samples/ctf_v1alpha1_challengedefinition_nc.yaml" >/dev/null
k -n ctf patch challengedefinitions.v1alpha1.ctf.kopc.io nc --type merge \
    -p '{"spec":{"update":{"strategy":"Rolling","maxUnavailable":2}}}' >/dev/null || fail "a v1alpha1 patch was refused"
beta=$(k -n ctf get challengedefinitions.v1beta1.ctf.kopc.io nc -o jsonpath='{.spec.update.rolling.maxUnavailable}') ||
    fail "a v1beta1 read (the conversion webhook) failed"
[ "$beta" = 2 ] || fail "update.rolling.maxUnavailable at v1beta1: $beta"
alpha=$(k -n ctf get challengedefinitions.v1alpha1.ctf.kopc.io nc -o jsonpath='{.spec.update.maxUnavailable}')
[ "$alpha" = 2 ] || fail "update.maxUnavailable at v1alpha1: $alpha"
if out=$(printf 'apiVersion: ctf.kopc.io/v1beta1\nkind: Challenge\nmetadata: {name: nope, namespace: ctf}\nspec: {definition: missing, team: x}\n' | k apply -f - 2>&1); then
    fail "a Challenge naming a missing definition was admitted"
fi
grep -q "validate-challenge.ctf.kopc.io" <<<"$out" || fail "not the webhook's refusal: $out"
printf 'apiVersion: ctf.kopc.io/v1beta1\nkind: Challenge\nmetadata: {name: nc-team-a, namespace: ctf}\nspec: {definition: nc, team: team-a}\n' |
    k apply -f - >/dev/null || fail "a v1beta1 Challenge was refused"
running() { [ "$(k -n ctf get $CHALS nc-team-a -o jsonpath='{.status.currentStatus}')" = Running ]; }
wait_for 180 "nc-team-a Running" running
ok "v1alpha1 written, v1beta1 read (rolling.maxUnavailable 2) and back through the chart's Service and CA; a bad Challenge refused; a v1beta1 one Running"

log "helm upgrade keeps the chart's CA; the webhooks still answer; the instance is untouched"
WH=ctf-kopc-ctf-webhook
cas() { # the CA in the chart's Secret, the validating configuration and both CRDs
    k -n ctf-system get secret "$WH-cert" -o jsonpath='{.data.ca\.crt}'; echo
    k get validatingwebhookconfiguration ctf-kopc-ctf -o jsonpath='{.webhooks[0].clientConfig.caBundle}'; echo
    for crd in $DEFS $CHALS; do k get crd $crd -o jsonpath='{.spec.conversion.webhook.clientConfig.caBundle}'; echo; done
}
instance_pod() { k get pods -A -l ctf.kopc.io/challenge=nc-team-a -o jsonpath='{.items[*].metadata.uid}'; }
cas >"$WORK/ca.before"
[ "$(sort -u "$WORK/ca.before" | grep -c .)" = 1 ] || fail "the chart's CA differs between its Secret and its users: $(cat "$WORK/ca.before")"
pod_before=$(instance_pod)
[ -n "$pod_before" ] || fail "no pod of nc-team-a's instance"
h upgrade ctf "$CHART" -n ctf-system "${set_args[@]}" --set operator.workers=8 --wait --timeout 5m \
    >"$WORK/upgrade.log" 2>&1 || { cat "$WORK/upgrade.log"; fail "helm upgrade"; }
grep -q -- '"--workers","8"' <<<"$(k -n ctf-system get deploy ctf-kopc-ctf -o jsonpath='{.spec.template.spec.containers[0].args}' | tr -d ' ')" ||
    fail "the upgrade did not reach the Deployment: $(k -n ctf-system get deploy ctf-kopc-ctf -o jsonpath='{.spec.template.spec.containers[0].args}')"
k -n ctf-system rollout status deploy/ctf-kopc-ctf --timeout=180s >/dev/null || fail "the upgraded operator did not roll out"
cas >"$WORK/ca.after"
cmp -s "$WORK/ca.before" "$WORK/ca.after" || fail "helm upgrade changed the chart's CA: $(diff "$WORK/ca.before" "$WORK/ca.after" | head -3)"
check_leader ctf-system
k -n ctf patch challengedefinitions.v1alpha1.ctf.kopc.io nc --type merge \
    -p '{"spec":{"update":{"strategy":"Rolling","maxUnavailable":3}}}' >/dev/null || fail "a v1alpha1 patch after the upgrade was refused"
beta=$(k -n ctf get challengedefinitions.v1beta1.ctf.kopc.io nc -o jsonpath='{.spec.update.rolling.maxUnavailable}') ||
    fail "a v1beta1 read after the upgrade failed"
[ "$beta" = 3 ] || fail "update.rolling.maxUnavailable at v1beta1 after the upgrade: $beta"
if out=$(printf 'apiVersion: ctf.kopc.io/v1beta1\nkind: Challenge\nmetadata: {name: nope, namespace: ctf}\nspec: {definition: missing, team: x}\n' | k apply -f - 2>&1); then
    fail "after the upgrade a Challenge naming a missing definition was admitted"
fi
grep -q "validate-challenge.ctf.kopc.io" <<<"$out" || fail "after the upgrade, not the webhook's refusal: $out"
wait_for 60 "nc-team-a Running after the upgrade" running
[ "$(instance_pod)" = "$pod_before" ] || fail "the upgrade replaced the instance's pod"
ok "helm upgrade: the operator rolled (--workers 8), the CA kept in its Secret, the webhook configuration and both CRDs; conversion and validation answer; the instance's pod unchanged"

log "helm uninstall keeps the CRDs and the objects"
h uninstall ctf -n ctf-system --wait --timeout 2m >/dev/null || fail "helm uninstall"
k get crd $DEFS $CHALS >/dev/null || fail "helm uninstall deleted the CRDs"
# Read at v1beta1, the version it is stored in: a v1alpha1 read would need
# the conversion webhook, gone with the release.
k -n ctf get challengedefinitions.v1beta1.ctf.kopc.io nc >/dev/null || fail "the definition is gone"
k -n ctf get $CHALS nc-team-a >/dev/null || fail "the Challenge is gone"
ok "after helm uninstall the CRDs, the definition and the Challenge remain"

log "adoption: CRDs of no release, adopted by following the chart's message"
for crd in $DEFS $CHALS; do
    k label crd $crd app.kubernetes.io/managed-by- >/dev/null
    k annotate crd $crd meta.helm.sh/release-name- meta.helm.sh/release-namespace- >/dev/null
done
adopted=0
for _ in 1 2 3; do
    if h install ctf "$CHART" -n ctf-system "${set_args[@]}" --wait --timeout 5m >"$WORK/adopt.log" 2>&1; then
        break
    fi
    # The chart names one CRD at a time: run the commands its message gives, as a user would.
    python3 - "$WORK/adopt.log" >"$WORK/adopt.cmds" <<'PY' || fail "not the chart's adoption message: $(cat "$WORK/adopt.log")"
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"let the release adopt it: (kubectl label crd \S+ \S+); (kubectl annotate crd \S+ \S+ \S+)", text)
if not m:
    sys.exit(1)
print(m.group(1))
print(m.group(2))
PY
    while read -r -a cmd; do
        [ "${cmd[0]}" = kubectl ] || fail "not a kubectl command: ${cmd[*]}"
        k "${cmd[@]:1}" >/dev/null || fail "the chart's adoption command failed: ${cmd[*]}"
    done <"$WORK/adopt.cmds"
    adopted=$((adopted + 1))
    h uninstall ctf -n ctf-system >/dev/null 2>&1 || true
done
[ "$adopted" = 2 ] || fail "adopted $adopted CRDs by the message, want 2: $(cat "$WORK/adopt.log")"
for crd in $DEFS $CHALS; do
    [ "$(k get crd $crd -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}')" = ctf ] ||
        fail "$crd is not the release's after the install"
done
[ "$(k -n ctf get challengedefinitions.v1alpha1.ctf.kopc.io nc -o jsonpath='{.spec.update.maxUnavailable}')" = 3 ] ||
    fail "the kept definition is not served at v1alpha1 after the adoption"
wait_for 120 "nc-team-a Running after the adoption" running
ok "CRDs of no release: the install stops with the commands to adopt them; after running them ($adopted), the release owns both CRDs and serves the kept objects at both versions"
echo "PASS: $passed checks"
