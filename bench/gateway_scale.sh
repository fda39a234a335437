#!/usr/bin/env bash
# bench/gateway_scale.sh - the gateway mode at scale on fake nodes (issue 29):
# N instances (default 2,000) of the sample TCP challenge `nc`, one team each,
# with the CTF operator in the gateway mode and Traefik (the devcluster's
# build, build/bin/traefik) run as a process on the host against the
# devcluster's apiserver, with a token of its own. Fake nodes run no pods, so
# nothing is probed or served: this measures the control plane, not traffic.
#
# Prints, from one `kubectl apply` of the N Challenges:
#   - when all N TLSRoutes exist (the operator wrote them);
#   - when Traefik has accepted all N (status.parents, Accepted and ResolvedRefs);
#   - when Traefik's applied configuration holds N TCP routers (its API's
#     /api/overview: what it serves, not what it wrote);
#   - when all N Challenges are Running;
#   - then, at N, one more Challenge: its route's Accepted and its router in
#     Traefik's configuration, from its creation (the marginal route);
#   - Traefik's RSS and CPU seconds, the operator's.
#
# Usage: bench/gateway_scale.sh [N]   (under /work/cluster-lock; needs the
# build: build/bin/{devcluster,kubectl,ctf-operator,traefik}). Env: KEEP=1 keeps
# the cluster's directory.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-2000}
BIN=$SRC/build/bin
DEVCLUSTER=$BIN/devcluster
KUBECTL=$BIN/kubectl
OPERATOR=$BIN/ctf-operator
TRAEFIK=$BIN/traefik
export KOP_TEST_TMP=${KOP_TEST_TMP:-$SRC/build/bench-tmp}
[ "${KEEP:-0}" = 1 ] && export KOP_TEST_KEEP=1
# shellcheck source=../test/e2e/lib.sh
source "$SRC/test/e2e/lib.sh"
op_pid= tr_pid=
stop_processes() {
    [ -n "$op_pid" ] && kill "$op_pid" 2>/dev/null || true
    [ -n "$tr_pid" ] && kill "$tr_pid" 2>/dev/null || true
}
e2e_init gateway-scale stop_processes
passed=0
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/traefik.log" ] && { echo "--- Traefik (tail)" >&2; tail -20 "$WORK/traefik.log" >&2; }
    [ -f "$WORK/op.log" ] && { echo "--- operator (tail)" >&2; tail -20 "$WORK/op.log" >&2; }
    exit 1
}
DOMAIN=ctf.test
T0=$SECONDS
since() { echo $((SECONDS - $1)); }
now_ms() { date +%s%3N; }

log "a devcluster with fake nodes and the Gateway objects ($DOMAIN)"
"$DEVCLUSTER" start --dir "$DIR" --nodes 4 --gateway-domain "$DOMAIN" >/dev/null || fail "devcluster start"
ctf_rbac_and_samples
ctf_token_secrets team-0
sa_kubeconfig "$WORK/operator.kubeconfig"

log "Traefik $("$TRAEFIK" version 2>/dev/null | sed -n 's/^Version: *//p') as a process, its own token"
k -n kopc-gateway create serviceaccount traefik-bench >/dev/null
k create clusterrolebinding traefik-bench --clusterrole=cluster-admin \
    --serviceaccount=kopc-gateway:traefik-bench >/dev/null
TOKEN=$(k -n kopc-gateway create token traefik-bench --duration=6h)
SERVER=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
TR_API=$(free_port)
# Traefik attaches a Gateway listener to the entry point of its port (443): on an
# address of loopback's own, so as not to take 443 from anyone.
"$TRAEFIK" --entryPoints.websecure.address="127.0.0.77:443" \
    --entryPoints.traefik.address="127.0.0.1:$TR_API" --api.insecure=true \
    --providers.kubernetesGateway=true --providers.kubernetesGateway.experimentalChannel=true \
    --providers.kubernetesGateway.endpoint="$SERVER" \
    --providers.kubernetesGateway.token="$TOKEN" \
    --providers.kubernetesGateway.certAuthFilePath="$DIR/ca.crt" \
    --providers.kubernetesGateway.statusAddress.ip=127.0.0.1 \
    --global.checkNewVersion=false --global.sendAnonymousUsage=false \
    --log.level=ERROR --log.noColor=true >"$WORK/traefik.log" 2>&1 &
tr_pid=$!
programmed() {
    [ "$(k -n kopc-gateway get gateway.gateway.networking.k8s.io ctf \
        -o jsonpath='{.status.conditions[?(@.type=="Programmed")].status}')" = True ]
}
wait_for 120 "Traefik to program the Gateway" programmed

PORT=$(free_port)
API_PORT=$(free_port)
"$OPERATOR" --kubeconfig "$WORK/operator.kubeconfig" --metrics-bind "127.0.0.1:$PORT" \
    --api-bind "127.0.0.1:$API_PORT" --gateway-domain "$DOMAIN" --max-instances $((N + 10)) \
    --max-instances-per-team 3 >"$WORK/op.log" 2>&1 &
op_pid=$!
wait_for 60 "the operator ready" curl -sf "http://127.0.0.1:$PORT/readyz"

# counts: routes, routes Traefik accepted, Traefik's TCP routers, Running Challenges.
routes() { k get tlsroutes.gateway.networking.k8s.io -A --no-headers 2>/dev/null | wc -l; }
accepted_routes() {
    k get tlsroutes.gateway.networking.k8s.io -A -o json | python3 -c '
import json, sys
n = 0
for r in json.load(sys.stdin)["items"]:
    gen = r["metadata"].get("generation")
    for p in r.get("status", {}).get("parents", []):
        c = {x["type"]: x for x in p.get("conditions", [])}
        if all(c.get(t, {}).get("status") == "True" and c[t].get("observedGeneration") == gen
               for t in ("Accepted", "ResolvedRefs")):
            n += 1
            break
print(n)'
}
routers() {
    curl -sf "http://127.0.0.1:$TR_API/api/overview" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["tcp"]["routers"]["total"])' 2>/dev/null || echo 0
}
running() { k -n ctf get chal -o jsonpath='{range .items[*]}{.status.currentStatus}{"\n"}{end}' | grep -c '^Running$' || true; }
cpu_s() { awk '{printf "%.1f", ($14 + $15) / 100}' "/proc/$1/stat"; }
rss_mib() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }

log "$N Challenges in one apply"
python3 - "$N" >"$WORK/chal.yaml" <<'EOF'
import sys
for i in range(int(sys.argv[1])):
    print(f"---\napiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\n"
          f"metadata: {{name: nc-t{i}, namespace: ctf}}\nspec: {{definition: nc, team: t{i}}}")
EOF
t_apply=$SECONDS
k apply -f "$WORK/chal.yaml" >/dev/null
t_routes= t_acc= t_rtr= t_run=
end=$((SECONDS + 3600))
while [ $SECONDS -lt $end ]; do
    r=$(routes); a=$(accepted_routes); t=$(routers); u=$(running)
    echo "$(since "$t_apply") s: routes $r, accepted $a, Traefik routers $t, Running $u" \
         "(Traefik $(rss_mib "$tr_pid") MiB, $(cpu_s "$tr_pid") CPU s)"
    [ -z "$t_routes" ] && [ "$r" -ge "$N" ] && t_routes=$(since "$t_apply")
    [ -z "$t_acc" ] && [ "$a" -ge "$N" ] && t_acc=$(since "$t_apply")
    [ -z "$t_rtr" ] && [ "$t" -ge "$N" ] && t_rtr=$(since "$t_apply")
    [ -z "$t_run" ] && [ "$u" -ge "$N" ] && t_run=$(since "$t_apply")
    [ -n "$t_routes" ] && [ -n "$t_acc" ] && [ -n "$t_rtr" ] && [ -n "$t_run" ] && break
    sleep 5
done
[ -n "$t_run" ] || fail "not converged within an hour"
ok "$N instances from one apply: all routes written in ${t_routes} s, accepted by Traefik in ${t_acc} s, in Traefik's configuration in ${t_rtr} s, all Running in ${t_run} s (5 s polls)"

log "one more route at $N"
t0=$(now_ms)
printf 'apiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: nc-extra, namespace: ctf}\nspec: {definition: nc, team: extra}\n' |
    k apply -f - >/dev/null
more=$((N + 1))
wait_for 300 "the $more-th router in Traefik" eval '[ "$(routers)" -ge "$more" ]'
t_r=$(( $(now_ms) - t0 ))
wait_for 300 "the $more-th route accepted" eval '[ "$(accepted_routes)" -ge "$more" ]' 
t_a=$(( $(now_ms) - t0 ))
ok "the $more-th route: in Traefik's configuration $((t_r / 1000)).$(( (t_r % 1000) / 100 )) s after its Challenge was created (accepted seen by $((t_a / 1000)).$(( (t_a % 1000) / 100 )) s, a slower poll)"
ok "Traefik: $(rss_mib "$tr_pid") MiB RSS, $(cpu_s "$tr_pid") CPU s in all; the operator: $(rss_mib "$op_pid") MiB, $(cpu_s "$op_pid") CPU s; $(grep -c . "$WORK/traefik.log") lines of Traefik errors"
echo "took $(since "$T0") s"
