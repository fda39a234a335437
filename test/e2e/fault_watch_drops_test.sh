#!/usr/bin/env bash
# fault_watch_drops_test.sh - the CTF operator talks to the apiserver through
# faultproxy.py in tcp mode (TLS passes through: the operator verifies the
# apiserver itself), which for one minute kills a live connection (RST)
# every 0.2 to 1.5 s at random and refuses one new connection in five:
# watch streams, requests in flight and reconnections all get cut. Meanwhile
# Challenges are created, deleted and renewed (spec.expiresAt moved). After
# the minute:
#   - the proxy really cut watches (dozens of connections dropped);
#   - the Challenges are exactly those requested, each Running with one
#     namespace; the deleted ones and their namespaces are gone;
#   - every renewal reached status.expiresAt: no change was missed;
#   - the operator's cache, as its instance API shows it, equals the server
#     for every team; ctf_instances{status="Running"} counts them all;
#   - the operator stayed up, and met no Forbidden.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init fault-drops
DROP_SECONDS=${DROP_SECONDS:-60}

log "cluster, the operator behind a TCP proxy"
cluster_up
ADMIN_TOKEN=$(openssl rand -hex 24)
k -n kopc-system create secret generic ctf-api-admin --from-literal=token="$ADMIN_TOKEN" >/dev/null
start_proxy tcp
sa_kubeconfig "$WORK/proxied.kubeconfig" "https://127.0.0.1:$PROXY_PORT" "$DIR/ca.crt"
start_op drops "$WORK/proxied.kubeconfig"
challenges d 1 20 >"$WORK/first.yaml"
k apply -f "$WORK/first.yaml" >/dev/null
wait_for 120 "the first 20 Running" check converged
ok "20 instances Running through the proxy"

log "connections dropped at random for $DROP_SECONDS s while Challenges change"
before=$(proxy tcp /stats)
proxy tcp "/mode?set=drop&min=0.2&max=1.5" >/dev/null
end=$((SECONDS + DROP_SECONDS))
i=0
declare -A renewed
while [ $SECONDS -lt $end ] || [ $i -lt 20 ]; do
    i=$((i + 1))
    if [ $i -le 20 ]; then # one more Challenge
        challenges d $((20 + i)) $((20 + i)) | k apply -f - >/dev/null
    fi
    if [ $i -le 10 ]; then # one fewer
        kc delete chal "$(printf 'd-%03d' "$i")" --wait=false >/dev/null
    fi
    if [ $i -le 10 ]; then # a renewal: spec.expiresAt to creation + 45 min
        n=$(printf 'd-%03d' $((10 + i)))
        created=$(kc get chal "$n" -o jsonpath='{.metadata.creationTimestamp}')
        renewed[$n]=$(python3 -c "import datetime as d; t=d.datetime.strptime('$created','%Y-%m-%dT%H:%M:%SZ'); print((t+d.timedelta(minutes=45)).strftime('%Y-%m-%dT%H:%M:%SZ'))")
        kc patch chal "$n" --type merge -p "{\"spec\":{\"expiresAt\":\"${renewed[$n]}\"}}" >/dev/null
    fi
    sleep 2
done
proxy tcp "/mode?set=pass" >/dev/null
after=$(proxy tcp /stats)
dropped=$(python3 -c "import json; a=json.loads('$after'); b=json.loads('$before'); print(a['dropped'] - b['dropped'] + a['refused'] - b['refused'])")
echo "    $dropped connections dropped or refused in $DROP_SECONDS s"
[ "$dropped" -ge 20 ] || fail "only $dropped connections dropped: the fault did not happen"
op_alive drops || fail "the operator died while connections dropped"
ok "changes made while $dropped connections were cut"

log "the caches converge and no change is missed"
seq -f 'd-%03g' 11 40 >"$WORK/want"
seq -f 'd-%03g' 1 10 >"$WORK/deleted"
seq -f 'd-%03g' 1 40 >"$WORK/teams"
wait_for 180 "convergence" check converged --expect "$WORK/want" --absent "$WORK/deleted"
check converged --expect "$WORK/want" --absent "$WORK/deleted" || fail "not converged"
for n in "${!renewed[@]}"; do
    wait_for 60 "renewal of $n" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n ctf get chal $n -o jsonpath='{.status.expiresAt}')\" = '${renewed[$n]}' ]"
done
wait_for 60 "the operator's cache equals the server" \
    check cache --api "http://127.0.0.1:${OP_API[drops]}" --token "$ADMIN_TOKEN" --teams "$WORK/teams"
check cache --api "http://127.0.0.1:${OP_API[drops]}" --token "$ADMIN_TOKEN" --teams "$WORK/teams" ||
    fail "the cache differs from the server"
[ "$(metric drops 'ctf_instances\{status="Running"\}')" = 30 ] || fail "ctf_instances{status=Running} is not 30"
no_forbidden drops
stop_op_clean drops
ok "30 Running, 10 gone, ${#renewed[@]} renewals seen, the cache equals the server"

echo "$passed passed, 0 failed ($(elapsed) s)"
