#!/usr/bin/env bash
# kopgen_test.sh - kop-gen as a new user meets it, end to end: libkop and
# kop-gen installed into a fresh prefix (cmake --install, what `make install
# PREFIX=...` runs), a Website operator generated from the sample CRD
# (tools/kop-gen/testdata/website.yaml) owning a ConfigMap and a Deployment,
# built out of tree with find_package(kop) against the prefix only, with
# -Werror. Checked:
#   - after a CRD change (a new spec field) and a new owned kind,
#     `kop-gen generate` keeps the hand-edited reconciler byte for byte,
#     regenerates the accessors (the edit uses the new field's getter, so
#     the project builds only if they were) and the RBAC, and the project
#     still builds;
#   - on a devcluster (fake nodes), the generated project's own test
#     (test/e2e.sh: children, status, finalizer, a deleted child back,
#     deletion, SIGTERM) passes;
#   - the operator, run as its service account with the generated RBAC and
#     leader election, makes a Website's ConfigMap (data from the spec) and
#     Deployment (replicas from the spec), controlled by it, and its
#     status (Ready, observedGeneration); an edit of the spec reaches both
#     children and observedGeneration; deleting it runs the finalizer and
#     it goes; the operator logged no Forbidden.
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
op=
kopgen_cleanup() { [ -z "$op" ] || kill -9 "$op" 2>/dev/null || true; }
e2e_init kopgen kopgen_cleanup
PREFIX=$WORK/prefix
SITE=$WORK/website-operator
NS=website-operator-system
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -25 "$f" >&2; }; done
    fail_summary "$*"
    exit 1
}

log "libkop and kop-gen installed into a fresh prefix"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" --component libkop >"$WORK/install.log" 2>&1 ||
    fail "cmake --install (libkop)"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" --component generator >>"$WORK/install.log" 2>&1 ||
    fail "cmake --install (generator)"
KOPGEN=$PREFIX/bin/kop-gen
[ -x "$KOPGEN" ] || fail "no bin/kop-gen in the prefix"
ok "bin/kop-gen installed beside libkop"

log "kop-gen init, and an out-of-tree build with find_package(kop)"
"$KOPGEN" init --crd "$SRC/tools/kop-gen/testdata/website.yaml" --dir "$SITE" \
    --owns ConfigMap --owns Deployment >"$WORK/init.log" || fail "kop-gen init"
for f in PROJECT src/main.c src/website_controller.c src/website_types.h src/project.h \
         CMakeLists.txt Dockerfile config/rbac/role.yaml config/manager/manager.yaml \
         config/default/kustomization.yaml config/crd/websites.demo.example.com.yaml \
         config/samples/website.yaml test/e2e.sh; do
    [ -f "$SITE/$f" ] || fail "kop-gen init wrote no $f"
done
# build DIR: configure and build the project against the prefix only.
build() {
    cmake -S "$SITE" -B "$SITE/build" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_C_FLAGS=-Werror \
        >"$WORK/cmake.log" 2>&1 && cmake --build "$SITE/build" >"$WORK/build.log" 2>&1
}
build || fail "the generated project does not build"
OPERATOR=$SITE/build/website-operator
out=$("$OPERATOR" --help 2>&1) || fail "--help exited $? (kop_main: 0)"
grep -q -- '--metrics-bind' <<<"$out" || fail "--help: $out"
ok "the generated project builds out of tree against the installed libkop, -Werror clean"

log "a CRD change, a new owned kind, and kop-gen generate"
ctl=$SITE/src/website_controller.c
cat >>"$ctl" <<'EOF'

/* Added by hand: the field the CRD gains below (builds only once regenerated). */
const char *website_motd(const json_t *obj);
const char *website_motd(const json_t *obj)
{
    return website_spec_motd(obj);
}
EOF
sum=$(sha256sum "$ctl")
python3 - "$SITE/config/crd/websites.demo.example.com.yaml" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
anchor = "              title:\n"
assert anchor in s
s = s.replace(anchor, "              motd:\n                type: string\n                maxLength: 80\n" + anchor, 1)
open(p, "w").write(s)
EOF
"$KOPGEN" generate --dir "$SITE" --owns Secret >"$WORK/generate.log" || fail "kop-gen generate"
[ "$(sha256sum "$ctl")" = "$sum" ] || fail "kop-gen generate changed the hand-edited reconciler"
grep -q '^kept .*src/website_controller.c' "$WORK/generate.log" || fail "generate did not say it kept the reconciler"
grep -q 'website_spec_motd(const json_t \*obj)' "$SITE/src/website_types.h" || fail "no accessor of the new field"
grep -q 'resources: \[secrets\]' "$SITE/config/rbac/role.yaml" || fail "the RBAC lacks the new owned kind"
grep -q '^- v1/secrets/Secret$' "$SITE/PROJECT" || fail "PROJECT lacks the new owned kind"
build || fail "the regenerated project does not build"
ok "generate keeps the edited reconciler, regenerates accessors, RBAC and PROJECT; it builds"

log "the generated project's own test, on a devcluster"
"$DEVCLUSTER" start --dir "$DIR" --nodes 1 >"$WORK/devcluster.log" 2>&1 || fail "devcluster start"
E2E_CLUSTER_DIR=$DIR OPERATOR=$OPERATOR TMPDIR=$WORK "$SITE/test/e2e.sh" >"$WORK/project-e2e.log" 2>&1 ||
    fail "the generated test/e2e.sh failed: $(tail -5 "$WORK/project-e2e.log")"
ok "the generated test/e2e.sh passes ($(grep -c '^ok' "$WORK/project-e2e.log") checks)"

log "the operator as its service account, with the generated RBAC and leader election"
k apply -f "$SITE/config/manager/namespace.yaml" >/dev/null
k apply -k "$SITE/config/rbac" >/dev/null
for verb_res in "watch websites.demo.example.com" "patch websites.demo.example.com --subresource=status" \
                "patch configmaps" "watch deployments.apps" "create events"; do
    # shellcheck disable=SC2086
    wait_for 60 "RBAC: $verb_res" k auth can-i $verb_res --as="system:serviceaccount:$NS:website-operator"
done
wait_for 60 "RBAC: leases" k auth can-i update leases.coordination.k8s.io -n "$NS" \
    --as="system:serviceaccount:$NS:website-operator"
token=$(k -n "$NS" create token website-operator --duration=1h)
server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
cat >"$WORK/sa.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: dev, cluster: {server: "$server", certificate-authority: "$DIR/ca.crt"}}]
users: [{name: op, user: {token: "$token"}}]
contexts: [{name: op, context: {cluster: dev, user: op, namespace: $NS}}]
current-context: op
EOF
PORT=$(free_port)
"$OPERATOR" --kubeconfig "$WORK/sa.kubeconfig" --metrics-bind "127.0.0.1:$PORT" --leader-elect \
    >"$WORK/operator.log" 2>&1 &
op=$!
wait_for 60 "the operator ready" curl -sf "http://127.0.0.1:$PORT/readyz"

cat <<EOF | k apply -f - >/dev/null
apiVersion: demo.example.com/v1
kind: Website
metadata: {name: web, namespace: default}
spec: {host: web.example.com, replicas: 2, motd: hello}
EOF
jp() { k get "$1" web -o jsonpath="$2"; }
wait_for 60 "status Ready, observedGeneration 1" \
    bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get website web -o jsonpath='{.status.phase}/{.status.observedGeneration}')\" = Ready/1 ]"
[ "$(jp configmap '{.data.host}/{.data.replicas}/{.data.title}')" = web.example.com/2/Welcome ] ||
    fail "ConfigMap data: $(jp configmap '{.data}')"
[ "$(jp deployment '{.spec.replicas}')" = 2 ] || fail "Deployment replicas: $(jp deployment '{.spec.replicas}')"
for kind in configmap deployment; do
    [ "$(jp $kind '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}')" = Website/web/true ] ||
        fail "the $kind is not controlled by the Website"
done
[ "$(jp website '{.metadata.finalizers[0]}')" = demo.example.com/finalizer ] || fail "no finalizer"
ok "a Website gets its ConfigMap and Deployment, controlled by it, its status and the finalizer"

k patch website web --type merge -p '{"spec":{"host":"www.example.com","replicas":3}}' >/dev/null
wait_for 60 "the edit in the ConfigMap" \
    bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get configmap web -o jsonpath='{.data.host}')\" = www.example.com ]"
wait_for 60 "the edit in the Deployment" \
    bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get deployment web -o jsonpath='{.spec.replicas}')\" = 3 ]"
wait_for 60 "observedGeneration 2" \
    bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get website web -o jsonpath='{.status.observedGeneration}')\" = 2 ]"
ok "an edit of the spec reaches both children and observedGeneration"

k delete website web --wait=false >/dev/null
wait_for 60 "the Website gone" bash -c "! '$KUBECTL' --kubeconfig '$DIR/kubeconfig' get website web"
! grep -qi forbidden "$WORK/operator.log" || fail "the operator was refused: $(grep -i -m3 forbidden "$WORK/operator.log")"
ok "deleting it releases the finalizer; the generated RBAC was enough (no Forbidden)"

kill -TERM "$op"
rc=0
wait "$op" || rc=$?
op=
[ "$rc" = 0 ] || fail "the operator exited $rc after SIGTERM"
echo "$passed passed, 0 failed"
