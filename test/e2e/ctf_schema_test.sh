#!/usr/bin/env bash
# ctf_schema_test.sh - the CTF operator's manifests are valid and the
# apiserver enforces the contract of docs/ctf-resources.md on its own, with no
# operator running: config/crd installs (its CEL rules pass the cost
# estimator), config/rbac and config/samples apply, kubectl explain shows the
# descriptions, invalid objects are refused with a message naming the field,
# defaults are filled in, spec.definition and spec.team are immutable, the
# status subresource validates, the service account holds exactly the rights
# it needs, and the printer columns and the `ctf` category work.
#
# Env: DEVCLUSTER, KUBECTL (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?path to devcluster}
KUBECTL=${KUBECTL:?path to kubectl}
SRC=${SRC:?repo root}
mkdir -p "${KOP_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/ctf-schema.XXXXXX")
DIR=$WORK/cluster
SA=system:serviceaccount:kopc-system:kopc-ctf-operator

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}
# A discovery cache of our own, so `kubectl get ctf` sees the new category.
k() { "$KUBECTL" --kubeconfig "$DIR/kubeconfig" --cache-dir "$WORK/kube-cache" --request-timeout=30s "$@"; }
cleanup() {
    "$DEVCLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# refused WHAT WANT... < YAML: `kubectl apply --validate=strict` of the
# document must fail, and its message must contain every WANT.
refused() {
    local what=$1 out w
    shift
    if out=$(k apply --validate=strict -f - 2>&1); then
        fail "$what was accepted: $out"
    fi
    for w in "$@"; do
        grep -qF -- "$w" <<<"$out" || fail "refusal of $what does not say '$w': $out"
    done
    ok "refused: $what"
}
# patch_refused WHAT WANT KUBECTL_PATCH_ARGS...: the patch must fail naming WANT.
patch_refused() {
    local what=$1 want=$2 out
    shift 2
    if out=$(k patch "$@" 2>&1); then
        fail "$what was accepted: $out"
    fi
    grep -qF -- "$want" <<<"$out" || fail "refusal of $what does not say '$want': $out"
    ok "refused: $what"
}
jp() { k get "$@" 2>/dev/null; }

log "cluster and CRDs"
"$DEVCLUSTER" start --dir "$DIR" --nodes 1 >/dev/null || fail "devcluster start"
out=$(k apply -k "$SRC/config/crd" 2>&1) || fail "config/crd refused: $out"
grep -qi warning <<<"$out" && fail "config/crd applied with warnings: $out"
for crd in challengedefinitions.ctf.kopc.io challenges.ctf.kopc.io; do
    k wait --for=condition=Established "crd/$crd" --timeout=60s >/dev/null || fail "$crd not Established"
done
wait_for 60 "chaldef and chal served" k get chaldef,chal -A
ok "config/crd installs both CRDs (CEL cost estimates pass) and they are Established"

log "RBAC"
k apply -f "$SRC/config/rbac/namespace.yaml" >/dev/null || fail "namespaces refused"
out=$(k apply -k "$SRC/config/rbac" 2>&1) || fail "config/rbac refused: $out"
out=$(k apply -f "$SRC/config/rbac/crd_installer_role.yaml" 2>&1) || fail "crd_installer_role.yaml refused: $out"
can() { # can NAMESPACE VERB RESOURCE [SUBRESOURCE]: print yes or no for the operator's account
    local sub=()
    [ $# -lt 4 ] || sub=(--subresource="$4")
    k auth can-i "$2" "$3" -n "$1" "${sub[@]}" --as="$SA" 2>/dev/null || true
}
for want in "yes ctf create challenges" "yes ctf patch challenges status" \
    "no ctf update challenges" "yes ctf-x create deployments.apps" \
    "no ctf-x delete networkpolicies.networking.k8s.io" "yes ctf-x create ingresses.networking.k8s.io" \
    "yes kopc-system watch secrets" "no ctf-x watch secrets" "no ctf-x delete secrets" \
    "yes ctf-x watch pods" "yes kopc-system get secrets" "yes kopc-system update leases.coordination.k8s.io" \
    "yes default create customresourcedefinitions.apiextensions.k8s.io" \
    "no ctf create challengedefinitions" "no ctf delete challengedefinitions" "no ctf-x delete pods" \
    "no ctf-x create pods" "no ctf-x update namespaces" "no default update leases.coordination.k8s.io" \
    "no default get configmaps" "no default list nodes" "no default delete customresourcedefinitions.apiextensions.k8s.io"; do
    read -r expect ns verb res sub <<<"$want"
    got=$(can "$ns" "$verb" "$res" ${sub:+"$sub"})
    [ "$got" = "$expect" ] || fail "can-i $verb $res${sub:+/$sub} in $ns: want $expect, got '$got'"
done
ok "config/rbac applies; the operator's account has exactly the rights it needs"

log "samples"
out=$(k apply --validate=strict -k "$SRC/config/samples" 2>&1) || fail "config/samples refused: $out"
for o in chaldef/web chaldef/nc chaldef/twopod chal/web-team-a secret/ctf-flag-key; do
    k get -n ctf "$o" >/dev/null || fail "sample $o missing"
done
[ "$(jp -n ctf chaldef nc -o jsonpath='{.spec.flag.dynamic.secretRef.name}')" = ctf-flag-key ] || fail "nc's secretRef"
[ "$(jp -n ctf chaldef twopod -o jsonpath='{.spec.pods[*].name}')" = "app db" ] || fail "twopod's pods"
ok "config/samples apply in namespace ctf"

log "kubectl explain"
wait_for 60 "explain to know ChallengeDefinition" k explain challengedefinition.spec.lifetime
out=$(k explain challengedefinition.spec.lifetime 2>&1)
for w in "How long an instance lives" "default" "An instance expires this long after its creation" \
    "renewBy" "One renewal adds this"; do
    grep -qF -- "$w" <<<"$out" || fail "explain challengedefinition.spec.lifetime lacks '$w': $out"
done
out=$(k explain challenge.status.currentStatus 2>&1)
grep -qF "The instance's state" <<<"$out" || fail "explain challenge.status.currentStatus: $out"
ok "kubectl explain prints the field descriptions"

log "the apiserver refuses invalid objects"
refused "a Challenge without spec.team" "spec.team" "Required value" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: Challenge
metadata: {name: no-team, namespace: ctf}
spec: {definition: web}
YAML
refused "a Challenge with team Team_A" "spec.team" "Team_A" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: Challenge
metadata: {name: bad-team, namespace: ctf}
spec: {definition: web, team: Team_A}
YAML
refused "a Challenge with expiresAt 'tomorrow'" "spec.expiresAt" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: Challenge
metadata: {name: bad-expiry, namespace: ctf}
spec: {definition: web, team: team-b, expiresAt: tomorrow}
YAML
refused "lifetime default 3h above max 2h" "spec.lifetime.default" "must not be longer than lifetime.max" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-lifetime, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  lifetime: {default: 3h, max: 2h}
YAML
refused "lifetime renewBy 0s" "spec.lifetime.renewBy" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-renew, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  lifetime: {renewBy: 0s}
YAML
refused "lifetime default 'half an hour'" "spec.lifetime.default" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-duration, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  lifetime: {default: half an hour}
YAML
refused "expose[].pod naming no pod" "spec.expose" "every expose[].pod must name one of pods[].name" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-expose, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  expose: [{name: http, pod: ghost, port: 80}]
YAML
refused "both flag.static and flag.dynamic" "spec.flag" "at most one of flag.static and flag.dynamic" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-flag, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  flag: {static: 'flag{x}', dynamic: {secretRef: {name: ctf-flag-key}}}
YAML
refused "two pods with the same name" "spec.pods" "Duplicate value" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-dup, namespace: ctf}
spec:
  title: t
  pods:
  - {name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}
  - {name: app, template: {containers: [{name: app, image: registry.example/y:1}]}}
YAML
refused "replicas 6 and port 70000" "spec.pods[0].replicas" "spec.expose[0].port" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-bounds, namespace: ctf}
spec:
  title: t
  pods: [{name: app, replicas: 6, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  expose: [{name: http, pod: app, port: 70000}]
YAML
refused "a pod template without containers" "spec.pods[0].template.containers" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-template, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {volumes: []}}]
YAML
refused "egress 'Everything'" "spec.network.egress" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-egress, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  network: {egress: Everything}
YAML
refused "pool min 5 above max 2" "spec.pool.min" "pool.min must not be more than pool.max" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-pool, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  pool: {min: 5, max: 2}
YAML
refused "pool min -1 and max 5001" "spec.pool.min" "spec.pool.max" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-pool-range, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  pool: {min: -1, max: 5001}
YAML
refused "update strategy 'BlueGreen'" "spec.update.strategy" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-update, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  update: {strategy: BlueGreen}
YAML
refused "update maxUnavailable without Rolling" "spec.update.maxUnavailable" \
    "update.maxUnavailable is for the Rolling strategy only" <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-update-next, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  update: {strategy: OnNextStart, maxUnavailable: 2}
YAML
for bad in 0 "'0%'" "'101%'" "'5'" 10001; do
    refused "update maxUnavailable $bad" "spec.update.maxUnavailable" \
        "maxUnavailable must be a count from 1 to 10000 or a percentage from 1% to 100%" <<YAML
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-update-count, namespace: ctf}
spec:
  title: t
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  update: {strategy: Rolling, maxUnavailable: $bad}
YAML
done
refused "an unknown field (strict field validation)" 'unknown field "spec.colour"' <<'YAML'
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: bad-field, namespace: ctf}
spec:
  title: t
  colour: red
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
YAML
names=$(jp -n ctf chaldef,chal -o name | sort | tr '\n' ' ')
want="challenge.ctf.kopc.io/web-team-a challengedefinition.ctf.kopc.io/nc challengedefinition.ctf.kopc.io/twopod challengedefinition.ctf.kopc.io/web "
[ "$names" = "$want" ] || fail "refused objects exist: $names"
ok "no refused object was stored"

log "immutable fields"
patch_refused "changing spec.team" "spec.team is immutable" -n ctf chal web-team-a --type merge -p '{"spec":{"team":"team-b"}}'
patch_refused "changing spec.definition" "spec.definition is immutable" -n ctf chal web-team-a --type merge -p '{"spec":{"definition":"nc"}}'
[ "$(jp -n ctf chal web-team-a -o jsonpath='{.spec.team}/{.spec.definition}')" = team-a/web ] || fail "a refused patch changed the Challenge"
k patch -n ctf chal web-team-a --type merge -p '{"spec":{"expiresAt":"2030-01-01T01:00:00Z"}}' >/dev/null ||
    fail "spec.expiresAt could not be changed"
ok "spec.expiresAt can change; the Challenge kept its team and definition"

log "defaults"
k apply --validate=strict -f - >/dev/null <<'YAML' || fail "a minimal definition was refused"
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: minimal, namespace: ctf}
spec:
  title: Minimal
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1}]}}]
  expose: [{name: svc, pod: app, port: 80}]
YAML
got=$(jp -n ctf chaldef minimal -o jsonpath='{.spec.lifetime.default}|{.spec.lifetime.max}|{.spec.lifetime.renewBy}|{.spec.pods[0].replicas}|{.spec.expose[0].type}|{.spec.network.egress}|{.spec.startTimeout}|{.spec.points}|{.spec.resources.cpu}|{.spec.resources.memory}|{.spec.security.readOnlyRootFilesystem}')
[ "$got" = "30m|2h|30m|1|TCP|None|5m|0|1|1Gi|false" ] || fail "defaults not applied: $got"
k apply -f - >/dev/null <<'YAML' || fail "a definition with a bare dynamic flag was refused"
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: minimal-dynamic, namespace: ctf}
spec:
  title: Minimal dynamic
  pods: [{name: app, template: {containers: [{name: app, image: registry.example/x:1, stdin: true}]}}]
  flag: {dynamic: {secretRef: {name: ctf-flag-key}}}
YAML
got=$(jp -n ctf chaldef minimal-dynamic -o jsonpath='{.spec.flag.dynamic.secretRef.key}|{.spec.flag.dynamic.prefix}|{.spec.flag.dynamic.suffix}|{.spec.pods[0].template.containers[0].stdin}')
[ "$got" = "key|flag{|}|true" ] || fail "dynamic flag defaults or template fields lost: $got"
ok "defaults are applied (lifetime 30m/2h/30m, replicas 1, type TCP, egress None, ...); template fields are kept"
k patch -n ctf chaldef minimal --type merge -p '{"spec":{"update":{}}}' >/dev/null || fail "an empty update was refused"
[ "$(jp -n ctf chaldef minimal -o jsonpath='{.spec.update.strategy}')" = OnNextStart ] || fail "update.strategy not defaulted"
k patch -n ctf chaldef minimal --type merge -p '{"spec":{"update":{"strategy":"Rolling","maxUnavailable":"10%"}}}' >/dev/null ||
    fail "Rolling with maxUnavailable 10% was refused"
k patch -n ctf chaldef minimal --type merge -p '{"spec":{"update":{"strategy":"Rolling","maxUnavailable":3}}}' >/dev/null ||
    fail "Rolling with maxUnavailable 3 was refused"
ok "update: strategy defaults to OnNextStart; Rolling takes maxUnavailable 10% or 3"

log "status subresource"
k patch -n ctf chal web-team-a --subresource=status --type merge -p '{"status":{"currentStatus":"Running","namespace":"ctf-web-0123abcd","observedGeneration":2,"startedAt":"2030-01-01T00:00:05Z","expiresAt":"2030-01-01T01:00:00Z","endpoints":[{"name":"http","type":"HTTP","address":"http://http-ctf-web-0123abcd.ctf.example"}],"conditions":[{"type":"Ready","status":"True","reason":"PodsReady","message":"","lastTransitionTime":"2030-01-01T00:00:05Z","observedGeneration":2}]}}' >/dev/null ||
    fail "a valid status was refused"
patch_refused "status.currentStatus 'Bogus'" "status.currentStatus" -n ctf chal web-team-a --subresource=status --type merge -p '{"status":{"currentStatus":"Bogus"}}'
patch_refused "a condition with status 'Maybe'" "status.conditions[0].status" -n ctf chal web-team-a --subresource=status --type merge -p '{"status":{"conditions":[{"type":"Ready","status":"Maybe","reason":"X","message":"","lastTransitionTime":"2030-01-01T00:00:05Z"}]}}'
k patch -n ctf chal web-team-a --type merge -p '{"status":{"currentStatus":"Error"}}' >/dev/null
[ "$(jp -n ctf chal web-team-a -o jsonpath='{.status.currentStatus}')" = Running ] || fail "the main resource wrote status"
ok "status is written through its subresource only, and validated"

log "printer columns and the ctf category"
out=$(k get chal -n ctf 2>&1)
read -r -a header <<<"$(head -1 <<<"$out")"
[ "${header[*]}" = "NAME STATUS TEAM DEFINITION ENDPOINT EXPIRES AGE" ] || fail "kubectl get chal columns: $out"
grep -qE '^web-team-a +Running +team-a +web +http://http-ctf-web-0123abcd\.ctf\.example +2030-01-01T01:00:00Z +[0-9]+' <<<"$out" ||
    fail "kubectl get chal row: $out"
out=$(k get chaldef -n ctf 2>&1)
read -r -a header <<<"$(head -1 <<<"$out")"
[ "${header[*]}" = "NAME TITLE CATEGORY POINTS POOL READY CLAIMED CURRENT UPDATING BEHIND AGE" ] || fail "kubectl get chaldef columns: $out"
grep -qE '^web +Robots Know +web +100 ' <<<"$out" || fail "kubectl get chaldef row: $out"
out=$(k get ctf -n ctf -o name 2>&1)
for o in challengedefinition.ctf.kopc.io/web challengedefinition.ctf.kopc.io/twopod challenge.ctf.kopc.io/web-team-a; do
    grep -qxF "$o" <<<"$out" || fail "kubectl get ctf lacks $o: $out"
done
ok "kubectl get chal/chaldef show the printer columns; kubectl get ctf lists both kinds"

"$DEVCLUSTER" stop --dir "$DIR" >/dev/null
echo "$passed passed, 0 failed"
