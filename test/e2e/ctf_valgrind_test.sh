#!/usr/bin/env bash
# ctf_valgrind_test.sh - the long-running operator (the regular
# RelWithDebInfo build/bin/ctf-operator, not the sanitizer build) under
# valgrind's memcheck through one whole lifecycle, as its service account:
# the instance API creates an instance, it goes Running, is renewed, and
# deleted; a second one is created with kubectl, expires, and is removed by
# the operator itself; the event stream and /metrics are read meanwhile;
# then SIGTERM. valgrind must report zero errors and no definite or
# indirect leak (--error-exitcode), and the operator exit 0. No suppression
# is needed: libcurl, OpenSSL, jansson, libfyaml and libmicrohttpd leave only
# "still reachable" process-wide state, which is not counted.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP,
#      VALGRIND (default: valgrind on PATH).
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init ctf-valgrind
VALGRIND=${VALGRIND:-valgrind}
command -v "$VALGRIND" >/dev/null || fail "valgrind not found (tools/install-deps.sh installs it)"

log "cluster, the operator under valgrind"
cluster_up
ADMIN_TOKEN=$(openssl rand -hex 24)
k -n kopc-system create secret generic ctf-api-admin --from-literal=token="$ADMIN_TOKEN" >/dev/null
kc get chaldef web -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': 'brief', 'namespace': 'ctf'}
o.pop('status', None)
o['spec']['lifetime'] = {'default': '30s', 'max': '40s', 'renewBy': '10s'}
print(json.dumps(o))" | k apply -f - >/dev/null
OP_WRAP=("$VALGRIND" --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect --track-origins=yes --num-callers=30
    --log-file="$WORK/valgrind.txt")
OP_READY_SECS=180 start_op vg
ok "the operator runs under valgrind"

log "one lifecycle"
API_URL=http://127.0.0.1:${OP_API[vg]}/api/v1
api() { curl -s -o "$WORK/api.out" -w '%{http_code}' -H "Authorization: Bearer $ADMIN_TOKEN" -X "$1" "$API_URL/$2"; }
wait_for 120 "API ready" bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $ADMIN_TOKEN' http://127.0.0.1:${OP_API[vg]}/api/v1/challenges)\" = 200 ]"
curl -sN --max-time 60 -H "Authorization: Bearer $ADMIN_TOKEN" \
    "http://127.0.0.1:${OP_API[vg]}/api/v1/teams/vg-a/events" >"$WORK/events.txt" 2>/dev/null &
events=$!
[ "$(api PUT teams/vg-a/instances/nc)" = 201 ] || fail "PUT: $(cat "$WORK/api.out")"
printf 'apiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: brief-vg, namespace: ctf}\nspec: {definition: brief, team: vg-b}\n' |
    k apply -f - >/dev/null
running() {
    api GET teams/vg-a/instances/nc >/dev/null
    [ "$(python3 -c "import json; print(json.load(open('$WORK/api.out')).get('state'))")" = Running ]
}
wait_for 180 "Running" running
[ "$(api POST teams/vg-a/instances/nc/renew)" = 200 ] || fail "renew: $(cat "$WORK/api.out")"
# Read the whole page first: with pipefail, `curl | grep -q` fails whenever grep
# matches before curl has written everything (curl gets SIGPIPE, exits 23).
page=$(curl -sf "http://127.0.0.1:${OP_METRICS[vg]}/metrics") || fail "no metrics (curl exit $?)"
grep -q '^ctf_instances' <<<"$page" || fail "no ctf_instances in /metrics"
[ "$(api DELETE teams/vg-a/instances/nc)" = 202 ] || fail "DELETE: $(cat "$WORK/api.out")"
wait_for 240 "both instances gone (deleted, expired)" bash -c "[ -z \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n ctf get chal -o name)\" ]"
wait_for 240 "their namespaces gone" bash -c "[ -z \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' get ns -l app.kubernetes.io/managed-by=kopc-ctf -o name)\" ]"
kill "$events" 2>/dev/null || true
wait "$events" 2>/dev/null || true
grep -q '"state":"Running"' "$WORK/events.txt" || fail "the event stream did not show Running"
ok "created, Running, renewed, deleted; another expired; events streamed"

log "SIGTERM: zero errors, zero leaks"
pid=${OP_PID[vg]}
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
unset "OP_PID[vg]"
grep -E 'ERROR SUMMARY|definitely lost|indirectly lost|possibly lost' "$WORK/valgrind.txt" | sed 's/^/    /'
[ "$rc" != 99 ] || { cat "$WORK/valgrind.txt" >&2; fail "valgrind found errors or leaks"; }
[ "$rc" = 0 ] || fail "the operator exited with $rc after SIGTERM"
grep -q 'ERROR SUMMARY: 0 errors' "$WORK/valgrind.txt" || fail "valgrind's summary is not clean"
no_forbidden vg
ok "valgrind: 0 errors, no definite or indirect leak; exit 0"

echo "$passed passed, 0 failed ($(elapsed) s)"
