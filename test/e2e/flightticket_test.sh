#!/usr/bin/env bash
# flightticket_test.sh - the FlightTicket operator end to end on a real
# devcluster, driven by kubectl and curl: a ticket gets status and a
# boarding pass, number 11 is refused, an edit updates status and
# observedGeneration follows, deleting the ticket removes the pass, /metrics
# exposes controller-runtime's names with sane values, SIGTERM stops it
# cleanly, and with two replicas under leader election exactly one
# reconciles until it is killed with -9 and the other takes over.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), KOP_TEST_TMP, SRC (repo root).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
mkdir -p "${KOP_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/flightticket.XXXXXX")
DIR=$WORK/cluster
pids=()

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    for f in "$WORK"/op*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
    fail_summary "$*"
    exit 1
}
k() { "$KUBECTL" --kubeconfig "$DIR/kubeconfig" --request-timeout=30s "$@"; }
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    "$DEVCLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

metric() { # metric PORT NAME_AND_LABELS: print the value, or nothing
    curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" 'index($0, m" ") == 1 { print $2 }'
}
# start_operator N PORT [flags...]: run replica N in the background.
start_operator() {
    local n=$1 port=$2
    shift 2
    "$OPERATOR" --kubeconfig "$DIR/kubeconfig" --metrics-bind "127.0.0.1:$port" "$@" >"$WORK/op$n.log" 2>&1 &
    pids+=($!)
    wait_for 60 "replica $n ready" curl -sf "http://127.0.0.1:$port/readyz"
}

log "cluster and CRD"
"$DEVCLUSTER" start --dir "$DIR" --nodes 1 >/dev/null || fail "devcluster start"
k apply -f "$SRC/examples/flightticket/crd.yaml" >/dev/null
k wait --for=condition=Established crd/flighttickets.flights.com --timeout=60s >/dev/null
wait_for 60 "flighttickets served" "$KUBECTL" --kubeconfig "$DIR/kubeconfig" get ft

P1=$(free_port)
start_operator 1 "$P1" -v 1
op1=${pids[-1]}

log "a ticket is confirmed"
k apply -f "$SRC/examples/flightticket/ticket.yaml" >/dev/null
wait_for 60 "ticket confirmed" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get ft my-flight-ticket -o jsonpath='{.status.phase}')\" = Confirmed ]"
[ "$(k get ft my-flight-ticket -o jsonpath='{.status.seats}')" = 2 ] || fail "seats not 2"
[ "$(k get ft my-flight-ticket -o jsonpath='{.status.observedGeneration}')" = 1 ] || fail "observedGeneration not 1"
wait_for 30 "boarding pass" "$KUBECTL" --kubeconfig "$DIR/kubeconfig" get cm my-flight-ticket-boarding-pass
[ "$(k get cm my-flight-ticket-boarding-pass -o jsonpath='{.data.to}')" = London ] || fail "boarding pass data"
owner=$(k get cm my-flight-ticket-boarding-pass -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].controller}')
[ "$owner" = "FlightTicket/true" ] || fail "boarding pass not controlled by the ticket: $owner"
ok "kubectl apply of a ticket gets status and a boarding pass it owns"

if out=$(k patch ft my-flight-ticket --type merge -p '{"spec":{"number":11}}' 2>&1); then
    fail "number 11 was accepted"
fi
grep -q "spec.number" <<<"$out" || fail "refusal does not name spec.number: $out"
[ "$(k get ft my-flight-ticket -o jsonpath='{.spec.number}')" = 2 ] || fail "refused patch changed the ticket"
ok "number 11 is refused by the apiserver and changes nothing"

k patch ft my-flight-ticket --type merge -p '{"spec":{"number":5}}' >/dev/null
wait_for 60 "status follows the edit" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get ft my-flight-ticket -o jsonpath='{.status.seats}/{.status.observedGeneration}')\" = 5/2 ]"
wait_for 30 "boarding pass follows the edit" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get cm my-flight-ticket-boarding-pass -o jsonpath='{.data.seats}')\" = 5 ]"
ok "editing the ticket updates status, observedGeneration and the boarding pass"

k delete cm my-flight-ticket-boarding-pass >/dev/null
wait_for 60 "boarding pass recreated" "$KUBECTL" --kubeconfig "$DIR/kubeconfig" get cm my-flight-ticket-boarding-pass
ok "a deleted boarding pass is recreated (owned resources are watched)"

patch_count() { curl -s "http://127.0.0.1:$P1/metrics" | awk '/^rest_client_requests_total\{.*method="PATCH"/ { s += $2 } END { print s + 0 }'; }
reconciled() { curl -s "http://127.0.0.1:$P1/metrics" | awk '/^controller_runtime_reconcile_total\{controller="flightticket"/ { s += $2 } END { print s + 0 }'; }
reconciled_above() { [ "$(reconciled)" -gt "$1" ]; }
p0=$(patch_count) r0=$(reconciled)
k label cm my-flight-ticket-boarding-pass kopc-test/poke=1 >/dev/null
wait_for 60 "a pass woken by the boarding pass's label" reconciled_above "$r0"
[ "$(patch_count)" = "$p0" ] || fail "a pass with nothing to change made $(($(patch_count) - p0)) PATCH requests"
k patch cm my-flight-ticket-boarding-pass --type merge -p '{"data":{"seats":"99"}}' >/dev/null
wait_for 60 "the edited boarding pass put back" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get cm my-flight-ticket-boarding-pass -o jsonpath='{.data.seats}')\" = 5 ]"
ok "no write when the cached pass is as wanted; an edited pass is put back"

log "metrics"
total=$(metric "$P1" 'controller_runtime_reconcile_total{controller="flightticket",result="success"}')
adds=$(metric "$P1" 'workqueue_adds_total{name="flightticket",controller="flightticket"}')
# One depth series per priority (-100 initial list, 100 watch events, ...): all of them.
depth=$(curl -s "http://127.0.0.1:$P1/metrics" | awk 'index($0, "workqueue_depth{name=\"flightticket\",controller=\"flightticket\",priority=") == 1 { s += $2; n++ } END { if (n) print s + 0 }')
errors=$(metric "$P1" 'controller_runtime_reconcile_errors_total{controller="flightticket"}')
patches=$(curl -s "http://127.0.0.1:$P1/metrics" | awk '/^rest_client_requests_total\{code="200",.*method="PATCH"/ { s += $2 } END { print s + 0 }')
echo "reconciles=$total adds=$adds depth=$depth errors=$errors patches=$patches"
[ "${total%.*}" -ge 3 ] || fail "controller_runtime_reconcile_total too low: '$total'"
[ "${adds%.*}" -ge "${total%.*}" ] || fail "workqueue_adds_total ($adds) below reconciles ($total)"
[ "${depth%.*}" = 0 ] || fail "workqueue_depth not 0 when idle: '$depth'"
[ "${errors%.*}" = 0 ] || fail "reconcile errors: '$errors'"
[ "$patches" -ge 3 ] || fail "rest_client_requests_total shows $patches PATCHes"
# Read the page once: grep -q closing a pipe early would fail the pipeline.
page=$(curl -s "http://127.0.0.1:$P1/metrics")
for name in controller_runtime_reconcile_time_seconds_bucket workqueue_queue_duration_seconds_bucket \
    workqueue_work_duration_seconds_bucket workqueue_retries_total workqueue_unfinished_work_seconds \
    workqueue_longest_running_processor_seconds controller_runtime_max_concurrent_reconciles; do
    grep -q "^$name" <<<"$page" || fail "/metrics lacks $name"
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P1/healthz")" = 200 ] || fail "/healthz"
ok "/metrics exposes controller-runtime's names with sane values; probes answer"

log "deleting the ticket (its boarding pass must go: checked at the end)"
k delete ft my-flight-ticket >/dev/null
# The garbage collector notices a new CRD on its next discovery sync (every
# 30 s, so up to 40 s after the CRD came): the next sections run meanwhile,
# on a ticket of another name, and the end of the test checks the pass went.

log "SIGTERM"
kill -TERM "$op1"
for i in $(seq 1 60); do kill -0 "$op1" 2>/dev/null || break; sleep 0.5; done
kill -0 "$op1" 2>/dev/null && fail "operator still running 30 s after SIGTERM"
wait "$op1" && rc=0 || rc=$?
[ "$rc" = 0 ] || fail "operator exited $rc after SIGTERM"
grep -q "manager stopped" "$WORK/op1.log" || fail "no clean shutdown logged"
ok "SIGTERM shuts the operator down cleanly with exit 0"

log "leader election with two replicas"
PA=$(free_port)
PB=$(free_port)
start_operator A "$PA" --leader-elect
opa=${pids[-1]}
start_operator B "$PB" --leader-elect
opb=${pids[-1]}
lease='leader_election_master_status{name="flightticket-operator"}'
wait_for 60 "one leader" bash -c "[ \"\$(curl -s http://127.0.0.1:$PA/metrics | awk '/^leader_election_master_status/ {print \$2}')\$(curl -s http://127.0.0.1:$PB/metrics | awk '/^leader_election_master_status/ {print \$2}')\" != 00 ]"
a=$(metric "$PA" "$lease"); b=$(metric "$PB" "$lease")
[ "$a$b" = 10 ] || [ "$a$b" = 01 ] || fail "want exactly one leader, got A=$a B=$b"
if [ "$a" = 1 ]; then leader=$opa; lport=$PA; other_port=$PB; else leader=$opb; lport=$PB; other_port=$PA; fi
# The sample ticket under another name (my-flight-ticket's pass may still be
# waiting for the garbage collector).
sed 's/name: my-flight-ticket/name: ha-flight-ticket/' "$SRC/examples/flightticket/ticket.yaml" | k apply -f - >/dev/null
wait_for 60 "ticket confirmed under election" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get ft ha-flight-ticket -o jsonpath='{.status.phase}')\" = Confirmed ]"
standby=$(metric "$other_port" 'controller_runtime_reconcile_total{controller="flightticket",result="success"}')
[ -z "$standby" ] || [ "${standby%.*}" = 0 ] || fail "the standby reconciled ($standby)"
ok "two replicas: exactly one leader, and only it reconciles"

kill -9 "$leader"
t0=$SECONDS
wait_for 40 "the standby takes over" bash -c "[ \"\$(curl -s http://127.0.0.1:$other_port/metrics | awk '/^leader_election_master_status/ {print \$2}')\" = 1 ]"
echo "takeover after $((SECONDS - t0)) s (lease 15 s)"
k patch ft ha-flight-ticket --type merge -p '{"spec":{"number":3}}' >/dev/null
wait_for 60 "new leader reconciles" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get ft ha-flight-ticket -o jsonpath='{.status.seats}')\" = 3 ]"
ok "after kill -9 of the leader the standby takes over and reconciles"

log "the deleted ticket's boarding pass is gone"
wait_for 120 "boarding pass garbage-collected" bash -c "! '$KUBECTL' --kubeconfig '$DIR/kubeconfig' get cm my-flight-ticket-boarding-pass"
ok "deleting the ticket removes its boarding pass"

echo "$passed passed, 0 failed"
