#!/usr/bin/env bash
# ctf_page_test.sh - the participant page in headless Chromium against the
# real CTF operator on a devcluster with a real node: a team signs in,
# creates a server, sees it start (the sample web challenge, whose program
# waits 15 s before it listens) and run with an endpoint, follows that
# endpoint to the running challenge and reads its flag behind the path
# robots.txt names, reloads, extends, rides out a restart of the operator
# (the page reconnects and takes the state from the new snapshot), sees a new
# version of the challenge replace its instance (the notice on its card),
# stops it and signs out. test/e2e/page/page_test.mjs drives the browser; it asks
# this script to stop and start the operator, and to push the new version,
# through files in $WORK/control.
# Screenshots of every step go to $KOP_ARTIFACTS (default
# build/test-artifacts/page).
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP;
# optional CHROMIUM (default /usr/bin/chromium), NODE, KOP_ARTIFACTS.
# Needs Chromium (tools/install-deps.sh) and test/e2e/page/node_modules
# (`make test` runs npm ci there); without them it fails, it never skips.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

DEVCLUSTER=${DEVCLUSTER:?}
KUBECTL=${KUBECTL:?}
OPERATOR=${OPERATOR:?}
SRC=${SRC:?}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
NODE=${NODE:-node}
ARTIFACTS=${KOP_ARTIFACTS:-$SRC/build/test-artifacts/page}
PAGE_DIR=$SRC/test/e2e/page
e2e_init page stop_processes
op_pid=
node_pid=
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/op.log" ] && { echo "--- operator log (tail)" >&2; tail -40 "$WORK/op.log" >&2; }
    real_node_logs "$DIR" >&2
    fail_summary "$*"
    exit 1
}
stop_processes() {
    [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null || true
    [ -n "$op_pid" ] && kill -9 "$op_pid" 2>/dev/null || true
}

log "what the browser test needs"
[ -x "$CHROMIUM" ] || fail "no Chromium at $CHROMIUM: tools/install-deps.sh installs the Debian package chromium"
command -v "$NODE" >/dev/null || fail "no Node.js ($NODE) to run test/e2e/page/page_test.mjs"
[ -f "$PAGE_DIR/node_modules/playwright-core/package.json" ] ||
    fail "test/e2e/page/node_modules is missing: run npm ci --prefix test/e2e/page (make test does)"
ok "Chromium, Node.js and playwright-core are there"

log "cluster with a real node, CRDs, namespaces, tokens, a slow-starting web challenge"
"$DEVCLUSTER" start --dir "$DIR" --nodes 0 --real-nodes 1 >/dev/null || fail "devcluster start --real-nodes 1"
NODE_IP=$(k get node real-node-0 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
"$SRC/tools/images.sh" "$DIR" webflag >/dev/null || fail "tools/images.sh webflag"
VERSION=$(sed -n 's/^project(kopc VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
ctf_crds
k create namespace ctf >/dev/null
k create namespace kopc-system >/dev/null
TEAM=team-a
ctf_token_secrets "$TEAM" team-b
TOKEN=${TOKENS[$TEAM]}
k apply -f - >/dev/null <<EOF
apiVersion: ctf.kopc.io/v1alpha1
kind: ChallengeDefinition
metadata:
  name: web
  namespace: ctf
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
        image: registry.devcluster.test/kopc/ctf-webflag:$VERSION
        command: [/bin/sh, -c, "sleep 15; exec /usr/local/bin/ctf-webflag"]
        ports:
        - containerPort: 8080
  expose:
  - name: http
    pod: web
    port: 8080
    type: HTTP
  flag:
    static: flag{p4g3_t3st}
  lifetime:
    default: 30m
    max: 2h
    renewBy: 30m
EOF
ok "devcluster with the CRDs, the token Secrets and the definition web"

log "the operator with its API"
METRICS_PORT=$(free_port)
API_PORT=$(free_port)
URL=http://127.0.0.1:$API_PORT
start_operator() {
    "$OPERATOR" --kubeconfig "$DIR/kubeconfig" --metrics-bind "127.0.0.1:$METRICS_PORT" \
        --api-bind "127.0.0.1:$API_PORT" --node-address "$NODE_IP" --api-heartbeat 2 -v 1 >>"$WORK/op.log" 2>&1 &
    op_pid=$!
    wait_for 60 "the API answers" curl -sf "$URL/api/openapi.json"
}
start_operator
# The token Secrets and the definitions are in the API's caches once the
# team's token lists the challenge.
wait_for 60 "the API knows the team and the challenge" \
    bash -c "curl -sf -H 'Authorization: Bearer $TOKEN' '$URL/api/v1/challenges' | grep -q '\"web\"'"
ok "the operator serves the API and the page on 127.0.0.1:$API_PORT"

log "the page in headless Chromium"
# The page test asks for the operator to go away (file "stop") and come back
# ("start"); each is answered with "stopped" or "started".
CONTROL=$WORK/control
mkdir -p "$CONTROL"
PAGE_URL=$URL/ PAGE_TEAM=$TEAM PAGE_TOKEN=$TOKEN PAGE_ADMIN_TOKEN=$ADMIN_TOKEN PAGE_CHALLENGE=web PAGE_FLAG='flag{p4g3_t3st}' \
    PAGE_ARTIFACTS=$ARTIFACTS PAGE_CONTROL=$CONTROL CHROMIUM=$CHROMIUM "$NODE" "$PAGE_DIR/page_test.mjs" &
node_pid=$!
while kill -0 "$node_pid" 2>/dev/null; do
    if [ -f "$CONTROL/stop" ]; then
        rm -f "$CONTROL/stop"
        kill -9 "$op_pid"
        wait "$op_pid" 2>/dev/null || true
        touch "$CONTROL/stopped"
    elif [ -f "$CONTROL/start" ]; then
        rm -f "$CONTROL/start"
        start_operator
        touch "$CONTROL/started"
    elif [ -f "$CONTROL/update" ]; then # a new version, replacing the running instance
        rm -f "$CONTROL/update"
        kc patch chaldef web --type json -p '[{"op":"add","path":"/spec/update","value":{"strategy":"Recreate"}},
            {"op":"add","path":"/spec/pods/0/template/containers/0/env","value":[{"name":"VERSION","value":"2"}]}]' >/dev/null
        touch "$CONTROL/updated"
    fi
    sleep 0.2
done
wait "$node_pid" || { node_pid=; fail "the page test failed (screenshots in $ARTIFACTS)"; }
node_pid=
ok "the page: sign in, create, starting, running, the challenge through its endpoint, reload, extend, reconnect, update, phone, stop, sign out, admin"
grep -qF -e "$TOKEN" -e "$ADMIN_TOKEN" "$WORK/op.log" && fail "a token appears in the operator's log"
ok "the tokens the page used appear nowhere in the operator's log"

kill -TERM "$op_pid"
wait "$op_pid" || fail "operator exit code $? after SIGTERM"
op_pid=
echo "$passed passed, 0 failed"
