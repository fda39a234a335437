#!/usr/bin/env bash
# ctf_console_test.sh - the organizer's console (the page's admin mode,
# docs/running-a-ctf.md) in headless Chromium against the real CTF operator on
# a devcluster with fake nodes: the admin token opens the console, which lists
# two teams' instances with their states (one in Error, with its reason),
# the panel's numbers (per definition: running, starting, failed, stopping,
# the warm pool's ready/claimed/target; the totals against --max-instances;
# the teams at their quota) equal to what kubectl reads from the cluster,
# the last-Events column showing each instance's newest Event as kubectl
# lists it, filters by team, stops one instance (confirmed; it leaves the
# team's own page, open in a second browser context with the team's token,
# live and after a reload, the team's own list, and its team the quota
# list), sorts, extends one (confirmed; kubectl's spec.expiresAt moves by
# renewBy, an Event AdminExtend); then CONSOLE_SCALE instances: the console renders them all and
# filters them, and the times are printed (a measurement, never asserted
# beyond generous bounds); last, the team's page asked for the console gets
# its own instances and says why, every admin route fetched from it answers
# 403, and none of the API responses and event-stream text it received names
# another team; then it stops all of a team's and all of a challenge's
# (confirmed; kubectl shows exactly those stopped, an Event AdminStop each).
# test/e2e/page/console_test.mjs drives the browser;
# screenshots go to $KOP_ARTIFACTS (default build/test-artifacts/console).
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP;
# optional CHROMIUM (default /usr/bin/chromium), NODE, KOP_ARTIFACTS,
# CONSOLE_SCALE (instances of the scale step; default 500 so that make test
# stays in its budget; CONSOLE_SCALE=2000 gives the figures in
# docs/running-a-ctf.md).
# Needs Chromium and test/e2e/page/node_modules (make test runs npm ci there).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
NODE=${NODE:-node}
ARTIFACTS=${KOP_ARTIFACTS:-$SRC/build/test-artifacts/console}
SCALE=${CONSOLE_SCALE:-500}
PAGE_DIR=$SRC/test/e2e/page
e2e_init console stop_processes
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

log "what the browser test needs"
[ -x "$CHROMIUM" ] || fail "no Chromium at $CHROMIUM: tools/install-deps.sh installs the Debian package chromium"
command -v "$NODE" >/dev/null || fail "no Node.js ($NODE) to run test/e2e/page/console_test.mjs"
[ -f "$PAGE_DIR/node_modules/playwright-core/package.json" ] ||
    fail "test/e2e/page/node_modules is missing: run npm ci --prefix test/e2e/page (make test does)"
ok "Chromium, Node.js and playwright-core are there"

log "cluster with fake nodes, CRDs, tokens, three definitions (one cannot start, one keeps a warm pool)"
"$DEVCLUSTER" start --dir "$DIR" --nodes 2 >/dev/null || fail "devcluster start"
ctf_crds
k create namespace ctf >/dev/null
k create namespace kopc-system >/dev/null
ctf_token_secrets team-a team-b
k apply -f - >/dev/null <<EOF
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: web, namespace: ctf}
spec:
  title: Cookie Monster
  category: web
  points: 100
  pods:
  - name: web
    template:
      containers:
      - name: web
        image: registry.example/ctf/web:1
        ports: [{containerPort: 8080}]
  expose: [{name: http, pod: web, port: 8080, type: HTTP}]
  flag: {static: "flag{console}"}
---
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata: {name: broken, namespace: ctf}
spec:
  title: Broken
  category: misc
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
metadata: {name: pooled, namespace: ctf}
spec:
  title: Warm Welcome
  category: web
  points: 50
  pool: {min: 2}
  pods:
  - name: web
    template:
      containers:
      - name: web
        image: registry.example/ctf/web:1
        ports: [{containerPort: 8080}]
  expose: [{name: http, pod: web, port: 8080, type: HTTP}]
  flag: {static: "flag{pooled}"}
EOF
ok "devcluster with the CRDs, the token Secrets and the definitions web, broken and pooled (a pool of 2)"

log "the operator (2 instances a team), and three instances of two teams"
API_PORT=$(free_port)
METRICS_PORT=$(free_port)
while [ "$METRICS_PORT" = "$API_PORT" ]; do METRICS_PORT=$(free_port); done
URL=http://127.0.0.1:$API_PORT
"$OPERATOR" --kubeconfig "$DIR/kubeconfig" --metrics-bind "127.0.0.1:$METRICS_PORT" \
    --api-bind "127.0.0.1:$API_PORT" --api-heartbeat 2 --max-instances $((SCALE + 100)) \
    --max-instances-per-team 2 \
    >>"$WORK/op.log" 2>&1 &
op_pid=$!
wait_for 60 "the API answers" curl -sf "$URL/api/openapi.json"
# admin GET|PUT PATH: the API with the admin token (the token on stdin, not in argv).
admin() { curl -sf -X "$1" -H @- "$URL/api/v1$2" <<<"Authorization: Bearer $ADMIN_TOKEN"; }
has_broken() { admin GET /challenges | grep -q '"broken"'; }
wait_for 60 "the API's caches" has_broken
admin PUT /teams/team-a/instances/web >/dev/null || fail "PUT team-a/web"
admin PUT /teams/team-b/instances/web >/dev/null || fail "PUT team-b/web"
admin PUT /teams/team-b/instances/broken >/dev/null || fail "PUT team-b/broken"
# state_is TEAM CHALLENGE STATE: the instance is in STATE now.
state_is() { admin GET "/teams/$1/instances/$2" | grep -q "\"state\":\"$3\""; }
wait_for 120 "team-a/web Running" state_is team-a web Running
wait_for 120 "team-b/web Running" state_is team-b web Running
wait_for 120 "team-b/broken Error" state_is team-b broken Error
ok "team-a/web and team-b/web Running, team-b/broken in Error"

log "the console in headless Chromium"
CONSOLE_URL=$URL/ CONSOLE_ADMIN_TOKEN=$ADMIN_TOKEN CONSOLE_TEAM_B_TOKEN=${TOKENS[team-b]} \
    CONSOLE_SCALE=$SCALE CONSOLE_ARTIFACTS=$ARTIFACTS CHROMIUM=$CHROMIUM \
    CONSOLE_KUBECTL=$KUBECTL CONSOLE_KUBECONFIG=$DIR/kubeconfig CONSOLE_MAX_INSTANCES=$((SCALE + 100)) \
    "$NODE" "$PAGE_DIR/console_test.mjs" || fail "the console test failed (screenshots in $ARTIFACTS)"
ok "the console: every instance with its state and reason, the panel as the cluster counts, the last Events, filter, stop (gone from the team's page), sort, extend, $SCALE instances; a team token: no console, 403, no other team named; stop all of a team's and of a challenge's"

kill -0 "$op_pid" 2>/dev/null || fail "the operator died"
grep -qF -e "$ADMIN_TOKEN" -e "${TOKENS[team-b]}" "$WORK/op.log" && fail "a token appears in the operator's log"
ok "no token in the operator's log"
echo "$passed passed, 0 failed"
