#!/usr/bin/env bash
# ctf_webhook_test.sh - the CTF operator's validating webhook for Challenges
# called by a real kube-apiserver (the devcluster's, fake nodes), with the
# configuration config/webhook ships (its rules, failure policy, timeout and
# namespace selector; only clientConfig points at the operator on this host,
# with a CA made here). The operator runs as its service account with
# --max-instances-per-team 1 --max-instances 3. Checked:
#   - before the webhook is registered, Challenges naming a missing
#     definition, or over the team's quota, get the Error status (the
#     status path stays); once registered, `kubectl apply` of the same
#     kinds of Challenge is refused with exactly those statuses' reasons and
#     messages, and nothing is stored;
#   - a valid Challenge is admitted and goes Running; the CTF at
#     --max-instances refuses a fourth team with the status's message;
#   - the operator stopped (SIGSTOP: hangs; then SIGTERM: gone), the
#     webhook still registered: deleting Challenges and a namespace holding
#     one is accepted at once, a finalizer can still be removed, a create
#     fails with the webhook's name and why, within the timeout, not a hang;
#     a Challenge in the excluded kopc-system is not intercepted;
#   - the operator back: what was deleted while it was down finishes going.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
e2e_init ctf-webhook stop_processes
op_pid=
stopped=

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/op.log" ] && { echo "--- operator log (tail)" >&2; tail -30 "$WORK/op.log" >&2; }
    fail_summary "$*"
    exit 1
}
stop_processes() {
    [ -n "$stopped" ] && kill -CONT "$op_pid" 2>/dev/null || true
    [ -n "$op_pid" ] && kill -9 "$op_pid" 2>/dev/null || true
}

field() { kc get chal "$1" -o jsonpath="{$2}" 2>/dev/null; }
status_is() { [ "$(field "$1" .status.currentStatus)" = "$2" ]; }
reason_is() { [ "$(field "$1" .status.currentStatus)/$(field "$1" .status.reason)" = "Error/$2" ]; }
gone() { ! k -n "${2:-ctf}" get chal "$1" >/dev/null 2>&1; }
ns_gone() { ! k get namespace "$1" >/dev/null 2>&1; }
# challenge NAME DEFINITION TEAM [NAMESPACE]: a Challenge's YAML.
challenge() {
    printf 'apiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: %s, namespace: %s}\nspec: {definition: %s, team: %s}\n' \
        "$1" "${4:-ctf}" "$2" "$3"
}
# apply_refused NAME DEFINITION TEAM: kubectl apply must fail; its output in $out.
apply_refused() {
    if out=$(challenge "$@" | k apply -f - 2>&1); then
        fail "Challenge $1 ($2 for $3) was admitted"
    fi
    printf '%s\n' "$out"
    gone "$1" || fail "the refused Challenge $1 was stored"
}

start_operator() {
    "$OPERATOR" --kubeconfig "$WORK/operator.kubeconfig" --metrics-bind "127.0.0.1:$MP" --api-bind 0 \
        --max-instances-per-team 1 --max-instances 3 \
        --webhook-bind "127.0.0.1:$WP" --webhook-cert-dir "$WORK/certs" -v 1 >>"$WORK/op.log" 2>&1 &
    op_pid=$!
    wait_for 60 "operator ready (caches and webhook)" curl -sf "http://127.0.0.1:$MP/readyz"
}

log "cluster, RBAC, CRDs, samples; a CA and the webhook's certificate"
"$DEVCLUSTER" start --dir "$DIR" --nodes 2 >/dev/null || fail "devcluster start"
ctf_rbac_and_samples
sa_kubeconfig "$WORK/operator.kubeconfig"
mkdir -p "$WORK/certs"
(
    cd "$WORK"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
        -out ca.crt -days 1 -subj /CN=kopc-ctf-webhook-test-ca
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout certs/tls.key \
        -out server.csr -subj /CN=127.0.0.1
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >ext.cnf
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
        -extfile ext.cnf -out certs/tls.crt
) >/dev/null 2>&1 || fail "openssl could not make the certificates"
MP=$(free_port)
WP=$(free_port)
start_operator
ok "the operator serves its webhook and is ready"

log "without the webhook, the status path says why"
challenge early-missing nope team-x | k apply -f - >/dev/null
challenge nc-team-a nc team-a | k apply -f - >/dev/null
wait_for 90 "nc-team-a Running" status_is nc-team-a Running
challenge early-twopod twopod team-a | k apply -f - >/dev/null
wait_for 60 "early-missing Error/DefinitionNotFound" reason_is early-missing DefinitionNotFound
wait_for 60 "early-twopod Error/QuotaExceeded" reason_is early-twopod QuotaExceeded
# A namespace of its own holding a Challenge (which gets the operator's
# finalizer), for deleting a namespace while the operator is down.
k create namespace scratch >/dev/null
challenge held nope team-y scratch | k apply -f - >/dev/null
wait_for 60 "scratch/held has the operator's finalizer" bash -c \
    "'$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n scratch get chal held -o jsonpath='{.metadata.finalizers}' | grep -q ctf.kopc.io"
missing_msg=$(field early-missing .status.message)
quota_msg=$(field early-twopod .status.message)
[ "$missing_msg" = "ChallengeDefinition nope not found in namespace ctf" ] || fail "status message: $missing_msg"
ok "created without the webhook: Error DefinitionNotFound and QuotaExceeded in status"

log "the webhook registered, as config/webhook ships it"
# config/webhook/webhook.yaml with clientConfig pointing at this host.
k create --dry-run=client -o json -f "$SRC/config/webhook/webhook.yaml" |
    python3 -c '
import base64, json, sys
o = json.load(sys.stdin)
ca = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
o["metadata"].pop("annotations", None)  # no cert-manager here: the CA is given
for w in o["webhooks"]:
    path = w["clientConfig"]["service"]["path"]
    w["clientConfig"] = {"url": "https://127.0.0.1:%s%s" % (sys.argv[2], path), "caBundle": ca}
print(json.dumps(o))' "$WORK/ca.crt" "$WP" >"$WORK/webhook.json"
k apply -f "$WORK/webhook.json" >/dev/null
timeout_s=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["webhooks"][0]["timeoutSeconds"])' "$WORK/webhook.json")
challenge probe nope team-x >"$WORK/probe.yaml"
# The apiserver picks the configuration up from its own watch: wait until a
# server-side dry run reaches the webhook.
wait_for 60 "the apiserver calls the webhook" bash -c \
    "'$KUBECTL' --kubeconfig '$DIR/kubeconfig' create --dry-run=server -f '$WORK/probe.yaml' 2>&1 | grep -q 'denied the request'"
ok "the apiserver calls the operator's webhook"

apply_refused late-missing nope team-x
grep -q "Error from server (DefinitionNotFound)" <<<"$out" || fail "kubectl did not print the reason: $out"
grep -qF "denied the request: $missing_msg" <<<"$out" || fail "not the status's message ($missing_msg): $out"
ok "a Challenge naming a missing definition is refused with the status's reason and message"

apply_refused late-web web team-a
grep -q "Error from server (QuotaExceeded)" <<<"$out" || fail "kubectl did not print the reason: $out"
grep -qF "denied the request: $quota_msg" <<<"$out" || fail "not the status's message ($quota_msg): $out"
ok "a team over its quota is refused with the status's message: $quota_msg"

# A new definition and a Challenge of it in one file, as organizers apply
# them: the Challenge reaches the webhook milliseconds after the definition,
# before the operator's cache may have it, and must not be refused.
kc get chaldef nc -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
d["metadata"] = {"name": "nc2", "namespace": "ctf"}
d.pop("status", None)
c = {"apiVersion": "ctf.kopc.io/v1alpha1", "kind": "Challenge",
     "metadata": {"name": "nc-team-b", "namespace": "ctf"}, "spec": {"definition": "nc2", "team": "team-b"}}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [d, c]}))' >"$WORK/together.json"
k apply -f "$WORK/together.json" >/dev/null || fail "a new definition and its Challenge applied together were refused"
challenge web-team-c web team-c | k apply -f - >/dev/null || fail "a valid Challenge was refused"
wait_for 90 "nc-team-b Running" status_is nc-team-b Running
wait_for 90 "web-team-c Running" status_is web-team-c Running
ok "valid Challenges are admitted and go Running, one applied with its new definition"

metrics=$(curl -sf "http://127.0.0.1:$MP/metrics")
served=$(awk 'index($0, "controller_runtime_webhook_requests_total{webhook=\"/validate-ctf-kopc-io-v1alpha1-challenge\",code=\"200\"} ") == 1 { print $2 }' <<<"$metrics")
# At least the probe, the two refusals and the two admitted.
[ "${served:-0}" -ge 5 ] || fail "the webhook's requests metric says ${served:-nothing}"
ok "controller_runtime_webhook_requests_total counts the webhook's answers ($served)"

apply_refused nc-team-d nc team-d
grep -q "Error from server (QuotaExceeded)" <<<"$out" || fail "kubectl did not print the reason: $out"
grep -qF "denied the request: the CTF runs its maximum of 3 instances" <<<"$out" ||
    fail "not the CTF-wide quota's message: $out"
ok "the CTF at --max-instances refuses a fourth team"

if out=$(challenge held2 nope team-y scratch | k apply -f - 2>&1); then
    fail "a Challenge naming a missing definition was admitted in namespace scratch"
fi
grep -qF "ChallengeDefinition nope not found in namespace scratch" <<<"$out" || fail "scratch: $out"
ok "the webhook covers other namespaces than ctf too"
# The instance namespace of nc-team-b, to see it go once the operator is back.
inst_ns=$(field nc-team-b .status.namespace)
[ -n "$inst_ns" ] || fail "nc-team-b has no instance namespace"

log "the operator hangs (SIGSTOP), the webhook registered"
kill -STOP "$op_pid"
stopped=1
start=$SECONDS
if out=$(challenge while-hung nc team-e | k apply -f - 2>&1); then
    fail "a create was admitted with the webhook hung"
fi
took=$((SECONDS - start))
printf '%s\n' "$out"
grep -q 'failed calling webhook "validate-challenge.ctf.kopc.io"' <<<"$out" || fail "no clear message: $out"
# The apiserver gives up after timeoutSeconds; the bound is generous (a
# loaded machine slows kubectl itself) and only tells a refusal from a hang.
[ "$took" -le $((timeout_s + 30)) ] || fail "the refusal took ${took}s (timeoutSeconds $timeout_s)"
ok "a create fails after ${took}s (timeoutSeconds $timeout_s) naming the webhook, not a hang"
start=$SECONDS
k -n ctf delete chal nc-team-a --wait=false >/dev/null || fail "deleting a Challenge was refused"
[ $((SECONDS - start)) -lt 30 ] || fail "the delete took $((SECONDS - start))s"
[ -n "$(field nc-team-a .metadata.deletionTimestamp)" ] || fail "nc-team-a is not being deleted"
ok "deleting a Challenge is accepted at once (its finalizer waits for the operator)"
kill -CONT "$op_pid"
stopped=

log "the operator stopped (SIGTERM), the webhook registered"
kill -TERM "$op_pid"
wait "$op_pid" || true # its exit status is not the question here
op_pid=
start=$SECONDS
if out=$(challenge while-down nc team-e | k apply -f - 2>&1); then
    fail "a create was admitted with the operator down"
fi
printf '%s\n' "$out"
grep -q 'failed calling webhook "validate-challenge.ctf.kopc.io"' <<<"$out" || fail "no clear message: $out"
grep -q 'connection refused' <<<"$out" || fail "the message does not say the operator is not there: $out"
[ $((SECONDS - start)) -lt 30 ] || fail "the refusal took $((SECONDS - start))s"
ok "a create fails at once and says the webhook cannot be called"

k -n ctf delete chal nc-team-b early-missing --wait=false >/dev/null || fail "deleting Challenges was refused"
k delete namespace scratch --wait=false >/dev/null || fail "deleting a namespace was refused"
[ "$(k get namespace scratch -o jsonpath='{.status.phase}')" = Terminating ] || fail "scratch is not Terminating"
wait_for 60 "the namespace controller deletes scratch/held" bash -c \
    "[ -n \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n scratch get chal held -o jsonpath='{.metadata.deletionTimestamp}')\" ]"
ok "deleting Challenges and a namespace holding one is accepted with the operator down"
# Without the operator nothing removes its finalizer, but an admin still can:
# an UPDATE, which the webhook never sees.
k -n ctf patch chal early-twopod --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null ||
    fail "removing a finalizer was refused"
k -n ctf delete chal early-twopod --wait=true --timeout=30s >/dev/null || fail "early-twopod did not go"
ok "a Challenge without its finalizer is deleted at once with the operator down"
challenge sys nope team-z kopc-system | k apply -f - >/dev/null ||
    fail "a create in kopc-system (excluded) was intercepted"
k -n kopc-system delete chal sys --wait=true --timeout=30s >/dev/null || fail "the Challenge in kopc-system did not go"
ok "kopc-system is outside the webhook: created and deleted with the operator down"

log "the operator back"
start_operator
for c in nc-team-a nc-team-b early-missing; do
    wait_for 120 "$c gone" gone "$c"
done
wait_for 120 "namespace scratch gone" ns_gone scratch
wait_for 120 "instance namespace $inst_ns gone" ns_gone "$inst_ns"
status_is web-team-c Running || fail "web-team-c is no longer Running"
ok "what was deleted while the operator was down is gone; the rest runs on"

printf 'PASS: %d checks\n' "$passed"
