#!/usr/bin/env bash
# ctf_api_test.sh - the CTF operator's instance API (docs/api.md) end to end
# on a real devcluster. This script sets up the cluster (CRDs, namespaces,
# the token Secrets, seven ChallengeDefinitions: one with a static flag, one
# whose image cannot be pulled, two with a dynamic flag, one of them stopped
# on solve) and runs the operator with its API on a free
# port; ctf_api_test.py (its scenarios in ctf_api/, one module per route
# group) then drives
# every route and every error code, checking each answer against
# operators/ctf/web/openapi.json and the cluster with kubectl:
#   - the OpenAPI document is served verbatim and covers every route;
#   - 401/403/404/405/400/413 refusals, and that they change nothing;
#   - PUT 201 then 200, 20 concurrent PUTs make one instance, Running with
#     endpoints; DELETE 202 Stopping then gone; 409 QuotaExceeded,
#     RenewLimitReached, InstanceStopping; 429 over the write burst; renewals
#     (also concurrent ones) move the expiry as documented; state Error;
#   - the event stream: snapshot, heartbeats, states in order, 9th stream 429;
#   - ctf_api_requests_total; no token and no flag in any answer;
#   - the admin console's routes (403 for team tokens, the admin stream, bulk
#     stops of a team's and a challenge's instances, admin stop and extend,
#     each an Event), flag attribution (sharedFrom, ctf_flag_shared_total,
#     the Event; never for a static flag or a random one) and stop on solve.
# Finally no token and no flag may appear in the operator's log.
# Not tested: 503 (unsynced caches, a failing apiserver) is not deterministic.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
e2e_init ctf-api stop_processes
op_pid=

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/op.log" ] && { echo "--- operator log (tail)" >&2; tail -40 "$WORK/op.log" >&2; }
    fail_summary "$*"
    exit 1
}
stop_processes() {
    [ -n "$op_pid" ] && kill -9 "$op_pid" 2>/dev/null || true
}

log "cluster, CRDs, token Secrets, definitions"
"$DEVCLUSTER" start --dir "$DIR" --nodes 2 >/dev/null || fail "devcluster start"
ctf_crds
k create namespace ctf >/dev/null
k create namespace kopc-system >/dev/null
ctf_token_secrets team-a team-b team-c team-d team-e team-g
ROTATE_TOKENS="$(openssl rand -hex 24) $(openssl rand -hex 24)"
FLAG="flag{api_$(openssl rand -hex 12)}"
FLAG_KEY=$(openssl rand -hex 16)
k -n ctf create secret generic flag-key --from-literal=key="$FLAG_KEY" >/dev/null

k apply -f - >/dev/null <<EOF
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: web, namespace: ctf}
spec:
  title: Cookie Monster
  category: web
  description: The admin panel trusts its cookies a little too much.
  points: 100
  pods:
  - name: web
    template:
      containers:
      - name: web
        image: registry.example/ctf/web:1
        ports: [{containerPort: 8080}]
  expose: [{name: http, pod: web, port: 8080, type: HTTP}]
  flag: {static: "$FLAG"}
  lifetime: {default: 30m, max: 2h, renewBy: 30m}
---
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: tcp, namespace: ctf}
spec:
  title: Echo Chamber
  category: pwn
  description: A tiny echo service.
  points: 300
  pods:
  - name: echo
    template:
      containers:
      - name: echo
        image: registry.example/ctf/echo:1
        ports: [{containerPort: 1337}]
  expose: [{name: nc, pod: echo, port: 1337, type: TCP}]
---
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: plain, namespace: ctf}
spec:
  title: Plain
  pods:
  - name: app
    template:
      containers:
      - name: app
        image: registry.example/ctf/plain:1
        ports: [{containerPort: 80}]
  expose: [{name: http, pod: app, port: 80, type: HTTP}]
---
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: short, namespace: ctf}
spec:
  title: Short Lived
  category: misc
  description: Renew it while you can.
  points: 50
  pods:
  - name: app
    template:
      containers:
      - name: app
        image: registry.example/ctf/short:1
        ports: [{containerPort: 9000}]
  expose: [{name: tcp, pod: app, port: 9000, type: TCP}]
  lifetime: {default: 2m, max: 5m, renewBy: 2m}
---
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: broken, namespace: ctf}
spec:
  title: Broken
  category: misc
  description: Never starts.
  points: 1
  pods:
  - name: app
    template:
      containers:
      - name: app
        image: registry.example/kwok-image-pull-fails:1
        ports: [{containerPort: 80}]
  expose: [{name: http, pod: app, port: 80, type: HTTP}]
---
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: dyn, namespace: ctf}
spec:
  title: Per Team
  category: crypto
  description: Each team gets its own answer.
  points: 200
  pods:
  - name: app
    template:
      containers:
      - name: app
        image: registry.example/ctf/dyn:1
        ports: [{containerPort: 80}]
  expose: [{name: http, pod: app, port: 80, type: HTTP}]
  flag: {dynamic: {secretRef: {name: flag-key}}}
---
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: solve, namespace: ctf}
spec:
  title: Solve Once
  category: misc
  description: Stops when solved.
  points: 150
  pods:
  - name: app
    template:
      containers:
      - name: app
        image: registry.example/ctf/solve:1
        ports: [{containerPort: 80}]
  expose: [{name: http, pod: app, port: 80, type: HTTP}]
  flag: {dynamic: {secretRef: {name: flag-key}, prefix: "CTF{"}}
  stopOnSolve: true
EOF
ok "devcluster with the CRDs, the token Secrets and seven definitions (one with a static flag, one broken, two dynamic, one stopped on solve)"

log "the operator with its API"
API_PORT=$(free_port)
METRICS_PORT=$(free_port)
while [ "$METRICS_PORT" = "$API_PORT" ]; do METRICS_PORT=$(free_port); done
"$OPERATOR" --kubeconfig "$DIR/kubeconfig" --metrics-bind "127.0.0.1:$METRICS_PORT" \
    --api-bind "127.0.0.1:$API_PORT" --api-heartbeat 1 --api-team-burst 20 --api-team-rate 1 --api-max-streams 16 \
    --max-instances-per-team 3 -v 1 >>"$WORK/op.log" 2>&1 &
op_pid=$!
API=http://127.0.0.1:$API_PORT
wait_for 60 "the API to answer" curl -sf "$API/api/openapi.json"
# Until its caches have synced the API answers 503; a list of challenges means they have.
synced() { curl -sf -H @- "$API/api/v1/challenges" <<<"Authorization: Bearer $ADMIN_TOKEN" | grep -q '"web"'; }
wait_for 60 "the API's caches to sync" synced
ok "the operator serves the API and its OpenAPI document"

echo "$passed" >"$WORK/passed"
export API METRICS="http://127.0.0.1:$METRICS_PORT" ADMIN_TOKEN TEAM_TOKENS ROTATE_TOKENS FLAG FLAG_KEY KUBECTL SRC \
    KUBECONFIG=$DIR/kubeconfig PASSED=$passed PASSED_FILE=$WORK/passed
python3 "$SRC/test/e2e/ctf_api_test.py" || fail "ctf_api_test.py"
passed=$(cat "$WORK/passed")

log "the operator's log"
kill -0 "$op_pid" 2>/dev/null || fail "the operator died"
grep -qF "$FLAG" "$WORK/op.log" && fail "the flag appears in the operator's log"
grep -qF "$FLAG_KEY" "$WORK/op.log" && fail "the flag key appears in the operator's log"
for tok in "$ADMIN_TOKEN" "${TOKENS[@]}" $ROTATE_TOKENS; do
    grep -qF "$tok" "$WORK/op.log" && fail "a token appears in the operator's log"
done
ok "no token and no flag in the operator's log ($(wc -l <"$WORK/op.log") lines)"

kill -TERM "$op_pid"
wait "$op_pid" || fail "operator exit code $? after SIGTERM"
op_pid=
ok "the operator stops cleanly on SIGTERM"
echo "$passed passed, 0 failed"
