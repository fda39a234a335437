#!/usr/bin/env bash
# webhook_test.sh - libkop's webhook server called by a real kube-apiserver
# (the devcluster's, on this host, so clientConfig.url reaches 127.0.0.1),
# through the FlightTicket example's webhooks (examples/flightticket/webhook.c)
# with a certificate signed by a CA made here: kubectl apply of a ticket
# going nowhere is refused with the webhook's message; a valid one is
# admitted with the mutating webhook's patch applied (one seat by default);
# the metrics count the requests; an operator without its certificate does
# not start; with the operator down, failurePolicy Fail refuses creates
# with a clear message at once and failurePolicy Ignore lets them through.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (flightticket-operator), KOP_TEST_TMP, SRC.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
mkdir -p "${KOP_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/webhook.XXXXXX")
DIR=$WORK/cluster
op=

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/op.log" ] && { echo "--- operator log" >&2; tail -30 "$WORK/op.log" >&2; }
    fail_summary "$*"
    exit 1
}
cleanup() {
    [ -n "$op" ] && kill -9 "$op" 2>/dev/null || true
    "$DEVCLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

ticket() { # ticket NAME FROM TO [NUMBER]: a FlightTicket's YAML
    printf 'apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: %s, namespace: default}\nspec: {from: %s, to: %s%s}\n' \
        "$1" "$2" "$3" "${4:+, number: $4}"
}
webhook_configs() { # webhook_configs POLICY: both configurations, calling 127.0.0.1:$WP
    local ca
    ca=$(base64 -w0 "$WORK/ca.crt")
    for kind in Validating Mutating; do
        local lower=${kind,,}
        local path=/validate-flights-com-v1-flightticket
        [ "$kind" = Mutating ] && path=/mutate-flights-com-v1-flightticket
        cat <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ${kind}WebhookConfiguration
metadata: {name: flightticket-${lower}}
webhooks:
- name: ${lower}.flights.com
  clientConfig: {url: "https://127.0.0.1:$WP$path", caBundle: "$ca"}
  rules:
  - {apiGroups: [flights.com], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [flighttickets]}
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: $1
  timeoutSeconds: 5
---
YAML
    done
}

log "cluster, CRD, a test CA and the webhook's certificate"
"$DEVCLUSTER" start --dir "$DIR" --nodes 1 >/dev/null || fail "devcluster start"
k apply -f "$SRC/examples/flightticket/crd.yaml" >/dev/null
k wait --for=condition=Established crd/flighttickets.flights.com --timeout=60s >/dev/null
mkdir -p "$WORK/certs" "$WORK/empty"
(
    cd "$WORK"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
        -out ca.crt -days 1 -subj /CN=kopc-webhook-test-ca
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout certs/tls.key \
        -out server.csr -subj /CN=127.0.0.1
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >ext.cnf
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
        -extfile ext.cnf -out certs/tls.crt
) >/dev/null 2>&1 || fail "openssl could not make the certificates"
MP=$(free_port)
WP=$(free_port)

log "without its certificate the operator does not start"
if "$OPERATOR" --kubeconfig "$DIR/kubeconfig" --metrics-bind "127.0.0.1:$MP" \
    --webhook-bind "127.0.0.1:$WP" --webhook-cert-dir "$WORK/empty" >"$WORK/nocert.log" 2>&1; then
    fail "the operator ran without a certificate"
fi
grep -q "tls.crt" "$WORK/nocert.log" || fail "no word of the missing certificate: $(tail -3 "$WORK/nocert.log")"
ok "a missing certificate stops the operator at start with its path"

log "the operator serving its webhooks"
"$OPERATOR" --kubeconfig "$DIR/kubeconfig" --metrics-bind "127.0.0.1:$MP" \
    --webhook-bind "127.0.0.1:$WP" --webhook-cert-dir "$WORK/certs" >"$WORK/op.log" 2>&1 &
op=$!
wait_for 60 "operator ready (caches and webhooks)" curl -sf "http://127.0.0.1:$MP/readyz"
webhook_configs Fail | k apply -f - >/dev/null
ticket same-city London london | sed 's/same-city/probe/' >"$WORK/probe.yaml"
# The apiserver picks the configurations up from its own watch: wait until a
# server-side dry run reaches the webhook.
wait_for 60 "the apiserver calls the webhook" bash -c \
    "! '$KUBECTL' --kubeconfig '$DIR/kubeconfig' create --dry-run=server -f '$WORK/probe.yaml'"

if out=$(ticket same-city London london | k apply -f - 2>&1); then
    fail "a ticket from London to london was admitted"
fi
printf "%s\n" "$out"
grep -q "denied the request: spec.to: a flight from London must go somewhere else" <<<"$out" ||
    fail "kubectl did not print the webhook's reason: $out"
k get ft same-city >/dev/null 2>&1 && fail "the refused ticket exists"
ok "kubectl apply of a ticket going nowhere is refused with the webhook's message"

ticket no-seats Amsterdam Lisbon | k apply -f - >/dev/null || fail "a valid ticket was refused"
[ "$(k get ft no-seats -o jsonpath='{.spec.number}')" = 1 ] || fail "the mutating webhook's default is missing"
ticket two-seats Amsterdam Lisbon 2 | k apply -f - >/dev/null || fail "a valid ticket was refused"
[ "$(k get ft two-seats -o jsonpath='{.spec.number}')" = 2 ] || fail "the mutating webhook changed a given number"
out=$(ticket group Amsterdam Lisbon 10 | k apply -f - 2>&1) || fail "a ticket of 10 seats was refused: $out"
grep -q "Warning: spec.number: 10 seats, the most one ticket holds" <<<"$out" ||
    fail "kubectl did not print the webhook's warning: $out"
[ "$(k get ft group -o jsonpath='{.spec.number}')" = 10 ] || fail "the warned ticket was not stored as sent"
ok "valid tickets are admitted; the mutating webhook's patch sets the default seat; a warning reaches kubectl"

metrics=$(curl -sf "http://127.0.0.1:$MP/metrics")
count() { awk -v m="$1" 'index($0, m" ") == 1 { print $2 }' <<<"$metrics"; }
v=$(count 'controller_runtime_webhook_requests_total{webhook="/validate-flights-com-v1-flightticket",code="200"}')
m=$(count 'controller_runtime_webhook_requests_total{webhook="/mutate-flights-com-v1-flightticket",code="200"}')
l=$(count 'controller_runtime_webhook_latency_seconds_count{webhook="/validate-flights-com-v1-flightticket"}')
f=$(count 'controller_runtime_webhook_requests_in_flight{webhook="/validate-flights-com-v1-flightticket"}')
# At least: the dry runs, the refused ticket and the two valid ones.
[ "${v:-0}" -ge 3 ] && [ "${m:-0}" -ge 2 ] && [ "${l:-0}" -ge 3 ] && [ "${f:-x}" = 0 ] ||
    fail "webhook metrics: validate=$v mutate=$m latency_count=$l in_flight=$f"
ok "the webhook metrics count the requests ($v validations, $m mutations)"

log "the operator down"
kill -TERM "$op"
wait "$op" || fail "the operator did not stop cleanly"
op=
start=$SECONDS
if out=$(ticket while-down Oslo Rome | k apply -f - 2>&1); then
    fail "failurePolicy Fail admitted a ticket with the webhook down"
fi
grep -q 'failed calling webhook' <<<"$out" || fail "no clear message with the webhook down: $out"
[ $((SECONDS - start)) -lt 20 ] || fail "the refusal took $((SECONDS - start)) s"
ok "with the webhook down, failurePolicy Fail refuses at once and says why"

webhook_configs Ignore | k apply -f - >/dev/null
ticket while-down Oslo Rome >"$WORK/down.yaml"
wait_for 60 "failurePolicy Ignore in force" "$KUBECTL" --kubeconfig "$DIR/kubeconfig" apply -f "$WORK/down.yaml"
k get ft while-down >/dev/null || fail "the ticket is not there"
ok "with the webhook down, failurePolicy Ignore does not block"

printf 'PASS: %d checks\n' "$passed"
