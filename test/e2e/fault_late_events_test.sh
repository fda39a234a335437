#!/usr/bin/env bash
# fault_late_events_test.sh - the CTF operator's watch events arrive late:
# it talks to the apiserver through faultproxy.py in http mode, which holds
# every chunk of every watch stream for LATE seconds (default 8), as a slow
# network or an overloaded apiserver would. Its requests and writes are not
# delayed, so its cache lags behind the server.
#   - Renewals race expiry. Six Challenges expire at the same moment E; three
#     are renewed (spec.expiresAt moved 10 min on, through the apiserver) 5 s
#     before E, which the operator sees only at E + 3 s. The renewed three
#     must live on with the new expiry: the expiry delete carries the uid and
#     resourceVersion the operator saw, so it conflicts instead of deleting a
#     renewed instance (issue 17, defect 5). The other three must go.
#   - Status writes happen once. Every Challenge, including one created while
#     the events are late, gets exactly one Running Event and one startedAt
#     that never changes: a status write from the lagging cache carries its
#     resourceVersion and is refused rather than written again (defect 7).
#   - Read your own writes: through the instance API, a renew and a DELETE
#     right after the PUT that made the instance find it, though the cache
#     hears of it only LATE s later.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init fault-late
LATE=${LATE:-8}

log "cluster, the operator behind an HTTP proxy"
cluster_up
serving_cert "$WORK" "$DIR/pki/ca.crt" "$DIR/pki/ca.key"
start_proxy http --cert "$WORK/proxy.crt" --key "$WORK/proxy.key" --upstream-ca "$DIR/ca.crt"
sa_kubeconfig "$WORK/proxied.kubeconfig" "https://127.0.0.1:$PROXY_PORT" "$DIR/ca.crt"
ctf_token_secrets late-api
start_op late "$WORK/proxied.kubeconfig"

# Six Challenges, all expiring at E = now + 60 s (a time the API clamps to nothing).
E=$(python3 -c 'import datetime as d; print((d.datetime.now(d.timezone.utc).replace(microsecond=0)+d.timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ"))')
for i in 1 2 3 4 5 6; do
    printf -- '---\napiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: late-%03d, namespace: ctf}\nspec: {definition: web, team: late-%03d, expiresAt: "%s"}\n' "$i" "$i" "$E"
done >"$WORK/six.yaml"
k apply -f "$WORK/six.yaml" >/dev/null
wait_for 60 "six Running" check converged
declare -A started
for i in 1 2 3 4 5 6; do
    n=$(printf 'late-%03d' "$i")
    started[$n]=$(kc get chal "$n" -o jsonpath='{.status.startedAt}')
    [ -n "${started[$n]}" ] || fail "$n Running without startedAt"
done
ok "six instances Running through the proxy, all expiring at $E"

log "watch events held $LATE s; three renewals 5 s before the expiry"
proxy http "/mode?set=delay&seconds=$LATE" >/dev/null
printf -- '---\napiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: late-new, namespace: ctf}\nspec: {definition: web, team: late-new}\n' |
    k apply -f - >/dev/null
renew_at=$(($(date -d "$E" +%s) - 5))
while [ "$(date +%s)" -lt "$renew_at" ]; do sleep 0.2; done # the race is the scenario: renew at E - 5 s
RENEWED=$(python3 -c "import datetime as d; t=d.datetime.strptime('$E','%Y-%m-%dT%H:%M:%SZ'); print((t+d.timedelta(minutes=10)).strftime('%Y-%m-%dT%H:%M:%SZ'))")
for i in 1 2 3; do
    kc patch chal "$(printf 'late-%03d' "$i")" --type merge -p "{\"spec\":{\"expiresAt\":\"$RENEWED\"}}" >/dev/null
done
[ "$(date +%s)" -lt "$(date -d "$E" +%s)" ] ||
    fail "the renewals were done only after the expiry (the machine stalled); the race did not happen"
ok "renewed late-001..003 to $RENEWED before $E; the operator sees it $LATE s late"

log "after the expiry: the renewed live, the others go"
gone() { ! kc get chal "$1" >/dev/null 2>&1; }
for i in 4 5 6; do wait_for 120 "late-00$i expired and gone" gone "late-00$i"; done
proxy http "/mode?set=pass" >/dev/null
for i in 1 2 3; do
    n=late-00$i
    kc get chal "$n" >/dev/null 2>&1 || fail "$n was renewed before its expiry, yet deleted"
    [ -z "$(kc get chal "$n" -o jsonpath='{.metadata.deletionTimestamp}')" ] ||
        fail "$n was renewed before its expiry, yet is being deleted"
    wait_for 60 "$n's status to show the renewal" \
        bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n ctf get chal $n -o jsonpath='{.status.expiresAt}')\" = '$RENEWED' ]"
done
grep -q 'changed since (renewed?)' "$WORK/late.log" ||
    fail "the operator never met a renewal newer than its cache: the race did not happen"
ok "the three renewed instances live on with expiry $RENEWED; the three others expired"

log "through the API: a renewal and a stop right after the create, unseen by the cache yet"
# The create's watch event reaches the operator LATE s later; a renew or a
# DELETE that looked only in the cache would answer 404 (a lost stop).
api() {
    curl -s -o "$WORK/api.out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $ADMIN_TOKEN" \
        "http://127.0.0.1:${OP_API[late]}/api/v1/teams/late-api/instances/web$2"
}
code=$(api PUT "") && [ "$code" = 201 ] || fail "PUT: $code $(cat "$WORK/api.out")"
made=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$WORK/api.out")
code=$(api POST /renew) && [ "$code" = 200 ] || fail "renew right after the PUT: $code $(cat "$WORK/api.out")"
code=$(api DELETE "") && [ "$code" = 202 ] || fail "DELETE right after the PUT: $code $(cat "$WORK/api.out")"
wait_for 120 "the stopped instance $made gone" bash -c "! '$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n ctf get chal '$made' >/dev/null 2>&1"
ok "renew 200 and DELETE 202 right after the PUT, $LATE s before the operator's cache saw the instance"

log "one Running Event and one startedAt per instance"
wait_for 120 "late-new Running" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n ctf get chal late-new -o jsonpath='{.status.currentStatus}')\" = Running ]"
for n in late-001 late-002 late-003 late-new; do
    count=$(k -n ctf get events --field-selector "involvedObject.name=$n,reason=Running" -o json |
        python3 -c 'import json,sys; print(sum(e.get("count") or 1 for e in json.load(sys.stdin)["items"]))')
    [ "$count" = 1 ] || fail "$n has $count Running Events, want 1"
done
for n in late-001 late-002 late-003; do
    now=$(kc get chal "$n" -o jsonpath='{.status.startedAt}')
    [ "$now" = "${started[$n]}" ] || fail "$n's startedAt moved from ${started[$n]} to $now"
done
op_alive late || fail "the operator died"
no_forbidden late
stop_op_clean late
ok "one Running Event each (late-new created while events were late, too); startedAt unchanged"

echo "$passed passed, 0 failed ($(elapsed) s)"
