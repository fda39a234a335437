#!/usr/bin/env bash
# ctf_gateway_real_test.sh - the CTF operator's gateway mode on a real node
# (ctf_real_test.py gateway): the devcluster runs Traefik as the Gateway API
# gateway (--gateway-domain ctf.localhost), the operator --gateway-domain:
#   - team A's TCP instance is Running only once Traefik accepted its
#     TLSRoute, and then answers through the gateway, TLS with SNI
#     <id>.ctf.localhost and the certificate checked against the gateway's
#     CA, with team A's own flag; team B's host gives team B's;
#   - a wrong, unknown or missing SNI gets no instance; no NodePort Service
#     exists; neither the host nor a pod outside the gateway connects to the
#     instance's pod directly (its exposed port admits the gateway's pods);
#   - the web challenge answers https://<id>.ctf.localhost by Host;
#   - after Stop the host answers nothing, after Start the same host answers
#     with the same flag;
#   - the pwntools line team A's page shows (read in headless Chromium, as
#     copied), run with pwntools (pinned, tools/pwntools-venv.sh) as shown and
#     with the certificate checked against the gateway's CA, reads team A's flag;
#   - the operator's probe checks the gateway's certificate
#     (--gateway-probe-ca): restarted trusting the cluster's CA instead, it
#     keeps a new instance Pending with GatewayCertificateInvalid while
#     Traefik serves it; given the gateway's CA again, it goes Running;
#   - a warm instance has no route; claimed, it answers on its team's host
#     with its team's flag, without a pod restart;
#   - PUT to first greeting through the gateway, measured over 5 starts.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP;
# optional CHROMIUM, NODE, PWNTOOLS_VENV_CACHE (tools/pwntools-venv.sh). Needs
# Chromium, test/e2e/page/node_modules (make test runs npm ci there) and PyPI
# (pwntools, the first time).
set -euo pipefail
export GATEWAY_DOMAIN=ctf.localhost
# shellcheck source=ctf_real_lib.sh
source "$(dirname "$0")/ctf_real_lib.sh"
real_ctf_init ctf-gateway-real
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || fail "no Chromium: tools/install-deps.sh installs the Debian package chromium"
[ -f "$SRC/test/e2e/page/node_modules/playwright-core/package.json" ] ||
    fail "test/e2e/page/node_modules is missing: run npm ci --prefix test/e2e/page (make test does)"
PWN_PYTHON=$("$SRC/tools/pwntools-venv.sh")/bin/python || fail "tools/pwntools-venv.sh: no pwntools"
export PWN_PYTHON

log "a devcluster with a real node and the gateway, the sample images, the operator"
real_ctf_up
ok "the operator runs in the gateway mode; Traefik serves kopc-gateway/ctf on 127.0.0.1:$GATEWAY_PORT"

echo "$passed" >"$WORK/passed"
python3 "$SRC/test/e2e/ctf_real_test.py" gateway || fail "ctf_real_test.py gateway"
passed=$(cat "$WORK/passed")

# The operator running now: ctf_real_test.py restarted it (op.pid holds its pid).
kill -0 "$(cat "$WORK/op.pid")" 2>/dev/null || fail "the operator died"
grep -q Forbidden "$WORK/op.log" && fail "the operator met Forbidden answers"
stop_real_operator
ok "the operator stops cleanly on SIGTERM; no Forbidden"
echo "PASS: $passed checks"
