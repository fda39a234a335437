#!/usr/bin/env bash
# kopgen_real_test.sh - a kop-gen operator shipped as its README says, on a
# devcluster with a real node (e2e_kopgen_real: about a minute, most of it
# the real node's start; needs root, as every real-node test). libkop and kop-gen installed
# into a fresh prefix, the Website operator generated (owning a ConfigMap
# and a Deployment) and built as its Dockerfile builds it (libkop linked
# statically, installed stripped), its image made with `devcluster image`
# (the binary and the libraries it links, as tools/images.sh makes kopc's;
# no container engine), pushed to the cluster's registry, and the generated
# config/default applied with `kubectl apply -k` through an overlay that only
# sets `images:`. Checked:
#   - the generated CRD, namespace (restricted Pod Security), service
#     account, ClusterRole and binding, leader-election Role and Deployment
#     are created; the pod, admitted under the restricted level, runs the
#     pushed image on the real node and becomes Ready (the kubelet's probes
#     of /healthz and /readyz: caches synced with in-cluster configuration);
#   - it holds the leader Lease;
#   - a sample Website gets its ConfigMap and Deployment, controlled by it,
#     its status (Ready, observedGeneration 1) and the finalizer; an edit
#     reaches the Deployment and observedGeneration; deleting the Website
#     releases the finalizer and both children are garbage-collected;
#   - the operator's log has no Forbidden (the generated RBAC is enough).
#
# Env: BUILD_DIR (the built CMake build directory), DEVCLUSTER, KUBECTL, SRC,
# KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

BUILD_DIR=${BUILD_DIR:?}
DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
SRC=${SRC:?}
e2e_init kopgen-real
PREFIX=$WORK/prefix
SITE=$WORK/website-operator
NS=website-operator-system
IMAGE=registry.devcluster.test/kopgen/website-operator
TAG=0.1.0
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    if [ -f "$DIR/kubeconfig" ]; then
        k -n "$NS" get pods -o wide >&2 2>&1 || true
        k -n "$NS" logs deployment/website-operator --tail=30 >&2 2>&1 || true
    fi
    real_node_logs "$DIR" >&2
    fail_summary "$*"
    exit 1
}

log "libkop and kop-gen installed; the Website operator generated and built as its Dockerfile does"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" --component libkop >"$WORK/install.log" 2>&1 || fail "install libkop"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" --component generator >>"$WORK/install.log" 2>&1 || fail "install kop-gen"
"$PREFIX/bin/kop-gen" init --crd "$SRC/tools/kop-gen/testdata/website.yaml" --dir "$SITE" \
    --owns ConfigMap --owns Deployment >"$WORK/init.log" || fail "kop-gen init"
grep -q 'DOPERATOR_STATIC_KOP=ON' "$SITE/Dockerfile" || fail "the Dockerfile no longer links libkop statically"
(cmake -S "$SITE" -B "$WORK/build" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release -DOPERATOR_STATIC_KOP=ON &&
    cmake --build "$WORK/build" && cmake --install "$WORK/build" --prefix "$WORK/out" --strip) >"$WORK/build.log" 2>&1 ||
    fail "the project's build (as in its Dockerfile): $(tail -5 "$WORK/build.log")"
BIN=$WORK/out/bin/website-operator
readelf -d "$BIN" | grep -q 'NEEDED.*libkop' && fail "the binary needs libkop.so: it should link libkop statically"
ok "built with libkop linked in, installed stripped"

log "a devcluster with a real node, and the operator's image in its registry"
"$DEVCLUSTER" start --dir "$DIR" --nodes 0 --real-nodes 1 >"$WORK/devcluster.log" 2>&1 || fail "devcluster start --real-nodes 1"
files=(--file "$BIN:/usr/local/bin/website-operator")
for lib in $(ldd "$BIN" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    files+=(--file "$(readlink -f "$lib"):$lib")
done
# The Dockerfile's runtime stage: the binary as ENTRYPOINT, user 65532, port 9090.
"$DEVCLUSTER" image --dir "$DIR" --name "kopgen/website-operator:$TAG" "${files[@]}" \
    --entrypoint /usr/local/bin/website-operator --expose 9090 --user 65532 >"$WORK/image.log" 2>&1 ||
    fail "devcluster image: $(tail -3 "$WORK/image.log")"
ok "image $(cut -d@ -f1 "$WORK/image.log") pushed"

log "kubectl apply -k: the generated config/default, its image set by an overlay"
mkdir -p "$WORK/overlay"
cat >"$WORK/overlay/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../website-operator/config/default
images:
- name: website-operator
  newName: $IMAGE
  newTag: "$TAG"
YAML
k apply -k "$WORK/overlay" >"$WORK/apply.log" 2>&1 || fail "kubectl apply -k: $(cat "$WORK/apply.log")"
k wait --for=condition=Established crd/websites.demo.example.com --timeout=60s >/dev/null || fail "the CRD is not Established"
for o in namespace/$NS serviceaccount/website-operator clusterrole/website-operator \
         clusterrolebinding/website-operator deployment/website-operator; do
    k -n "$NS" get "$o" >/dev/null || fail "config/default did not create $o"
done
k -n "$NS" get role -o name | grep -q . || fail "config/default did not create the leader-election Role"
[ "$(k get ns "$NS" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = restricted ] ||
    fail "namespace $NS does not enforce the restricted Pod Security level"
[ "$(k -n "$NS" get deployment website-operator -o jsonpath='{.spec.template.spec.containers[0].image}')" = "$IMAGE:$TAG" ] ||
    fail "the Deployment does not run $IMAGE:$TAG"
k -n "$NS" rollout status deployment/website-operator --timeout=240s >/dev/null || fail "the operator's pod did not become Ready"
[ "$(k -n "$NS" get pods -l app.kubernetes.io/name=website-operator -o jsonpath='{.items[0].spec.nodeName}')" = real-node-0 ] ||
    fail "the operator's pod is not on real-node-0"
ok "config/default: CRD, namespace (restricted), RBAC, Deployment; the pod is Ready on the real node"
leads() { [ -n "$(k -n "$NS" get lease website-operator -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)" ]; }
wait_for 120 "the leader Lease" leads
ok "the operator holds its Lease: $(k -n "$NS" get lease website-operator -o jsonpath='{.spec.holderIdentity}')"

log "a Website reconciled by the operator in the cluster"
cat <<EOF | k apply -f - >/dev/null
apiVersion: demo.example.com/v1
kind: Website
metadata: {name: web, namespace: default}
spec: {host: web.example.com, replicas: 2}
EOF
shows() { [ "$(k get website web -o jsonpath='{.status.phase}/{.status.observedGeneration}')" = "$1" ]; }
wait_for 120 "status Ready, observedGeneration 1" shows Ready/1
for kind in configmap deployment; do
    [ "$(k get $kind web -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}')" = Website/web/true ] ||
        fail "the $kind is not controlled by the Website"
done
[ "$(k get website web -o jsonpath='{.metadata.finalizers[0]}')" = demo.example.com/finalizer ] || fail "no finalizer"
ok "the Website gets its ConfigMap and Deployment, controlled by it, its status and the finalizer"
k patch website web --type merge -p '{"spec":{"replicas":3}}' >/dev/null
replicas3() { [ "$(k get deployment web -o jsonpath='{.spec.replicas}')" = 3 ]; }
wait_for 120 "the edit in the Deployment" replicas3
wait_for 120 "observedGeneration 2" shows Ready/2
ok "an edit reaches the Deployment and observedGeneration"
k delete website web --wait=false >/dev/null
gone() { ! k get "$1" web >/dev/null 2>&1; }
wait_for 120 "the Website gone" gone website
for kind in configmap deployment; do wait_for 120 "the $kind garbage-collected" gone "$kind"; done
ok "deleting it releases the finalizer; both children are garbage-collected"
k -n "$NS" logs deployment/website-operator >"$WORK/operator.log" 2>&1 || fail "no operator log"
! grep -qi forbidden "$WORK/operator.log" || fail "the operator was refused: $(grep -i -m3 forbidden "$WORK/operator.log")"
ok "the generated RBAC was enough: no Forbidden in the operator's log"

echo "$passed passed, 0 failed"
