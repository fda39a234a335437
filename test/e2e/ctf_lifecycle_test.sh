#!/usr/bin/env bash
# ctf_lifecycle_test.sh - the CTF operator end to end on a real devcluster,
# running as its own service account with the RBAC of config/rbac:
#   - every sample goes Pending -> Running with endpoints; the instance's
#     namespace holds the hardened pods, NetworkPolicies, quota, limits and
#     the restricted pod-security label; the flag is only in its Secret;
#   - renewals move the expiry, clamped at max; at expiry the Challenge and
#     its namespace go away and nothing is left;
#   - each Error cause shows its reason and recovers once fixed;
#   - a team's fourth instance is refused while three run;
#   - creating twice is creating once; a SIGKILL of the operator in the
#     middle of 50 creations still ends with exactly one Running instance
#     (and one namespace) each.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
e2e_init ctf stop_processes
op_pid=

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/op.log" ] && { echo "--- operator log (tail)" >&2; tail -30 "$WORK/op.log" >&2; }
    fail_summary "$*"
    exit 1
}
stop_processes() {
    [ -n "$op_pid" ] && kill -9 "$op_pid" 2>/dev/null || true
}

field() { kc get chal "$1" -o jsonpath="{$2}" 2>/dev/null; }
status_is() { [ "$(field "$1" .status.currentStatus)" = "$2" ]; }
reason_is() { [ "$(field "$1" .status.currentStatus)/$(field "$1" .status.reason)" = "Error/$2" ]; }
gone() { ! kc get chal "$1" >/dev/null 2>&1; }
ns_gone() { ! k get namespace "$1" >/dev/null 2>&1; }

# challenge NAME DEFINITION TEAM: create a Challenge.
challenge() {
    printf 'apiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: %s, namespace: ctf}\nspec: {definition: %s, team: %s}\n' \
        "$1" "$2" "$3" | k apply -f - >/dev/null
}
# copy_definition FROM TO PYTHON-EXPR: copy a definition, editing its spec (d) in Python.
copy_definition() {
    kc get chaldef "$1" -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': '$2', 'namespace': 'ctf'}
o.pop('status', None)
d = o['spec']
$3
print(json.dumps(o))" | k apply -f - >/dev/null
}
# edit_definition NAME PYTHON-EXPR: change a definition's spec (d) in place: read, edit,
# replace, read again on a conflict (the operator writes the definition's status, about
# once a second while its instances change, which moves its resourceVersion).
edit_definition() {
    local try
    for try in 1 2 3 4 5; do
        kc get chaldef "$1" -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
d = o['spec']
$2
print(json.dumps(o))" >"$WORK/edit.json"
        if k replace -f "$WORK/edit.json" >/dev/null 2>"$WORK/edit.err"; then
            return 0
        fi
        grep -q Conflict "$WORK/edit.err" || fail "editing definition $1: $(cat "$WORK/edit.err")"
    done
    fail "editing definition $1: still a conflict after $try tries"
}

start_operator() {
    # --api-bind 0: this test does not use the API, and its default port (8080) is not ours.
    "$OPERATOR" --kubeconfig "$WORK/operator.kubeconfig" --metrics-bind "127.0.0.1:$PORT" \
        --api-bind 0 --max-instances-per-team 3 --install-crds -v 1 >>"$WORK/op.log" 2>&1 &
    op_pid=$!
    wait_for 60 "operator ready" curl -sf "http://127.0.0.1:$PORT/readyz"
}

log "cluster, RBAC, the operator as its service account installing its CRDs"
"$DEVCLUSTER" start --dir "$DIR" --nodes 2 >/dev/null || fail "devcluster start"
k apply -k "$SRC/config/rbac" >/dev/null
k apply -f "$SRC/config/rbac/crd_installer_role.yaml" >/dev/null
ctf_rbac_in_force
rbac_in_force patch customresourcedefinitions.apiextensions.k8s.io
sa_kubeconfig "$WORK/operator.kubeconfig"
PORT=$(free_port)
start_operator
k wait --for=condition=Established crd/challenges.ctf.kopc.io crd/challengedefinitions.ctf.kopc.io --timeout=60s >/dev/null ||
    fail "--install-crds did not install the CRDs"
k apply -k "$SRC/config/samples" >/dev/null
ok "the operator starts as its own service account and installs its CRDs"

log "the samples run"
challenge nc-team-a nc team-a
challenge twopod-team-a twopod team-a
for c in web-team-a nc-team-a twopod-team-a; do
    wait_for 90 "$c Running" status_is "$c" Running
    addr=$(field "$c" '.status.endpoints[0].address')
    [[ $addr =~ ^(http://)?127\.0\.0\.1:[0-9]+$ ]] || fail "$c endpoint '$addr' is not host:nodePort"
    [ "$(field "$c" '.status.conditions[?(@.type=="Ready")].status')" = True ] || fail "$c not Ready"
    [ -n "$(field "$c" .status.startedAt)" ] && [ -n "$(field "$c" .status.expiresAt)" ] || fail "$c lacks times"
done
ok "web, nc and twopod samples go Running with endpoints"

log "the instance as specified"
ns=$(field web-team-a .status.namespace)
[ "$(k get ns "$ns" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = restricted ] || fail "no restricted PSS label on $ns"
[ "$(k get ns "$ns" -o jsonpath='{.metadata.labels.ctf\.kopc\.io/team}')" = team-a ] || fail "no team label on $ns"
pols=$(k -n "$ns" get networkpolicy -o jsonpath='{.items[*].metadata.name}')
for p in default-deny allow-exposed allow-same-instance allow-dns; do
    grep -qw "$p" <<<"$pols" || fail "NetworkPolicy $p missing in $ns (have: $pols)"
done
grep -qw allow-internet <<<"$pols" && fail "web has no egress, yet allow-internet exists"
deny=$(k -n "$ns" get networkpolicy default-deny -o jsonpath='{.spec.policyTypes}')
[[ $deny == *Ingress* && $deny == *Egress* ]] || fail "default-deny does not deny both ways: $deny"
k -n "$ns" get resourcequota instance >/dev/null || fail "no ResourceQuota"
k -n "$ns" get limitrange defaults >/dev/null || fail "no LimitRange"
spec=$(k -n "$ns" get deployment web -o json)
python3 - "$spec" <<'PY' || fail "pod spec of web is not hardened"
import json, sys
p = json.loads(sys.argv[1])["spec"]["template"]["spec"]
assert p["automountServiceAccountToken"] is False, "service-account token mounted"
assert p["securityContext"]["runAsNonRoot"] is True, "runAsNonRoot"
assert p["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", "seccomp"
for c in p["containers"]:
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False, "privilege escalation"
    assert "ALL" in sc["capabilities"]["drop"], "capabilities"
    flag = [e for e in c.get("env", []) if e["name"] == "FLAG"]
    assert flag and "valueFrom" in flag[0] and "value" not in flag[0], "FLAG not from the Secret"
PY
staticflag=$(kc get chaldef web -o jsonpath='{.spec.flag.static}')
[ "$(k -n "$ns" get secret flag -o jsonpath='{.data.flag}' | base64 -d)" = "$staticflag" ] || fail "flag Secret content"
chal_yaml=$(kc get chal web-team-a -o yaml)
grep -qF "$staticflag" <<<"$chal_yaml" && fail "the flag appears in the Challenge"
grep -qF "$staticflag" "$WORK/op.log" && fail "the flag appears in the operator's log"
dflag=$(k -n "$(field nc-team-a .status.namespace)" get secret flag -o jsonpath='{.data.flag}' | base64 -d)
[[ $dflag =~ ^flag\{[0-9a-f]{32}\}$ ]] || fail "dynamic flag '$dflag' is not prefix+HMAC+suffix"
ok "namespace, NetworkPolicies, quota, limits, hardened pods, flag only in its Secret"

log "a pass that would change nothing writes nothing; a deleted child comes back"
# metric NAME-AND-LABEL-FILTER: the sum of the operator's samples matching it.
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v re="$1" '$0 ~ re {s += $2} END {print s + 0}'; }
patches() { metric '^rest_client_requests_total\\{.*method="PATCH"'; }
passes() { metric '^controller_runtime_reconcile_total\\{controller="challenge"'; }
passes_above() { [ "$(passes)" -gt "$1" ]; }
p0=$(patches) r0=$(passes)
k -n "$ns" label deployment web kopc.test/poke=1 --overwrite >/dev/null
wait_for 60 "a pass woken by the Deployment's change" passes_above "$r0"
p1=$(patches)
[ "$p1" = "$p0" ] || fail "a pass with nothing to change made $((p1 - p0)) PATCH requests"
k -n "$ns" delete deployment web --wait=true >/dev/null
wait_for 60 "the deleted Deployment applied again" k -n "$ns" get deployment web
wait_for 90 "web-team-a Running again" status_is web-team-a Running
ok "no PATCH from a pass that changes nothing ($r0 -> $(passes) passes); a deleted Deployment is put back"

log "renew, expiry, nothing left: each sample"
# A copy of each sample with a short lifetime, all three living at once.
plus() { python3 -c "import datetime as d; t=d.datetime.strptime('$1','%Y-%m-%dT%H:%M:%SZ'); print((t+d.timedelta(seconds=$2)).strftime('%Y-%m-%dT%H:%M:%SZ'))"; }
expires_is() { [ "$(field "$1" .status.expiresAt)" = "$2" ]; }
for s in web nc twopod; do
    copy_definition "$s" "quick-$s" "d['lifetime'] = {'default': '25s', 'max': '45s', 'renewBy': '10s'}"
    challenge "quick-$s" "quick-$s" team-l
done
declare -A qns
for s in web nc twopod; do
    wait_for 60 "quick-$s Running" status_is "quick-$s" Running
    [ -n "$(field "quick-$s" '.status.endpoints[0].address')" ] || fail "quick-$s has no endpoint"
    qns[$s]=$(field "quick-$s" .status.namespace)
done
for s in web nc twopod; do
    e1=$(field "quick-$s" .status.expiresAt)
    e2=$(plus "$e1" 10)
    kc patch chal "quick-$s" --type merge -p "{\"spec\":{\"expiresAt\":\"$e2\"}}" >/dev/null
    wait_for 30 "renewal of quick-$s moves its expiry" expires_is "quick-$s" "$e2"
done
created=$(field quick-web .metadata.creationTimestamp)
kc patch chal quick-web --type merge -p '{"spec":{"expiresAt":"2099-01-01T00:00:00Z"}}' >/dev/null
wait_for 30 "expiry clamped at max" expires_is quick-web "$(plus "$created" 45)"
for s in web nc twopod; do
    wait_for 90 "expired quick-$s deleted" gone "quick-$s"
    wait_for 90 "namespace of quick-$s removed" ns_gone "${qns[$s]}"
done
left=$(k get ns -l ctf.kopc.io/team=team-l -o name)
[ -z "$left" ] || fail "left behind: $left"
for s in web nc twopod; do
    grep -q "name=quick-$s status=Deleted" "$WORK/op.log" || fail "no Deleted transition logged for quick-$s"
done
ok "each sample: Running, renewed, clamped at max, expired, removed without a trace"

log "errors, and recovery once the cause is fixed"
challenge later-team-e later team-e
wait_for 30 "DefinitionNotFound" reason_is later-team-e DefinitionNotFound
copy_definition web later "pass"
wait_for 60 "recovery from DefinitionNotFound" status_is later-team-e Running

copy_definition web badimg "d['pods'][0]['template']['containers'][0]['image'] = 'registry.example/kwok-image-pull-fails:1'"
challenge badimg-team-e badimg team-e
wait_for 60 "ImagePullFailed" reason_is badimg-team-e ImagePullFailed
[[ $(field badimg-team-e .status.message) == *kwok-image-pull-fails* ]] || fail "ImagePullFailed message does not name the image"
edit_definition badimg "d['pods'][0]['template']['containers'][0]['image'] = 'registry.example/ctf/web:2'"
wait_for 90 "recovery from ImagePullFailed" status_is badimg-team-e Running

copy_definition web crashy "d['pods'][0]['template']['containers'][0]['image'] = 'registry.example/kwok-crashloop:1'"
challenge crashy-team-f crashy team-f
wait_for 60 "CrashLoop" reason_is crashy-team-f CrashLoop
edit_definition crashy "d['pods'][0]['template']['containers'][0]['image'] = 'registry.example/ctf/web:3'"
wait_for 90 "recovery from CrashLoop" status_is crashy-team-f Running

copy_definition web stuck "d['startTimeout'] = '5s'; d['pods'][0]['template']['nodeSelector'] = {'no-such-node': 'x'}"
challenge stuck-team-f stuck team-f
wait_for 60 "StartTimeout" reason_is stuck-team-f StartTimeout
# The message says which check it waited on: its pod, unschedulable, is never available.
[[ $(field stuck-team-f .status.message) == *"Deployment web has 0 of 1 replicas available"* ]] ||
    fail "StartTimeout message does not say what it waited for: $(field stuck-team-f .status.message)"
edit_definition stuck "d['pods'][0]['template'].pop('nodeSelector')"
wait_for 90 "recovery from StartTimeout" status_is stuck-team-f Running

# The cluster refuses the instance's Deployment (a ValidatingAdmissionPolicy of the
# organizer's, answering 422): Error InvalidDefinition with the policy's words. Once the
# policy goes, the instance comes up with nobody touching it: refusals are tried again.
copy_definition web refused "pass"
k apply -f - >/dev/null <<'YAML'
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-refused-deployments}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - {expression: "false", message: "the organizer holds this challenge back"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-refused-deployments}
spec:
  policyName: no-refused-deployments
  validationActions: [Deny]
  matchResources:
    objectSelector: {matchLabels: {ctf.kopc.io/definition: refused}}
YAML
cat >"$WORK/probe.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: policy-probe, namespace: ctf, labels: {ctf.kopc.io/definition: refused}}
spec:
  selector: {matchLabels: {app: probe}}
  template:
    metadata: {labels: {app: probe}}
    spec: {containers: [{name: c, image: registry.example/ctf/web:1}]}
YAML
# (the dry run's refusal read whole: it exits non-zero, which pipefail would pass on)
policy_in_force() {
    local said
    said=$(k apply --dry-run=server -f "$WORK/probe.yaml" 2>&1 || true)
    [[ $said == *"holds this challenge back"* ]]
}
wait_for 60 "the policy in force" policy_in_force
challenge refused-team-h refused team-h
wait_for 60 "InvalidDefinition from the cluster's policy" reason_is refused-team-h InvalidDefinition
[[ $(field refused-team-h .status.message) == *"holds this challenge back"* ]] ||
    fail "the refusal's message does not carry the policy's: $(field refused-team-h .status.message)"
k delete validatingadmissionpolicybinding no-refused-deployments >/dev/null
k delete validatingadmissionpolicy no-refused-deployments >/dev/null
wait_for 120 "recovery once the policy is gone, untouched" status_is refused-team-h Running

copy_definition nc keyless "d['flag'] = {'dynamic': {'secretRef': {'name': 'no-such-key', 'key': 'key'}}}"
challenge keyless-team-g keyless team-g
wait_for 30 "InvalidDefinition" reason_is keyless-team-g InvalidDefinition
# Creating the Secret sends the operator no event: it looks again every 15 s by itself.
kc create secret generic no-such-key --from-literal=key=s3cr3t >/dev/null
wait_for 90 "recovery from InvalidDefinition" status_is keyless-team-g Running
ok "DefinitionNotFound, ImagePullFailed, CrashLoop, StartTimeout, InvalidDefinition (a policy, a key): reported, then recovered"

log "quota"
challenge q1 web busy
challenge q2 nc busy
challenge q3 twopod busy
for c in q1 q2 q3; do wait_for 90 "$c Running" status_is "$c" Running; done
challenge q4 later busy
wait_for 30 "fourth refused" reason_is q4 QuotaExceeded
[[ $(field q4 .status.message) == *"3 instances"* ]] || fail "quota message unclear: $(field q4 .status.message)"
[ -z "$(field q4 .status.namespace)" ] || fail "the refused instance got a namespace"
kc delete chal q1 --wait=false >/dev/null # the freed slot wakes the refused (wake_refused)
wait_for 120 "the fourth runs once a slot is free" status_is q4 Running
ok "a team's fourth instance is refused while three run, and runs when one stops"

log "creating twice is creating once"
if out=$(printf 'apiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: web-team-a, namespace: ctf}\nspec: {definition: web, team: team-a}\n' | k create -f - 2>&1); then
    fail "a second create of the same Challenge succeeded"
fi
grep -q AlreadyExists <<<"$out" || fail "second create: $out"
challenge dup-first web team-d
wait_for 90 "dup-first Running" status_is dup-first Running
dns=$(field dup-first .status.namespace)
challenge dup-second web team-d
wait_for 30 "DuplicateInstance" reason_is dup-second DuplicateInstance
status_is dup-first Running || fail "the original instance was disturbed"
[ "$(k get ns -l ctf.kopc.io/team=team-d,ctf.kopc.io/definition=web -o name | wc -l)" = 1 ] || fail "more than one namespace for web/team-d"
kc delete chal dup-second >/dev/null
status_is dup-first Running || fail "deleting the duplicate disturbed the original"
k get ns "$dns" >/dev/null || fail "deleting the duplicate removed the original's namespace"
ok "the same Challenge twice is refused; a second Challenge for the same instance is an Error and harms nothing"

log "SIGKILL in the middle of 50 creations"
# mass_counts sets created, seen and running: the mass-* Challenges that
# exist, those the operator has given a status, and those Running.
mass_counts() {
    read -r created seen running < <(kc get chal -o jsonpath='{range .items[*]}{.metadata.name} {.status.currentStatus}{"\n"}{end}' |
        awk '/^mass-/ {c++; if (NF > 1) s++; if ($2 == "Running") r++} END {printf "%d %d %d\n", c, s, r}')
}
for i in $(seq -w 1 50); do challenge "mass-$i" web "mass-$i"; done &
creator=$!
# The kill comes once 5 of the 50 exist and the operator is at work on them
# (one has a status), while the creator is still creating: asserted below.
end=$((SECONDS + 120))
until mass_counts && [ "$created" -ge 5 ] && [ "$seen" -ge 1 ]; do
    [ $SECONDS -lt $end ] || fail "timed out waiting for 5 of the 50 Challenges and the operator at work on them"
    sleep 0.2
done
creating=no
kill -0 "$creator" 2>/dev/null && creating=yes
kill -9 "$op_pid"
wait "$op_pid" 2>/dev/null || true
killed_at="$created created, $seen with a status, $running Running"
[ "$creating" = yes ] && [ "$created" -lt 50 ] && [ "$running" -lt 50 ] ||
    fail "the SIGKILL did not fall inside the 50 creations: creator still creating=$creating, $created created, $running Running"
wait "$creator"
mass_counts || fail "cannot count the mass-* Challenges"
[ "$created" = 50 ] || fail "the creator made $created of the 50 Challenges"
start_operator
# All 50 Running, counted in one kubectl call a round (a call per Challenge
# cost 50 calls, about 12 s, once they were all Running).
all_mass_running() { mass_counts && [ "$running" = 50 ]; }
wait_for 600 "the 50 mass-* Challenges Running" all_mass_running
nss=$(k get ns -l ctf.kopc.io/definition=web -o jsonpath='{range .items[*]}{.metadata.labels.ctf\.kopc\.io/team}{"\n"}{end}' | grep -c '^mass-' || true)
[ "$nss" = 50 ] || fail "want 50 namespaces for 50 instances, got $nss"
ok "after a SIGKILL inside the 50 creations (at the kill: $killed_at) and a restart, 50 instances run, one namespace each"

log "metrics"
page=$(curl -s "http://127.0.0.1:$PORT/metrics")
running=$(awk '/^ctf_instances\{status="Running"\}/ {print $2}' <<<"$page")
[ "${running%.*}" -ge 50 ] || fail "ctf_instances{status=Running} = '$running'"
grep -q '^ctf_instance_ready_seconds_count' <<<"$page" || fail "no ctf_instance_ready_seconds"
ok "ctf_instances and ctf_instance_ready_seconds are exported"

log "deleting everything leaves nothing"
kc delete chal --all --wait=false >/dev/null
wait_for 180 "all Challenges gone" bash -c "[ -z \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n ctf get chal -o name)\" ]"
wait_for 180 "all instance namespaces gone" bash -c "[ -z \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get ns -l app.kubernetes.io/managed-by=kopc-ctf -o name)\" ]"
forbidden=$(grep -c 'Forbidden' "$WORK/op.log" || true)
[ "$forbidden" = 0 ] || fail "the operator met $forbidden Forbidden answers with its RBAC"
ok "deleting every Challenge removes every instance; no Forbidden with least-privilege RBAC"

kill -TERM "$op_pid"
wait "$op_pid" || fail "operator exit code $? after SIGTERM"
op_pid=
echo "$passed passed, 0 failed"
