#!/usr/bin/env bash
# install_certmanager_test.sh - the Helm chart's webhook certificate made by
# real cert-manager (v1.21.2, built from its Go module: make cert-manager;
# its controller and cainjector run beside the devcluster,
# certmanager_lib.sh), on a devcluster with a real node (the operator in the
# cluster, from its image). Until this test, cert-manager had never run
# here: the other webhook tests take the chart's own CA. Checked:
#   - with cert-manager's API served, the chart (webhook.certManager.enabled
#     auto, conversion on) renders an Issuer and a Certificate and no
#     caBundle of its own; inject-ca-from on the validating webhook and the
#     CRD with a conversion webhook (ChallengeDefinition), not on Challenge's;
#   - cert-manager issues it: the Issuer and the Certificate Ready, the
#     Secret written by cert-manager (its annotations) for the Service's
#     names; the operator's pods, which mount it, Ready;
#   - the cainjector fills the caBundle of the validating webhook and of
#     ChallengeDefinition's conversion webhook with the Secret's CA
#     (Challenge's conversion is None);
#   - through the apiserver with that CA: a Challenge naming a missing
#     definition is refused with the operator's message, and a definition
#     written at v1alpha1 is read at v1beta1 and back (conversion);
#   - renewal, as `cmctl renew` asks for it (the Issuing condition): a new
#     key and certificate in the Secret, the new CA injected, and the same
#     operator pods, not restarted, serve the new certificate (asked of each
#     pod: they reloaded the files the kubelet updated); the webhooks answer;
#   - helm upgrade (the pods roll) keeps the Secret and the injected
#     caBundles (Helm's three-way merge leaves fields it never set); the
#     webhooks answer;
#   - webhook.certManager.issuerRef (helm upgrade): a CA ClusterIssuer of
#     the user's re-issues the certificate, its CA injected and served;
#   - kustomize's config/with-webhook (after helm uninstall, the CRDs kept):
#     its Issuer and Certificate Ready, the CA injected, the webhooks answer.
# The apiserver reaches the webhook's pods directly
# (--enable-aggregator-routing: the devcluster's apiserver runs on the host,
# which has no route to Service IPs).
#
# Env: DEVCLUSTER, KUBECTL, HELM (binaries), SRC (repo root), KOP_TEST_TMP;
# CERT_MANAGER_BIN (certmanager_lib.sh).
set -euo pipefail
# shellcheck source=install_lib.sh
source "$(dirname "$0")/install_lib.sh"
# shellcheck source=certmanager_lib.sh
source "$(dirname "$0")/certmanager_lib.sh"
HELM=${HELM:?}
[ -x "$HELM" ] || { echo "FAIL: no $HELM: run make helm" >&2; exit 1; }
cm_cleanup() { cert_manager_stop; install_stop_forward; }
e2e_init install-certmanager cm_cleanup
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    if [ -f "$DIR/kubeconfig" ]; then
        k -n "${NS:-ctf-system}" get certificate,certificaterequest,issuer -o wide >&2 2>&1 || true
        k -n "${NS:-ctf-system}" get pods -o wide >&2 2>&1 || true
        k -n "${NS:-ctf-system}" logs -l app.kubernetes.io/component=operator --tail=20 --prefix >&2 2>&1 || true
    fi
    cert_manager_logs
    real_node_logs "$DIR" >&2
    fail_summary "$*"
    exit 1
}
export HELM_CACHE_HOME=$WORK/helm/cache HELM_CONFIG_HOME=$WORK/helm/config HELM_DATA_HOME=$WORK/helm/data
CHART=$SRC/charts/kopc-ctf
NS=ctf-system
DEFS=challengedefinitions.ctf.kopc.io
CHALS=challenges.ctf.kopc.io
WH=ctf-kopc-ctf-webhook
VWC=ctf-kopc-ctf
h() { "$HELM" --kubeconfig "$DIR/kubeconfig" "$@"; }

log "a devcluster with a real node and the operator's image; cert-manager beside it"
real_cluster --apiserver-arg=--enable-aggregator-routing=true
cert_manager_start
ok "images pushed; cert-manager $CM_VERSION's controller and cainjector running, its CRDs Established"

log "helm install with the webhook and conversion, cert-manager auto-detected"
k create namespace $NS >/dev/null
k label namespace $NS pod-security.kubernetes.io/enforce=restricted >/dev/null
set_args=(--set image.repository="$OP_IMAGE" --set-string image.tag="$VERSION" --set operator.nodeAddress="$NODE_IP"
    --set webhook.enabled=true --set webhook.conversion.enabled=true --set operator.logFormat=text)
# Helm's wait would hold until the pods are Ready, which needs cert-manager's Secret.
h install ctf "$CHART" -n $NS "${set_args[@]}" --skip-crds --wait --timeout 5m >"$WORK/install.log" 2>&1 ||
    { cat "$WORK/install.log"; fail "helm install --skip-crds with cert-manager"; }
h get manifest ctf -n $NS >"$WORK/manifest.yaml"
python3 - "$WORK/manifest.yaml" "$WH" <<'PY' || fail "the release is not the chart's cert-manager mode"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
wh = sys.argv[2]
assert ("Certificate", wh) in kinds, f"no Certificate {wh}: {sorted(kinds)}"
assert ("Issuer", wh + "-selfsigned") in kinds, "no self-signed Issuer"
assert ("Secret", wh + "-cert") not in kinds, "the chart made the Secret itself"
for d in docs:
    if d["kind"] == "ValidatingWebhookConfiguration":
        assert "caBundle" not in d["webhooks"][0]["clientConfig"], "the chart set a caBundle"
        assert d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"ctf-system/{wh}"
    if d["kind"] == "CustomResourceDefinition":
        conv = d["spec"]["conversion"]
        assert "caBundle" not in conv.get("webhook", {}).get("clientConfig", {}), "a CRD caBundle"
        ann = d["metadata"]["annotations"].get("cert-manager.io/inject-ca-from")
        if conv["strategy"] == "Webhook":
            assert ann == f"ctf-system/{wh}", f"{d['metadata']['name']}: inject-ca-from {ann}"
        else:  # nothing to inject: no conversion webhook
            assert ann is None, f"{d['metadata']['name']} (strategy {conv['strategy']}): inject-ca-from {ann}"
PY
ok "auto: an Issuer and a Certificate, no Secret and no caBundle of the chart's; inject-ca-from on the webhook and ChallengeDefinition's conversion only"

log "cert-manager issued the certificate"
ready() { [ "$(k -n $NS get "$1" "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
wait_for 120 "Issuer $WH-selfsigned Ready" ready issuer "$WH-selfsigned"
wait_for 120 "Certificate $WH Ready" ready certificate "$WH"
secret_field() { k -n $NS get secret "$WH-cert" -o jsonpath="{.data.$1}"; }
[ "$(k -n $NS get secret "$WH-cert" -o jsonpath='{.metadata.annotations.cert-manager\.io/certificate-name}')" = "$WH" ] ||
    fail "the Secret was not written by cert-manager: $(k -n $NS get secret "$WH-cert" -o jsonpath='{.metadata.annotations}')"
[ "$(k -n $NS get secret "$WH-cert" -o jsonpath='{.metadata.annotations.cert-manager\.io/issuer-name}')" = "$WH-selfsigned" ] ||
    fail "the Secret's issuer is not the chart's Issuer"
secret_field 'tls\.crt' | base64 -d >"$WORK/tls1.crt"
openssl x509 -in "$WORK/tls1.crt" -noout -ext subjectAltName >"$WORK/san1" || fail "no certificate in the Secret"
{ grep -q "DNS:$WH.$NS.svc," "$WORK/san1" && grep -q "DNS:$WH.$NS.svc.cluster.local" "$WORK/san1"; } ||
    fail "the certificate's names: $(cat "$WORK/san1")"
check_deployment $NS ctf-kopc-ctf ctf-kopc-ctf "$OP_IMAGE:$VERSION"
ok "Issuer and Certificate Ready; Secret $WH-cert written by cert-manager for the Service's names; 2 operator pods Ready with it mounted"

log "the cainjector filled every caBundle"
# bundles: the Secret's CA, then the caBundle of the webhook and of
# ChallengeDefinition's conversion (Challenge's strategy is None: no
# webhook), one a line.
bundles() {
    secret_field 'ca\.crt'; echo
    k get validatingwebhookconfiguration "$VWC" -o jsonpath='{.webhooks[0].clientConfig.caBundle}'; echo
    k get crd $DEFS -o jsonpath='{.spec.conversion.webhook.clientConfig.caBundle}'; echo
}
# injected [exact]: the Secret's CA is in both bundles (exact: is each; a
# renewal appends, as cert-manager's CAInjectorMerging does).
injected() {
    bundles >"$WORK/bundles" && python3 - "$WORK/bundles" "${1:-}" <<'PY'
import base64, re, sys
lines = open(sys.argv[1]).read().split("\n")
certs = lambda b64: re.findall(r"-----BEGIN CERTIFICATE-----[^-]*-----END CERTIFICATE-----", base64.b64decode(b64).decode())
[ca] = certs(lines[0])
for b in lines[1:3]:
    got = certs(b) if b else []
    assert ca in got, "the Secret's CA is not in the bundle"
    assert sys.argv[2] != "exact" or got == [ca], "the bundle is not the Secret's CA alone"
PY
}
[ "$(k get crd $CHALS -o jsonpath='{.spec.conversion.strategy}')" = None ] || fail "Challenge's conversion is not None"
wait_for 120 "the cainjector to put the Secret's CA in the webhook and ChallengeDefinition's conversion" injected exact
ok "the validating webhook's and ChallengeDefinition's conversion caBundle are the Secret's CA"

log "the webhooks through the apiserver with cert-manager's CA"
refused() { # a Challenge naming a missing definition, refused by the operator
    if out=$(printf 'apiVersion: ctf.kopc.io/v1beta1\nkind: Challenge\nmetadata: {name: nope, namespace: ctf}\nspec: {definition: missing, team: x}\n' | k apply -f - 2>&1); then
        fail "a Challenge naming a missing definition was admitted"
    fi
    grep -qF "denied the request: ChallengeDefinition missing not found in namespace ctf" <<<"$out"
}
converts() { # written at v1alpha1 with $1, read at v1beta1 and v1alpha1
    k -n ctf patch challengedefinitions.v1alpha1.ctf.kopc.io nc --type merge \
        -p "{\"spec\":{\"update\":{\"strategy\":\"Rolling\",\"maxUnavailable\":$1}}}" &&
        [ "$(k -n ctf get challengedefinitions.v1beta1.ctf.kopc.io nc -o jsonpath='{.spec.update.rolling.maxUnavailable}')" = "$1" ] &&
        [ "$(k -n ctf get challengedefinitions.v1alpha1.ctf.kopc.io nc -o jsonpath='{.spec.update.maxUnavailable}')" = "$1" ]
}
k apply -f "$SRC/config/samples/ctf_flag_key_secret.yaml" -f "$SRC/config/samples/ctf_v1alpha1_challengedefinition_nc.yaml" >/dev/null
refused || fail "not the operator's refusal: $out"
converts 2 || fail "conversion v1alpha1 -> v1beta1 -> v1alpha1 failed"
ok "a Challenge naming a missing definition refused with the operator's message; v1alpha1 written, v1beta1 read and back"

log "renewal: a new certificate, injected, served by the same pods after reloading"
pods() { k -n $NS get pods -l app.kubernetes.io/component=operator \
    -o jsonpath='{range .items[*]}{.metadata.uid}/{.status.containerStatuses[0].restartCount}{"\n"}{end}' | sort; }
# pods_serve CERT: each operator pod serves CERT (PEM) on its webhook port,
# asked directly through a port-forward.
pods_serve() {
    local want pod pf port
    want=$(grep -v -- '-----' "$1" | tr -d '\n')
    for pod in $(k -n $NS get pods -l app.kubernetes.io/component=operator -o jsonpath='{.items[*].metadata.name}'); do
        k -n $NS port-forward "pod/$pod" "0:9443" >"$WORK/pf-$pod.log" 2>&1 &
        pf=$!
        PF_PID=$pf
        wait_for 30 "a port-forward to $pod" grep -q 'Forwarding from 127.0.0.1:' "$WORK/pf-$pod.log"
        port=$(sed -n 's/^Forwarding from 127.0.0.1:\([0-9]*\) .*/\1/p' "$WORK/pf-$pod.log" | head -1)
        served() { openssl s_client -connect "127.0.0.1:$port" -servername "$WH.$NS.svc" </dev/null 2>/dev/null |
            openssl x509 -outform PEM | grep -v -- '-----' | tr -d '\n' >"$WORK/served" && [ "$(cat "$WORK/served")" = "$want" ]; }
        wait_for 180 "$pod to serve the certificate in $1" served
        kill "$pf" 2>/dev/null || true
    done
}
pods >"$WORK/pods1"
revision=$(k -n $NS get certificate "$WH" -o jsonpath='{.status.revision}')
# What `cmctl renew` does: the Issuing condition, reason ManuallyTriggered.
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
k -n $NS patch certificate "$WH" --subresource=status --type=json -p "[{\"op\":\"add\",\"path\":\"/status/conditions/-\",
  \"value\":{\"type\":\"Issuing\",\"status\":\"True\",\"reason\":\"ManuallyTriggered\",\"message\":\"renewal asked by the test\",\"lastTransitionTime\":\"$now\"}}]" \
    >/dev/null || fail "could not ask for a renewal"
renewed() { [ "$(k -n $NS get certificate "$WH" -o jsonpath='{.status.revision}')" -gt "$revision" ] && ready certificate "$WH"; }
wait_for 120 "the Certificate re-issued (revision > $revision) and Ready" renewed
secret_field 'tls\.crt' | base64 -d >"$WORK/tls2.crt"
cmp -s "$WORK/tls1.crt" "$WORK/tls2.crt" && fail "the Secret still holds the first certificate"
[ "$(openssl x509 -in "$WORK/tls1.crt" -noout -pubkey)" != "$(openssl x509 -in "$WORK/tls2.crt" -noout -pubkey)" ] ||
    fail "the renewed certificate kept the key (rotationPolicy Always)"
wait_for 120 "the new CA in the webhook's and the conversion's caBundle" injected
# Each pod, as it was, must serve the renewed certificate: the kubelet
# updates the mounted Secret (within its sync period), the operator
# reloads the files. Asked of each pod directly: the apiserver trusts the
# old CA too (the cainjector appends), so its calls alone would not tell.
pods_serve "$WORK/tls2.crt"
pods >"$WORK/pods2"
cmp -s "$WORK/pods1" "$WORK/pods2" || fail "the operator's pods changed or restarted: $(cat "$WORK/pods1") -> $(cat "$WORK/pods2")"
refused || fail "after the renewal, not the operator's refusal: $out"
converts 3 || fail "after the renewal, conversion failed"
cert_manager_alive
ok "renewed: a new key and certificate, the new CA injected, both pods serve it without a restart; refusal and conversion answer"

log "helm upgrade keeps what cert-manager made: the Secret, the injected caBundles"
bundles >"$WORK/bundles.before"
h upgrade ctf "$CHART" -n $NS "${set_args[@]}" --set operator.workers=8 --wait --timeout 5m \
    >"$WORK/upgrade.log" 2>&1 || { cat "$WORK/upgrade.log"; fail "helm upgrade"; }
k -n $NS rollout status deploy/ctf-kopc-ctf --timeout=180s >/dev/null || fail "the upgraded operator did not roll out"
bundles >"$WORK/bundles.after"
cmp -s "$WORK/bundles.before" "$WORK/bundles.after" ||
    fail "helm upgrade changed the Secret or a caBundle cert-manager filled: $(diff "$WORK/bundles.before" "$WORK/bundles.after" | cut -c1-80)"
pods >"$WORK/pods3"
cmp -s "$WORK/pods2" "$WORK/pods3" && fail "helm upgrade did not roll the operator's pods"
refused || fail "after helm upgrade, not the operator's refusal: $out"
converts 5 || fail "after helm upgrade, conversion failed"
ok "helm upgrade (the pods rolled): the Secret and every caBundle unchanged; refusal and conversion answer"

log "webhook.certManager.issuerRef: the user's CA ClusterIssuer instead of the chart's Issuer"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=kopc-test-user-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -keyout "$WORK/userca.key" -out "$WORK/userca.crt" 2>/dev/null || fail "openssl: the user's CA"
# A ClusterIssuer's Secret lives in cert-manager's cluster resource namespace (kube-system here).
k -n kube-system create secret tls user-ca --cert="$WORK/userca.crt" --key="$WORK/userca.key" >/dev/null
printf 'apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata: {name: user-ca}\nspec: {ca: {secretName: user-ca}}\n' |
    k apply -f - >/dev/null
wait_for 120 "ClusterIssuer user-ca Ready" ready clusterissuer user-ca
h upgrade ctf "$CHART" -n $NS "${set_args[@]}" --set operator.workers=8 \
    --set webhook.certManager.issuerRef.kind=ClusterIssuer --set webhook.certManager.issuerRef.name=user-ca \
    --wait --timeout 5m >"$WORK/upgrade2.log" 2>&1 || { cat "$WORK/upgrade2.log"; fail "helm upgrade with issuerRef"; }
k -n $NS get issuer "$WH-selfsigned" >/dev/null 2>&1 && fail "the chart's Issuer remains with issuerRef set"
user_ca() { secret_field 'ca\.crt' | base64 -d >"$WORK/ca3.crt" && cmp -s "$WORK/ca3.crt" "$WORK/userca.crt" && ready certificate "$WH"; }
wait_for 120 "the Certificate re-issued by ClusterIssuer user-ca" user_ca
secret_field 'tls\.crt' | base64 -d >"$WORK/tls3.crt"
openssl verify -CAfile "$WORK/userca.crt" "$WORK/tls3.crt" >/dev/null || fail "the certificate is not signed by the user's CA"
wait_for 120 "the user's CA in the webhook's and the conversion's caBundle" injected
pods_serve "$WORK/tls3.crt"
refused || fail "with issuerRef, not the operator's refusal: $out"
converts 6 || fail "with issuerRef, conversion failed"
ok "issuerRef: the chart's Issuer gone, the certificate re-issued by the user's CA ClusterIssuer, that CA injected and served; refusal and conversion answer"

log "helm uninstall, then kustomize's config/with-webhook with the same cert-manager"
h uninstall ctf -n $NS --wait --timeout 2m >/dev/null || fail "helm uninstall"
NS=kopc-system WH=kopc-ctf-operator-webhook VWC=kopc-ctf-operator
image_overlay "$WORK/overlay" "$SRC/config/with-webhook" "$VERSION"
k apply -k "$WORK/overlay" >"$WORK/apply.log" 2>&1 || { cat "$WORK/apply.log"; fail "kubectl apply -k config/with-webhook"; }
wait_for 120 "Issuer kopc-ctf-operator-selfsigned Ready" ready issuer kopc-ctf-operator-selfsigned
wait_for 120 "Certificate $WH Ready" ready certificate "$WH"
[ "$(k -n $NS get secret "$WH-cert" -o jsonpath='{.metadata.annotations.cert-manager\.io/certificate-name}')" = "$WH" ] ||
    fail "config/with-webhook's Secret was not written by cert-manager"
check_deployment $NS kopc-ctf-operator kopc-ctf-operator "$OP_IMAGE:$VERSION"
# The CRDs kept from the release still hold its CA: the cainjector adds the new one.
wait_for 120 "the cainjector to put config/with-webhook's CA in the webhook and the conversion" injected
refused || fail "config/with-webhook: not the operator's refusal: $out"
converts 7 || fail "config/with-webhook: conversion failed"
ok "config/with-webhook: Issuer and Certificate Ready, the Secret cert-manager's, its CA injected; refusal and conversion answer"
echo "PASS: $passed checks"
