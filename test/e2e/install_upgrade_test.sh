#!/usr/bin/env bash
# install_upgrade_test.sh - an upgrade across real releases, and its
# rollback (issue 31; docs/crd-versions.md, "Upgrading an install" and
# "Rolling back"). The previous release is the tree before v1beta1 and the
# conversion webhook (PREV_COMMIT, default e707964: the parent of the first
# commit of v1beta1, ca578a5), built from its own sources (prev_release.sh:
# git archive + cmake, nothing checked out here) into its own image; this
# build is the other image. One devcluster with one real node (and no fake
# ones) serves both halves:
#
#   install  the previous release's config/with-webhook (its CRDs at
#            v1alpha1 alone, its validating webhook), its image, 2 replicas
#            in the cluster; 50 teams' Challenges (kubectl, v1alpha1, through
#            the old webhook), all Running on the real node, each greeting on
#            its NodePort with the team's own dynamic flag;
#   upgrade  as the docs say: the new image first (set image), then this
#            build's config/with-webhook (CRDs with v1beta1 stored, the
#            conversion webhook), a rollout restart, the storage migration
#            Job (config/migrate-storage); a 51st Challenge created at v1beta1;
#   rollback as the docs say: storage back to v1alpha1 (a JSON patch of the
#            CRDs), the migration Job again, the previous image, then the
#            previous release's config/with-webhook (v1alpha1 alone again).
#
# After the upgrade and after the rollback, each time only once the operator
# now leading has reconciled every Challenge (its own
# controller_runtime_reconcile_total), checked (upgrade_state.py):
#   - no Challenge lost, none new but the one made on purpose; each keeps its
#     uid, spec, status (Running, namespace, endpoints, startedAt, expiresAt);
#   - each instance keeps its namespace, pods (uid, node, every container's
#     restart count and container id: no restart, no replacement),
#     Deployments, Services (uid, node ports) and Secrets (uid, data);
#   - each team's endpoint answers with the same flag as before;
#   - after the upgrade every Challenge and ChallengeDefinition reads at
#     v1alpha1 and at v1beta1 as the same object (spec.update in either
#     shape), before and after the migration, which leaves storedVersions
#     [v1beta1]; after the rollback's migration storedVersions is
#     [v1alpha1], then with the previous CRDs v1beta1 is no longer served
#     and every object reads at v1alpha1 as it did before the upgrade;
#   - the operator's pods run the image of each step, are Ready, one leads;
#     the conversion webhook is really called (a v1beta1 read of a
#     definition stored as v1alpha1), no Forbidden in any operator's log.
#
# The webhook's certificate: the releases' config/webhook asks cert-manager,
# which the devcluster does not run; the test plays its part (a CA and a
# serving certificate for the Service's names in the Secret the Certificate
# names, the caBundle where cainjector would put it). The apiserver reaches
# the webhook's pods directly (--enable-aggregator-routing: the host, where
# the devcluster's apiserver runs, has no route to Service IPs).
#
# Run time on the shared 2-core machine: 80 s measured (50 real pods, four
# rollouts of the operator, two migration Jobs), plus the previous release's
# build on a first run; the ctest timeout allows far more under load.
#
# Env: DEVCLUSTER, KUBECTL (binaries), SRC (repo root), KOP_TEST_TMP;
# BUILD_DIR (this build's CMake tree, for its image), PREV_COMMIT, N (50).
set -euo pipefail
# shellcheck source=install_lib.sh
source "$(dirname "$0")/install_lib.sh"
install_init install-upgrade
OP_NS=kopc-system
N=${N:-50}
PREV_COMMIT=${PREV_COMMIT:-e707964}
BUILD_DIR=${BUILD_DIR:-$SRC/build/cmake}
PREV_OUT=${PREV_OUT:-$BUILD_DIR/prev-release}
DEFS=challengedefinitions.ctf.kopc.io
CHALS=challenges.ctf.kopc.io
export KUBECTL KUBECONFIG=$DIR/kubeconfig
STATE="python3 $SRC/test/e2e/upgrade_state.py"
T0=$SECONDS

log "the previous release ($PREV_COMMIT) built from its own tree"
PREV=$("$SRC/test/e2e/prev_release.sh" "$SRC" "$PREV_COMMIT" "$PREV_OUT") || fail "the previous release does not build"
PREV_SHA=$(cut -c1-7 "$PREV/commit")
! git -C "$SRC" merge-base --is-ancestor "$(git -C "$SRC" rev-parse HEAD)" "$PREV_SHA" 2>/dev/null ||
    fail "$PREV_SHA is not older than this tree"
[ ! -e "$PREV/src/operators/ctf/core/conversion.c" ] || fail "$PREV_SHA already has the conversion: not the release before it"
ok "previous release $PREV_SHA built ($PREV/src/build/bin/ctf-operator), without v1beta1 or the conversion"

log "a devcluster with a real node; this build's image and the previous release's"
real_cluster --apiserver-arg=--enable-aggregator-routing=true
PREV_TAG=$VERSION-$PREV_SHA
NEW_TAG=$VERSION
BUILD_DIR=$PREV/build TAG=$PREV_TAG "$SRC/tools/images.sh" "$DIR" operator >>"$WORK/images" ||
    fail "tools/images.sh operator for $PREV_SHA"
ok "images pushed: $(cut -d@ -f1 "$WORK/images" | tr '\n' ' ')"

# cert-manager's part: a CA, and the webhook Service's serving certificate.
(
    cd "$WORK"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
        -out ca.crt -days 1 -subj /CN=kopc-upgrade-test-ca
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout tls.key \
        -out tls.csr -subj /CN=kopc-ctf-operator-webhook.kopc-system.svc
    printf 'subjectAltName=DNS:kopc-ctf-operator-webhook.kopc-system.svc,DNS:kopc-ctf-operator-webhook.kopc-system.svc.cluster.local\nextendedKeyUsage=serverAuth\n' >ext.cnf
    openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile ext.cnf -out tls.crt
) >/dev/null 2>&1 || fail "openssl could not make the certificates"

# render TREE TAG OUT: TREE's config/with-webhook as a user's overlay renders
# it (the image at TAG, NodePort endpoints on the node's address), with what
# cert-manager would add: no Issuer or Certificate, the Certificate's
# Secret, and the CA in every clientConfig that cainjector fills.
render() {
    local tree=$1 tag=$2 out=$3 ov
    ov=$WORK/overlay-$tag
    image_overlay "$ov" "$tree/config/with-webhook" "$tag"
    k kustomize "$ov" | python3 -c '
import base64, json, sys, yaml
ca = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
docs = [d for d in yaml.safe_load_all(sys.stdin) if d and not d["apiVersion"].startswith("cert-manager.io/")]
for d in docs:
    if "cert-manager.io/inject-ca-from" not in d["metadata"].get("annotations", {}):
        continue
    for w in d.get("webhooks", []):
        w["clientConfig"]["caBundle"] = ca
    conv = d.get("spec", {}).get("conversion", {})
    if conv.get("strategy") == "Webhook":
        conv["webhook"]["clientConfig"]["caBundle"] = ca
crt, key = (base64.b64encode(open(p, "rb").read()).decode() for p in sys.argv[2:4])
docs.append({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
             "metadata": {"name": "kopc-ctf-operator-webhook-cert", "namespace": "kopc-system"},
             "data": {"tls.crt": crt, "tls.key": key, "ca.crt": ca}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))' \
        "$WORK/ca.crt" "$WORK/tls.crt" "$WORK/tls.key" >"$out" || fail "rendering $tree/config/with-webhook"
}

# operator_on TAG: the Deployment rolled out at TAG, every operator pod at
# TAG and Ready on the real node, one of them (not one on its way out)
# leading; LEADER is its pod.
operator_on() {
    local tag=$1 images=
    k -n kopc-system rollout status deploy/kopc-ctf-operator --timeout=300s >/dev/null ||
        fail "the operator at $tag did not roll out"
    only_tag() {
        images=$(k -n kopc-system get pods -l app.kubernetes.io/component=operator \
            -o jsonpath='{range .items[*]}{.spec.containers[0].image}{"\n"}{end}' | sort -u)
        [ "$images" = "$OP_IMAGE:$tag" ]
    }
    wait_for 120 "only operator pods at $tag" only_tag
    check_deployment kopc-system kopc-ctf-operator kopc-ctf-operator "$OP_IMAGE:$tag"
    leads_now() {
        LEADER=$(k -n kopc-system get lease kopc-ctf-operator -o jsonpath='{.spec.holderIdentity}') &&
            LEADER=${LEADER%%_*} &&
            [ "$(k -n kopc-system get pod "$LEADER" -o jsonpath='{.spec.containers[0].image}/{.metadata.deletionTimestamp}')" = "$OP_IMAGE:$tag/" ] &&
            grep -q 'became leader' <<<"$(k -n kopc-system logs "$LEADER")"
    }
    wait_for 120 "a pod at $tag to lead" leads_now
}

# reconciled_all: the leader has finished (not failed) as many Challenge
# reconciles as there are Challenges: it has looked at every one (its
# informer lists them all at start); only then does "untouched" mean anything.
reconciled_all() {
    local n
    n=$(k -n ctf get $CHALS -o name | wc -l)
    count() {
        k get --raw "/api/v1/namespaces/kopc-system/pods/http:$LEADER:9090/proxy/metrics" 2>/dev/null |
            awk '/^controller_runtime_reconcile_total\{controller="challenge"/ && !/result="error"/ { s += $2 }
                 END { print s + 0 }'
    }
    all() { [ "$(count)" -ge "$n" ]; }
    wait_for 180 "the leader $LEADER to reconcile the $n Challenges" all
}

# same_state BEFORE AFTER WHAT: the snapshot now equals BEFORE.
same_state() {
    $STATE snapshot "$2" 2>"$WORK/snapshot.err" || fail "$3: the state cannot be read: $(tail -3 "$WORK/snapshot.err")"
    $STATE diff "$1" "$2" >"$WORK/diff" || fail "$3 changed the instances: $(cat "$WORK/diff")"
}
both_versions() {
    $STATE versions "$@" >"$WORK/versions" 2>&1 || fail "reads at $* differ: $(cat "$WORK/versions")"
}
stored() { k get crd "$1" -o jsonpath='{.status.storedVersions}'; }
served() { k get crd "$1" -o jsonpath='{.spec.versions[?(@.served==true)].name}'; }

# migrate: config/migrate-storage (this build's image) run to completion.
migrate() {
    local ov=$WORK/overlay-migrate rel
    mkdir -p "$ov"
    rel=$(python3 -c 'import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$SRC/config/migrate-storage" "$ov")
    printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\nimages:\n- name: ghcr.io/kopc/ctf-operator\n  newName: %s\n  newTag: "%s"\n' \
        "$rel" "$OP_IMAGE" "$NEW_TAG" >"$ov/kustomization.yaml"
    k -n kopc-system delete job kopc-ctf-migrate-storage --ignore-not-found --wait=true >/dev/null
    k apply -k "$ov" >/dev/null || fail "kubectl apply -k config/migrate-storage"
    if ! "$KUBECTL" --kubeconfig "$DIR/kubeconfig" -n kopc-system wait --for=condition=Complete \
        job/kopc-ctf-migrate-storage --timeout=300s >/dev/null; then
        k -n kopc-system logs job/kopc-ctf-migrate-storage --tail=20 >&2 || true
        fail "the migration Job did not complete"
    fi
    k -n kopc-system logs job/kopc-ctf-migrate-storage >"$WORK/migrate.log"
}

log "install the previous release ($PREV_SHA): config/with-webhook, 2 replicas in the cluster"
render "$PREV/src" "$PREV_TAG" "$WORK/prev.json"
k apply -f "$WORK/prev.json" >"$WORK/apply.log" 2>&1 || { cat "$WORK/apply.log"; fail "kubectl apply of $PREV_SHA's config/with-webhook"; }
k wait --for=condition=Established crd/$DEFS crd/$CHALS --timeout=60s >/dev/null || fail "CRDs not Established"
[ "$(served $DEFS)" = v1alpha1 ] || fail "$PREV_SHA's CRDs serve $(served $DEFS)"
operator_on "$PREV_TAG"
ok "$PREV_SHA installed: CRDs at v1alpha1 alone, its validating webhook, 2 pods at $PREV_TAG Ready on the real node, $LEADER leads"

log "$N teams' instances on the real node"
k apply -f "$SRC/config/samples/ctf_flag_key_secret.yaml" >/dev/null
# The real-node benchmark's challenge (small requests: 50 fit the node's
# two CPUs), with a dynamic flag, and the field v1beta1 moves.
python3 - "$SRC/bench/challenge/realflag.yaml" "$VERSION" <<'PY' >"$WORK/def.json"
import json, sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
d["metadata"]["name"] = "upgrade"
d["spec"]["pods"][0]["template"]["containers"][0]["image"] = f"registry.devcluster.test/kopc/ctf-greeter:{sys.argv[2]}"
d["spec"]["flag"]["dynamic"]["secretRef"]["name"] = "ctf-flag-key"
d["spec"]["update"] = {"strategy": "Rolling", "maxUnavailable": 5}
print(json.dumps(d))
PY
k apply -f "$WORK/def.json" >/dev/null || fail "the definition was refused"
# What a refusal says: the old release's validating webhook is in the path.
if out=$(printf 'apiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: nope, namespace: ctf}\nspec: {definition: missing, team: x}\n' | k apply -f - 2>&1); then
    fail "a Challenge naming a missing definition was admitted by $PREV_SHA's webhook"
fi
grep -q "validate-challenge.ctf.kopc.io" <<<"$out" || fail "not the webhook's refusal: $out"
python3 - "$N" <<'PY' >"$WORK/chals.json"
import json, sys
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "ctf.kopc.io/v1alpha1", "kind": "Challenge",
     "metadata": {"name": f"upgrade-team-{i:02d}", "namespace": "ctf"},
     "spec": {"definition": "upgrade", "team": f"team-{i:02d}"}} for i in range(1, int(sys.argv[1]) + 1)]}))
PY
k apply -f "$WORK/chals.json" >/dev/null || fail "the $N Challenges were refused"
running() { [ "$(k -n ctf get $CHALS -o jsonpath='{range .items[*]}{.status.currentStatus}{"\n"}{end}' | grep -c '^Running$')" -ge "$N" ]; }
wait_for 600 "$N instances Running" running
on_node=$(k get pods -A -l ctf.kopc.io/team -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | uniq -c | tr -s ' ')
[ "$(echo "$on_node" | wc -l)" = 1 ] && [[ $on_node == " $N real-node-0" ]] || fail "instance pods by node: $on_node"
$STATE snapshot "$WORK/s0.json" 2>"$WORK/snapshot.err" || fail "the instances before the upgrade: $(tail -3 "$WORK/snapshot.err")"
nflags=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(len({f for i in s.values() for f in i["flags"]}))' "$WORK/s0.json")
[ "$nflags" = "$N" ] || fail "$nflags distinct flags among $N teams"
both_versions v1alpha1
ok "$N instances Running on real-node-0 under $PREV_SHA, each greeting on its NodePort with its own flag ($N distinct); a bad Challenge refused by its webhook"
T_INSTALL=$((SECONDS - T0))

log "upgrade, step 1: this build's image"
k -n kopc-system set image deploy/kopc-ctf-operator operator="$OP_IMAGE:$NEW_TAG" >/dev/null
operator_on "$NEW_TAG"
reconciled_all
same_state "$WORK/s0.json" "$WORK/s1.json" "the new image (CRDs still v1alpha1)"
ok "the new image leads ($LEADER), has reconciled every Challenge; no instance touched"

log "upgrade, step 2: this build's config/with-webhook (v1beta1 stored, the conversion webhook), rollout restart"
render "$SRC" "$NEW_TAG" "$WORK/new.json"
k apply -f "$WORK/new.json" >"$WORK/apply.log" 2>&1 || { cat "$WORK/apply.log"; fail "kubectl apply of this build's config/with-webhook"; }
k wait --for=condition=Established crd/$DEFS crd/$CHALS --timeout=60s >/dev/null || fail "CRDs not Established"
wait_for 60 "v1beta1 served" k get --raw /apis/ctf.kopc.io/v1beta1
[ "$(stored $DEFS)" = '["v1alpha1","v1beta1"]' ] || fail "storedVersions after the CRD upgrade: $(stored $DEFS)"
# A definition stored as v1alpha1 read at v1beta1: the apiserver calls the
# webhook in the cluster, through its Service, with the CA given.
rolling=$(k -n ctf get challengedefinitions.v1beta1.ctf.kopc.io upgrade -o jsonpath='{.spec.update.rolling.maxUnavailable}') ||
    fail "the conversion webhook in the cluster did not answer"
[ "$rolling" = 5 ] || fail "update.rolling.maxUnavailable at v1beta1: $rolling"
k -n kopc-system rollout restart deploy/kopc-ctf-operator >/dev/null
operator_on "$NEW_TAG"
# The whole log first: under pipefail, grep -q leaving at the first line (this one is) could
# make kubectl die of SIGPIPE and the check fail (seen once).
grep -q 'ChallengeDefinitions read at.*v1beta1' <<<"$(k -n kopc-system logs "$LEADER")" ||
    fail "the restarted leader does not read v1beta1"
reconciled_all
same_state "$WORK/s0.json" "$WORK/s2.json" "the CRD upgrade and restart"
both_versions v1alpha1 v1beta1
ok "CRDs at v1beta1 (conversion through the webhook in the cluster), operator restarted reading v1beta1: no instance touched, every object the same at v1alpha1 and v1beta1"

log "upgrade, step 3: the storage migration Job"
migrate
grep -q "storage migrated" "$WORK/migrate.log" || fail "the Job did not migrate: $(cat "$WORK/migrate.log")"
[ "$(stored $DEFS)/$(stored $CHALS)" = '["v1beta1"]/["v1beta1"]' ] ||
    fail "storedVersions after the migration: $(stored $DEFS) $(stored $CHALS)"
same_state "$WORK/s0.json" "$WORK/s3.json" "the migration"
both_versions v1alpha1 v1beta1
ok "migrated: storedVersions [v1beta1] for both CRDs; no instance touched, both versions read the same"

log "a Challenge created at v1beta1 after the upgrade"
printf 'apiVersion: ctf.kopc.io/v1beta1\nkind: Challenge\nmetadata: {name: upgrade-team-new, namespace: ctf}\nspec: {definition: upgrade, team: team-new}\n' |
    k apply -f - >/dev/null || fail "a v1beta1 Challenge was refused"
new_running() { [ "$(k -n ctf get $CHALS upgrade-team-new -o jsonpath='{.status.currentStatus}')" = Running ]; }
wait_for 180 "upgrade-team-new Running" new_running
$STATE snapshot "$WORK/s4.json" 2>"$WORK/snapshot.err" || fail "after the v1beta1 create: $(tail -3 "$WORK/snapshot.err")"
$STATE diff "$WORK/s0.json" "$WORK/s4.json" >"$WORK/diff" || true
[ "$(cat "$WORK/diff")" = "upgrade-team-new: new" ] || fail "after the v1beta1 create: $(cat "$WORK/diff")"
no_forbidden kopc-system
ok "upgraded: a v1beta1 Challenge goes Running and greets; the $N others untouched; no Forbidden"
T_UPGRADE=$((SECONDS - T0))

log "rollback: the previous CRDs alone are refused while objects are stored as v1beta1"
python3 -c 'import json,sys; l=json.load(open(sys.argv[1])); l["items"]=[d for d in l["items"] if d["kind"]=="CustomResourceDefinition"]; print(json.dumps(l))' \
    "$WORK/prev.json" >"$WORK/prev-crds.json"
if out=$(k apply --dry-run=server -f "$WORK/prev-crds.json" 2>&1); then
    fail "the previous release's CRDs (v1alpha1 alone) were accepted with v1beta1 in storedVersions"
fi
grep -q "storedVersions" <<<"$out" || fail "the previous CRDs refused, but not for their stored versions: $out"
ok "the previous CRDs straight away are refused by the apiserver ($(grep -o 'status.storedVersions[^:]*: [^:]*: [^,]*' <<<"$out" | head -1))"

log "rollback, step 1: storage back to v1alpha1, migrated again (this build's webhook still up)"
for crd in $DEFS $CHALS; do
    k patch crd "$crd" --type json -p '[
        {"op": "test", "path": "/spec/versions/0/name", "value": "v1alpha1"},
        {"op": "test", "path": "/spec/versions/1/name", "value": "v1beta1"},
        {"op": "replace", "path": "/spec/versions/0/storage", "value": true},
        {"op": "replace", "path": "/spec/versions/1/storage", "value": false}]' >/dev/null ||
        fail "the storage version of $crd could not be set back to v1alpha1"
done
migrate
[ "$(stored $DEFS)/$(stored $CHALS)" = '["v1alpha1"]/["v1alpha1"]' ] ||
    fail "storedVersions after the migration back: $(stored $DEFS) $(stored $CHALS)"
same_state "$WORK/s4.json" "$WORK/s5.json" "the migration back to v1alpha1"
both_versions v1alpha1 v1beta1
ok "stored as v1alpha1 again (storedVersions [v1alpha1]); no instance touched, both versions read the same"

log "rollback, step 2: the previous image, then the previous release's config/with-webhook"
k -n kopc-system set image deploy/kopc-ctf-operator operator="$OP_IMAGE:$PREV_TAG" >/dev/null
operator_on "$PREV_TAG"
k apply -f "$WORK/prev.json" >"$WORK/apply.log" 2>&1 || { cat "$WORK/apply.log"; fail "kubectl apply of $PREV_SHA's config/with-webhook (the rollback)"; }
only_alpha() { [ "$(served $DEFS)/$(served $CHALS)" = v1alpha1/v1alpha1 ]; }
wait_for 60 "the CRDs to serve v1alpha1 alone" only_alpha
[ "$(k get crd $DEFS -o jsonpath='{.spec.conversion.strategy}')" = None ] || fail "the previous CRD still converts"
gone_beta() { ! k get --raw /apis/ctf.kopc.io/v1beta1 >/dev/null 2>&1; }
wait_for 60 "v1beta1 no longer served" gone_beta
operator_on "$PREV_TAG"
reconciled_all
same_state "$WORK/s4.json" "$WORK/s6.json" "the rollback"
both_versions v1alpha1
# The definition as it was applied before the upgrade, v1alpha1's field in place.
[ "$(k -n ctf get challengedefinitions.v1alpha1.ctf.kopc.io upgrade -o jsonpath='{.spec.update}')" = '{"maxUnavailable":5,"strategy":"Rolling"}' ] ||
    fail "the definition's update after the rollback: $(k -n ctf get chaldef upgrade -o jsonpath='{.spec.update}')"
no_forbidden kopc-system
ok "rolled back to $PREV_SHA ($LEADER leads, CRDs v1alpha1 alone): all $((N + 1)) instances untouched (pods, restarts, endpoints, flags), the definition as applied"
T_ALL=$((SECONDS - T0))
echo "time: install + $N instances ${T_INSTALL}s, upgrade ${T_UPGRADE}s, with the rollback ${T_ALL}s"
echo "PASS: $passed checks"
