#!/usr/bin/env bash
# ctfd_test.sh - kopc instances inside the real CTFd 3.8.7 (issue 19,
# docs/ctfd.md): a devcluster with a real node, the CTF operator (one
# instance per team, so its quota shows), and CTFd with the plugin in
# CTFd/plugins, run by gunicorn as in production, on SQLite.
#   - ctfd_test.py: CTFd set up through its own setup page and REST API
#     (admin, three teams, kopc challenges; a missing definition refused);
#     players start instances through the plugin, connect to them on the real
#     node and read their team's flag, submit it to CTFd (correct; another
#     team's flag incorrect), extend, hit the quota (in plain words), stop; a
#     challenge in flag mode "ctfd" keeps CTFd's flags; a banned and a deleted
#     team lose their instances; the plugin's admin page lists the submission
#     of another team's flag (when, who, whose, which challenge) and not a
#     made-up one; with stopOnSolve a correct flag through CTFd stops the
#     team's instance in kopc.
#   - page/ctfd_page_test.mjs: Chromium through CTFd's own pages: log in,
#     open the challenge, Start, Running, reload, still Running, Stop
#     (screenshots in $KOP_ARTIFACTS, default build/test-artifacts/ctfd).
# CTFd comes from ../shared/vendor (or its upstream tag, hash-pinned) through
# tools/ctfd.sh, its tree in build/ctfd and its virtual environment in
# ~/.cache/kopc (CTFD_VENV_CACHE); without it
# this fails, it never skips.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP;
# optional CHROMIUM (default /usr/bin/chromium), NODE, KOP_ARTIFACTS.
set -euo pipefail
export MAX_PER_TEAM=1
# shellcheck source=ctf_real_lib.sh
source "$(dirname "$0")/ctf_real_lib.sh"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
NODE=${NODE:-node}
ARTIFACTS=${KOP_ARTIFACTS:-$SRC/build/test-artifacts/ctfd}
CTFD_DIR=$SRC/build/ctfd
CTFD_PID=
stop_all() {
    real_ctf_stop_operator
    [ -n "$CTFD_PID" ] && kill "$CTFD_PID" 2>/dev/null || true
}
e2e_init ctfd stop_all
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    [ -f "$WORK/ctfd.log" ] && { echo "--- CTFd log (tail)" >&2; tail -40 "$WORK/ctfd.log" >&2; }
    [ -f "$WORK/op.log" ] && { echo "--- operator log (tail)" >&2; tail -30 "$WORK/op.log" >&2; }
    real_node_logs "$DIR" >&2
    fail_summary "$*"
    exit 1
}

log "CTFd 3.8.7 with the plugin, the browser test's parts"
# CTFd's virtual environment is kept in the user's cache (tools/ctfd.sh), so a
# fresh clone on a warm machine does not install its requirements again.
CTFD_VENV_CACHE=${CTFD_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopc} \
    "$SRC/tools/ctfd.sh" "$CTFD_DIR" || fail "tools/ctfd.sh: no CTFd to test against"
[ -x "$CHROMIUM" ] || fail "no Chromium at $CHROMIUM: tools/install-deps.sh installs the Debian package chromium"
[ -f "$SRC/test/e2e/page/node_modules/playwright-core/package.json" ] ||
    fail "test/e2e/page/node_modules is missing: run npm ci --prefix test/e2e/page (make test does)"
ok "CTFd's tree verified and its virtual environment ready; Chromium and playwright-core there"

log "a devcluster with a real node, the sample images, the operator (one instance per team)"
real_ctf_up
ok "the operator runs against a cluster with a real node at $NODE_IP"

log "CTFd under gunicorn, configured for kopc through its environment"
CTFD_PORT=$(free_port)
CTFD=http://127.0.0.1:$CTFD_PORT
mkdir -p "$WORK/ctfd-uploads" "$WORK/ctfd-logs"
# CTFd keeps its cache in its own tree (.data): each run gets a linked copy.
cp -al "$CTFD_DIR/CTFd-3.8.7" "$WORK/ctfd-tree" 2>/dev/null || cp -a "$CTFD_DIR/CTFd-3.8.7" "$WORK/ctfd-tree"
rm -rf "$WORK/ctfd-tree/.data"
(cd "$WORK/ctfd-tree" && exec env DATABASE_URL="sqlite:///$WORK/ctfd.db" \
    SECRET_KEY="$(openssl rand -hex 32)" UPLOAD_FOLDER="$WORK/ctfd-uploads" LOG_FOLDER="$WORK/ctfd-logs" \
    KOPC_API_URL="$API" KOPC_ADMIN_TOKEN="$ADMIN_TOKEN" \
    "$CTFD_DIR/venv/bin/gunicorn" --bind "127.0.0.1:$CTFD_PORT" --workers 1 --threads 8 \
    --timeout 120 'CTFd:create_app()') >"$WORK/ctfd.log" 2>&1 &
CTFD_PID=$!
wait_for 120 "CTFd to answer" curl -sf -o /dev/null "$CTFD/setup"
grep -q "Loaded module, <module 'CTFd.plugins.kopc_ctfd'" "$WORK/ctfd.log" ||
    fail "CTFd did not load the kopc plugin"
ok "CTFd answers at $CTFD with the kopc plugin loaded"

export CTFD STATE_FILE=$WORK/ctfd-state.json
echo "$passed" >"$WORK/passed"
"$CTFD_DIR/venv/bin/python" "$SRC/test/e2e/ctfd_test.py" || fail "ctfd_test.py"
passed=$(cat "$WORK/passed")

log "Chromium through CTFd's pages"
mkdir -p "$ARTIFACTS"
CHROMIUM=$CHROMIUM ARTIFACTS=$ARTIFACTS "$NODE" "$SRC/test/e2e/page/ctfd_page_test.mjs" ||
    fail "ctfd_page_test.mjs (screenshots in $ARTIFACTS)"
ok "a player starts, sees Running, reloads, still Running, stops, in CTFd's own pages"

grep -qF "$ADMIN_TOKEN" "$WORK/ctfd.log" && fail "kopc's admin token appears in CTFd's log"
kill -0 "$OP_PID" 2>/dev/null || fail "the operator died"
stop_real_operator
echo "PASS: $passed checks"
