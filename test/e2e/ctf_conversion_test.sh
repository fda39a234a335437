#!/usr/bin/env bash
# ctf_conversion_test.sh - v1beta1 of the CTF's CRDs beside v1alpha1
# (docs/crd-versions.md) on a real kube-apiserver (the devcluster's, fake
# nodes), with the CRDs of config/crd-v1beta1 as kustomize renders them
# (only clientConfig points at the operator on this host, with a CA made
# here, as e2e_ctf_webhook does). The operator runs as its service account
# with its webhook on. Checked:
#   - before the upgrade (config/crd: v1alpha1 alone) the operator reads
#     definitions at v1alpha1; objects written then are stored as v1alpha1;
#   - after the CRD upgrade, every one of them reads at v1beta1 with every
#     field it had (spec.update.maxUnavailable now under rolling);
#   - a v1alpha1 definition applied after the upgrade reads as v1beta1 and
#     back as v1alpha1 with every field kept; a v1beta1 one whose rolling
#     v1alpha1 cannot hold reads as v1alpha1 with the annotation, and
#     written back at v1alpha1 reads at v1beta1 as it was;
#   - the operator restarted (with --install-crds, which leaves CRDs that
#     have v1beta1 alone) reads v1beta1 (and a v1beta1 patch of
#     rolling.maxUnavailable); running instances keep their Deployments (uid,
#     pod template: not rolled) and definition version; v1beta1's CEL rule
#     refuses rolling without Rolling;
#   - with the webhook down, a definition still stored as v1alpha1 (one
#     outside the operator's --namespace, which nobody wrote since) cannot
#     be read at v1beta1; the
#     migration (--migrate-storage, as config/migrate-storage's service
#     account) rewrites them without changing a generation and leaves
#     status.storedVersions = [v1beta1]; then, webhook down, every
#     definition lists at v1beta1 (nothing left to convert) while a
#     v1alpha1 read fails (the conversion is the webhook's); run again, it
#     changes nothing.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
e2e_init ctf-conversion stop_processes
op_pid=

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/op.log" ] && { echo "--- operator log (tail)" >&2; tail -30 "$WORK/op.log" >&2; }
    fail_summary "$*"
    exit 1
}
stop_processes() { [ -n "$op_pid" ] && kill -9 "$op_pid" 2>/dev/null || true; }

DEFS=challengedefinitions.ctf.kopc.io
CHALS=challenges.ctf.kopc.io
field() { kc get chal "$1" -o jsonpath="{$2}" 2>/dev/null; }
status_is() { [ "$(field "$1" .status.currentStatus)" = "$2" ]; }
challenge() {
    printf 'apiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: %s, namespace: ctf}\nspec: {definition: %s, team: %s}\n' "$@"
}
stored_versions() { k get crd "$1" -o jsonpath='{.status.storedVersions}'; }
# jcheck PYTHON-EXPR-FILE ARGS...: run a Python check; its output is the failure.
jcheck() {
    local out
    out=$(python3 - "$@") || fail "$out"
}

# start_operator [FLAGS...]
start_operator() {
    : >"$WORK/op.log"
    "$OPERATOR" --kubeconfig "$WORK/operator.kubeconfig" --metrics-bind "127.0.0.1:$MP" --api-bind 0 \
        --webhook-bind "127.0.0.1:$WP" --webhook-cert-dir "$WORK/certs" --namespace ctf -v 1 "$@" \
        >>"$WORK/op.log" 2>&1 &
    op_pid=$!
    wait_for 60 "operator ready (caches and webhook)" curl -sf "http://127.0.0.1:$MP/readyz"
}
stop_operator() {
    kill -TERM "$op_pid"
    wait "$op_pid" || true
    op_pid=
}
reads_at() { grep -q "ChallengeDefinitions read at.*$1" "$WORK/op.log"; }

log "cluster, RBAC, CRDs at v1alpha1 alone (config/crd), samples; a CA and the webhook's certificate"
"$DEVCLUSTER" start --dir "$DIR" --nodes 2 >/dev/null || fail "devcluster start"
ctf_rbac_and_samples
sa_kubeconfig "$WORK/operator.kubeconfig"
mkdir -p "$WORK/certs"
(
    cd "$WORK"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
        -out ca.crt -days 1 -subj /CN=kopc-ctf-conversion-test-ca
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout certs/tls.key \
        -out server.csr -subj /CN=127.0.0.1
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >ext.cnf
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
        -extfile ext.cnf -out certs/tls.crt
) >/dev/null 2>&1 || fail "openssl could not make the certificates"
MP=$(free_port)
WP=$(free_port)

# A definition using the field that moves, with labels and annotations of its own.
kc get chaldef nc -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
d["metadata"] = {"name": "roll", "namespace": "ctf", "labels": {"event": "finals"},
                 "annotations": {"owner": "infra", "note": "kept"}}
d.pop("status", None)
d["spec"]["update"] = {"strategy": "Rolling", "maxUnavailable": 3}
d["spec"]["points"] = 450
print(json.dumps(d))' | k apply -f - >/dev/null || fail "the v1alpha1 definition roll was refused"
# One outside the operator's --namespace: nobody but the migration ever
# writes it, so it stays stored as v1alpha1 until then (every status write
# of the operator stores a definition anew, at the storage version).
k create namespace archive >/dev/null
kc get chaldef web -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
d["metadata"] = {"name": "old-web", "namespace": "archive"}
d.pop("status", None)
d["spec"]["update"] = {"strategy": "Rolling", "maxUnavailable": "50%"}
print(json.dumps(d))' | k apply -f - >/dev/null || fail "the v1alpha1 definition archive/old-web was refused"
start_operator
reads_at v1alpha1 || fail "the operator does not say it reads definitions at v1alpha1"
challenge nc-team-a nc team-a | k apply -f - >/dev/null
challenge roll-team-b roll team-b | k apply -f - >/dev/null
wait_for 90 "nc-team-a Running" status_is nc-team-a Running
wait_for 90 "roll-team-b Running" status_is roll-team-b Running
[ "$(stored_versions $DEFS)" = '["v1alpha1"]' ] || fail "storedVersions before: $(stored_versions $DEFS)"
# The definitions' status.update counts their instances at most once a second
# (update.c): the snapshot waits until each counts its Running one current.
counts_current() { [ "$(k -n ctf get chaldef "$1" -o jsonpath='{.status.update.current}')" = 1 ]; }
wait_for 30 "nc counts nc-team-a current" counts_current nc
wait_for 30 "roll counts roll-team-b current" counts_current roll
k get $DEFS -A -o json >"$WORK/defs-before.json"
k get $CHALS -A -o json >"$WORK/chals-before.json"
# What the instances are made of now, to see that nothing is rolled later.
k get deploy -A -l ctf.kopc.io/challenge -o json >"$WORK/deploys-before.json"
ok "v1alpha1 alone: the operator reads it, two instances Running, objects stored as v1alpha1"

log "the CRDs upgraded (config/crd-v1beta1), conversion served by this operator"
k kustomize "$SRC/config/crd-v1beta1" | python3 -c '
import base64, json, sys, yaml
o = {"apiVersion": "v1", "kind": "List", "items": [d for d in yaml.safe_load_all(sys.stdin) if d]}
ca = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
for crd in o["items"]:
    crd["metadata"].pop("annotations", None)  # no cert-manager here: the CA is given
    conv = crd["spec"].get("conversion", {})
    if conv.get("strategy") == "Webhook":
        path = conv["webhook"]["clientConfig"]["service"]["path"]
        conv["webhook"]["clientConfig"] = {"url": "https://127.0.0.1:%s%s" % (sys.argv[2], path),
                                           "caBundle": ca}
print(json.dumps(o))' "$WORK/ca.crt" "$WP" >"$WORK/crds-v1beta1.json"
k apply --server-side --force-conflicts -f "$WORK/crds-v1beta1.json" >/dev/null || fail "config/crd-v1beta1 refused"
k wait --for=condition=Established crd/$DEFS crd/$CHALS --timeout=60s >/dev/null || fail "not Established"
wait_for 60 "v1beta1 served" k get --raw /apis/ctf.kopc.io/v1beta1
wait_for 60 "definitions listed at v1beta1" k get challengedefinitions.v1beta1.ctf.kopc.io -A
[ "$(stored_versions $DEFS)" = '["v1alpha1","v1beta1"]' ] || fail "storedVersions after the upgrade: $(stored_versions $DEFS)"
ok "config/crd-v1beta1 applies: both versions served, v1beta1 stored from now on"

log "objects stored as v1alpha1 before the upgrade read as v1beta1"
k get challengedefinitions.v1beta1.ctf.kopc.io -A -o json >"$WORK/defs-beta.json"
k get challenges.v1beta1.ctf.kopc.io -A -o json >"$WORK/chals-beta.json"
jcheck "$WORK/defs-before.json" "$WORK/defs-beta.json" "$WORK/chals-before.json" "$WORK/chals-beta.json" <<'EOF'
import json, sys
def items(p): return {i["metadata"]["name"]: i for i in json.load(open(p))["items"]}
bad = []
for before_p, after_p in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    before, after = items(before_p), items(after_p)
    if sorted(before) != sorted(after):
        bad.append(f"names {sorted(before)} != {sorted(after)}")
    for name, a in before.items():
        b = after.get(name, {})
        if b.get("apiVersion") != "ctf.kopc.io/v1beta1":
            bad.append(f"{name}: apiVersion {b.get('apiVersion')}")
        want = json.loads(json.dumps(a["spec"]))
        u = want.get("update")
        if isinstance(u, dict) and "maxUnavailable" in u:
            u["rolling"] = {"maxUnavailable": u.pop("maxUnavailable")}
        if b.get("spec") != want:
            bad.append(f"{name}: spec {b.get('spec')} != {want}")
        for k in ("labels", "annotations", "uid", "generation", "finalizers"):
            if a["metadata"].get(k) != b.get("metadata", {}).get(k):
                bad.append(f"{name}: metadata.{k} {b.get('metadata', {}).get(k)} != {a['metadata'].get(k)}")
        if a.get("status") != b.get("status"):
            bad.append(f"{name}: status differs")
roll = items(sys.argv[2])["roll"]["spec"]["update"]
if roll != {"strategy": "Rolling", "rolling": {"maxUnavailable": 3}}:
    bad.append(f"roll's update at v1beta1: {roll}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
ok "every definition and Challenge stored as v1alpha1 reads as v1beta1 with every field (roll: update.rolling.maxUnavailable 3)"

log "v1alpha1 -> v1beta1 -> v1alpha1 keeps every field"
kc get chaldef web -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
d["apiVersion"] = "ctf.kopc.io/v1alpha1"
d["metadata"] = {"name": "trip", "namespace": "ctf", "labels": {"round": "2"}, "annotations": {"a": "b"}}
d.pop("status", None)
d["spec"]["update"] = {"strategy": "Rolling", "maxUnavailable": "10%"}
d["spec"]["pool"] = {"min": 0, "max": 4, "autoscale": True}
d["spec"]["stopOnSolve"] = True
print(json.dumps(d))' >"$WORK/trip-alpha.json"
k apply -f "$WORK/trip-alpha.json" >/dev/null || fail "a v1alpha1 definition applied after the upgrade was refused"
k -n ctf get challengedefinitions.v1beta1.ctf.kopc.io trip -o json >"$WORK/trip-beta.json"
k -n ctf get challengedefinitions.v1alpha1.ctf.kopc.io trip -o json >"$WORK/trip-back.json"
jcheck "$WORK/trip-alpha.json" "$WORK/trip-beta.json" "$WORK/trip-back.json" <<'EOF'
import json, sys
applied, beta, back = (json.load(open(p)) for p in sys.argv[1:4])
bad = []
def subset(want, got, path):
    if isinstance(want, dict):
        if not isinstance(got, dict):
            bad.append(f"{path}: {got!r} is not an object"); return
        for k, v in want.items():
            if k not in got: bad.append(f"{path}.{k} missing")
            else: subset(v, got[k], f"{path}.{k}")
    elif want != got:
        bad.append(f"{path}: {got!r} != {want!r}")
if beta["apiVersion"] != "ctf.kopc.io/v1beta1" or back["apiVersion"] != "ctf.kopc.io/v1alpha1":
    bad.append(f"apiVersions {beta['apiVersion']} {back['apiVersion']}")
if beta["spec"]["update"] != {"strategy": "Rolling", "rolling": {"maxUnavailable": "10%"}}:
    bad.append(f"v1beta1 update {beta['spec']['update']}")
subset(applied["spec"], back["spec"], "spec")           # every field applied is read back
subset(applied["metadata"], back["metadata"], "metadata")
if back["spec"]["update"] != applied["spec"]["update"]:
    bad.append(f"v1alpha1 update read back {back['spec']['update']}")
if "ctf.kopc.io/v1beta1-update-rolling" in back["metadata"].get("annotations", {}):
    bad.append("an annotation where nothing needed keeping")
b_rest = {k: v for k, v in beta["spec"].items() if k != "update"}
a_rest = {k: v for k, v in back["spec"].items() if k != "update"}
if a_rest != b_rest:
    bad.append("the two versions differ outside spec.update")
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
ok "a v1alpha1 definition reads as v1beta1 (rolling.maxUnavailable 10%) and back with every field it was applied with"

log "v1beta1 -> v1alpha1 -> v1beta1: what v1alpha1 cannot hold rides in the annotation"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
d["apiVersion"] = "ctf.kopc.io/v1beta1"
d["metadata"] = {"name": "empty-rolling", "namespace": "ctf"}
d["spec"]["update"] = {"strategy": "Rolling", "rolling": {}}
print(json.dumps(d))' "$WORK/trip-alpha.json" | k apply -f - >/dev/null || fail "a v1beta1 definition was refused"
k -n ctf get challengedefinitions.v1beta1.ctf.kopc.io empty-rolling -o json >"$WORK/er-beta.json"
k -n ctf get challengedefinitions.v1alpha1.ctf.kopc.io empty-rolling -o json >"$WORK/er-alpha.json"
# A v1alpha1 client writes back what it read.
k replace -f "$WORK/er-alpha.json" >/dev/null || fail "writing back the v1alpha1 read was refused"
k -n ctf get challengedefinitions.v1beta1.ctf.kopc.io empty-rolling -o json >"$WORK/er-beta2.json"
jcheck "$WORK/er-beta.json" "$WORK/er-alpha.json" "$WORK/er-beta2.json" <<'EOF'
import json, sys
beta, alpha, beta2 = (json.load(open(p)) for p in sys.argv[1:4])
bad = []
ann = alpha["metadata"].get("annotations", {})
if ann.get("ctf.kopc.io/v1beta1-update-rolling") != "{}":
    bad.append(f"v1alpha1 annotations {ann}")
if alpha["spec"]["update"] != {"strategy": "Rolling"}:
    bad.append(f"v1alpha1 update {alpha['spec']['update']}")
if beta2["spec"] != beta["spec"]:
    bad.append(f"v1beta1 spec after the v1alpha1 write {beta2['spec']['update']} != {beta['spec']['update']}")
if "ctf.kopc.io/v1beta1-update-rolling" in beta2["metadata"].get("annotations", {}):
    bad.append("the annotation stayed at v1beta1")
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
ok "rolling: {} reads at v1alpha1 with the annotation, and a v1alpha1 write-back keeps it at v1beta1"

log "the operator restarted reads v1beta1; running instances untouched"
stop_operator
# With --install-crds too: its built-in CRDs (v1alpha1 alone) must not undo the upgrade.
k apply -f "$SRC/config/rbac/crd_installer_role.yaml" >/dev/null
rbac_in_force patch customresourcedefinitions
start_operator --install-crds
reads_at v1beta1 || fail "the operator does not say it reads definitions at v1beta1"
grep -q "CRD has v1beta1.*left as it is" "$WORK/op.log" || fail "--install-crds did not leave the v1beta1 CRDs alone"
[ "$(k get crd $DEFS -o jsonpath='{.spec.versions[*].name}')" = "v1alpha1 v1beta1" ] ||
    fail "--install-crds changed the versions: $(k get crd $DEFS -o jsonpath='{.spec.versions[*].name}')"
challenge trip-team-c trip team-c | k apply -f - >/dev/null
wait_for 90 "trip-team-c Running" status_is trip-team-c Running
status_is nc-team-a Running && status_is roll-team-b Running || fail "an instance is no longer Running"
# Let the operator look at everything once more, then compare the Deployments.
kc patch chaldef roll --type merge -p '{"spec":{"update":{"rolling":{"maxUnavailable":2}}}}' >/dev/null ||
    fail "a v1beta1 patch of rolling.maxUnavailable was refused"
if out=$(kc patch chaldef roll --type merge -p '{"spec":{"update":{"strategy":"Recreate"}}}' 2>&1); then
    fail "rolling without Rolling was admitted"
fi
grep -qF "update.rolling is for the Rolling strategy only" <<<"$out" || fail "not v1beta1's CEL message: $out"
# The operator reports the patched generation: it read the v1beta1 spec.
roll_seen() {
    [ "$(kc get chaldef roll -o jsonpath='{.status.update.generation}/{.status.update.strategy}')" = \
        "$(kc get chaldef roll -o jsonpath='{.metadata.generation}')/Rolling" ]
}
wait_for 60 "roll's status.update at its new generation" roll_seen
k get deploy -A -l ctf.kopc.io/challenge -o json >"$WORK/deploys-after.json"
jcheck "$WORK/deploys-before.json" "$WORK/deploys-after.json" <<'EOF'
import json, sys
def index(p):
    return {(d["metadata"]["namespace"], d["metadata"]["name"]):
            (d["metadata"]["uid"], json.dumps(d["spec"]["template"], sort_keys=True),
             d["metadata"].get("annotations", {}).get("ctf.kopc.io/definition-version"))
            for d in json.load(open(p))["items"]}
before, after = index(sys.argv[1]), index(sys.argv[2])
bad = [f"{k}: {v} -> {after.get(k)}" for k, v in before.items() if after.get(k) != v]
print("\n".join(bad) or "")
sys.exit(1 if bad or not before else 0)
EOF
ok "read at v1beta1, the same Deployments (uid, pod template, definition version): nothing rolled; v1beta1's CEL rule in force"

log "storage migration"
stop_operator
if out=$(k -n archive get challengedefinitions.v1beta1.ctf.kopc.io old-web 2>&1); then
    fail "archive/old-web read at v1beta1 with the webhook down before the migration: $out"
fi
grep -qi "conversion webhook" <<<"$out" || fail "not a conversion failure: $out"
ok "webhook down: archive/old-web, still stored as v1alpha1, cannot be read at v1beta1 ($(tail -1 <<<"$out" | cut -c1-70)...)"
start_operator
k apply -f "$SRC/config/migrate-storage/rbac.yaml" >/dev/null
wait_for 60 "RBAC: the migration may update definitions" \
    k auth can-i update challengedefinitions.ctf.kopc.io --as=system:serviceaccount:kopc-system:kopc-ctf-migrate-storage -A
wait_for 60 "RBAC: the migration may patch CRD status" \
    k auth can-i patch "customresourcedefinitions.apiextensions.k8s.io/$CHALS" --subresource=status \
    --as=system:serviceaccount:kopc-system:kopc-ctf-migrate-storage
MIG_TOKEN=$(k -n kopc-system create token kopc-ctf-migrate-storage --duration=1h)
SA_TOKEN=$MIG_TOKEN sa_kubeconfig "$WORK/migrate.kubeconfig"
k get $DEFS -A -o json >"$WORK/defs-premig.json"
k get $CHALS -A -o json >"$WORK/chals-premig.json"
"$OPERATOR" --kubeconfig "$WORK/migrate.kubeconfig" --metrics-bind 0 --migrate-storage >"$WORK/migrate.log" 2>&1 ||
    { cat "$WORK/migrate.log" >&2; fail "--migrate-storage failed"; }
[ "$(stored_versions $DEFS)" = '["v1beta1"]' ] || fail "definitions' storedVersions: $(stored_versions $DEFS)"
[ "$(stored_versions $CHALS)" = '["v1beta1"]' ] || fail "Challenges' storedVersions: $(stored_versions $CHALS)"
k get $DEFS -A -o json >"$WORK/defs-postmig.json"
k get $CHALS -A -o json >"$WORK/chals-postmig.json"
jcheck "$WORK/defs-premig.json" "$WORK/defs-postmig.json" "$WORK/chals-premig.json" "$WORK/chals-postmig.json" <<'EOF'
import json, sys
def items(p): return {i["metadata"]["name"]: i for i in json.load(open(p))["items"]}
bad = []
for pre_p, post_p in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    pre, post = items(pre_p), items(post_p)
    for name, a in pre.items():
        b = post.get(name)
        if not b:
            bad.append(f"{name} gone"); continue
        if a["metadata"]["generation"] != b["metadata"]["generation"]:
            bad.append(f"{name}: generation {a['metadata']['generation']} -> {b['metadata']['generation']}")
        if a["spec"] != b["spec"] or a.get("status") != b.get("status"):
            bad.append(f"{name}: spec or status changed")
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
grep -q 'storage migrated' "$WORK/migrate.log" || fail "no migration log: $(cat "$WORK/migrate.log")"
ok "--migrate-storage as config/migrate-storage's account: storedVersions [v1beta1] for both CRDs, no generation or field changed"

stop_operator
k get challengedefinitions.v1beta1.ctf.kopc.io -A -o name >"$WORK/names" 2>&1 ||
    fail "webhook down, after the migration, definitions cannot be listed at v1beta1: $(cat "$WORK/names")"
[ "$(wc -l <"$WORK/names")" -ge 7 ] || fail "listed: $(cat "$WORK/names")"
[ "$(k -n archive get challengedefinitions.v1beta1.ctf.kopc.io old-web -o jsonpath='{.spec.update.rolling.maxUnavailable}')" = 50% ] ||
    fail "archive/old-web at v1beta1 after the migration"
if out=$(k -n ctf get challengedefinitions.v1alpha1.ctf.kopc.io roll 2>&1); then
    fail "a v1alpha1 read succeeded with the conversion webhook down: $out"
fi
ok "webhook down: every definition lists at v1beta1 (all stored so), a v1alpha1 read needs the webhook"
"$OPERATOR" --kubeconfig "$WORK/migrate.kubeconfig" --metrics-bind 0 --migrate-storage >"$WORK/migrate2.log" 2>&1 ||
    { cat "$WORK/migrate2.log" >&2; fail "--migrate-storage run again failed"; }
grep -q "already migrated" "$WORK/migrate2.log" || fail "the second run did not skip: $(cat "$WORK/migrate2.log")"
ok "--migrate-storage run again changes nothing"

echo "PASS: $passed checks"
