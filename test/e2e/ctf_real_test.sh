#!/usr/bin/env bash
# ctf_real_test.sh - the CTF played for real: on a devcluster with a real
# node, the sample challenges (images built from examples/challenges) are
# started through the instance API and checked by connecting to them
# (ctf_real_test.py lifecycle):
#   - Running means answering: the first TCP connection, made the moment the
#     API says Running, gets the greeting with the team's own flag, and a
#     second team's instance of the same challenge a different one; the web
#     challenge serves its flag behind the path robots.txt names;
#   - hardening read from inside the container: non-root uid, read-only
#     root, no service-account token, no capabilities, no_new_privs, seccomp;
#   - the flag is in the container's env and file only, never in a
#     Challenge, an Event, the operator's log or its metrics; a changed flag
#     reaches the running instance;
#   - a new version of the web challenge pushed with spec.update Rolling: the
#     running instance answers version 2 within a stated bound, on the same
#     endpoint, with the same flag and expiry, a new pod, the notice in the
#     team's event stream (issue 30);
#   - renew moves the expiry; at expiry, and after DELETE, nothing is left
#     (namespace, pods, Services, node ports);
#   - an image the registry lacks is Error/ImagePullFailed naming the image,
#     a crashing program Error/CrashLoop, and both recover once fixed.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=ctf_real_lib.sh
source "$(dirname "$0")/ctf_real_lib.sh"
real_ctf_init ctf-real

log "a devcluster with a real node, the sample images, the operator"
real_ctf_up
ok "the operator runs against a cluster with a real node at $NODE_IP"

echo "$passed" >"$WORK/passed"
python3 "$SRC/test/e2e/ctf_real_test.py" lifecycle || fail "ctf_real_test.py lifecycle"
passed=$(cat "$WORK/passed")

kill -0 "$OP_PID" 2>/dev/null || fail "the operator died"
stop_real_operator
ok "the operator stops cleanly on SIGTERM"
echo "PASS: $passed checks"
