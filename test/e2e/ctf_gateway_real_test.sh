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
#   - a warm instance has no route; claimed, it answers on its team's host
#     with its team's flag, without a pod restart;
#   - PUT to first greeting through the gateway, measured over 5 starts.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
export GATEWAY_DOMAIN=ctf.localhost
# shellcheck source=ctf_real_lib.sh
source "$(dirname "$0")/ctf_real_lib.sh"
real_ctf_init ctf-gateway-real

log "a devcluster with a real node and the gateway, the sample images, the operator"
real_ctf_up
ok "the operator runs in the gateway mode; Traefik serves kopc-gateway/ctf on 127.0.0.1:$GATEWAY_PORT"

echo "$passed" >"$WORK/passed"
python3 "$SRC/test/e2e/ctf_real_test.py" gateway || fail "ctf_real_test.py gateway"
passed=$(cat "$WORK/passed")

kill -0 "$OP_PID" 2>/dev/null || fail "the operator died"
grep -q Forbidden "$WORK/op.log" && fail "the operator met Forbidden answers"
stop_real_operator
ok "the operator stops cleanly on SIGTERM; no Forbidden"
echo "PASS: $passed checks"
